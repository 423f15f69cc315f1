"""What instances took from a host's NUMA cells, and checks that it fits.

Pure, frozen data (no I/O):

* :class:`CellFit` — one guest node on one host cell: vCPU → host CPU
  pinning, the shared vCPUs, memory and the page size chosen.
* :class:`InstanceFit` — everything one instance took; an instance without
  a NUMA topology takes ``floating`` vCPUs and memory from the host as a
  whole, not from a cell (Nova does not place those per cell either).
* :class:`HostUsage` — every instance's fit by uuid; the per-cell totals
  (:class:`CellUsage`) are always derived from the fits, never stored apart,
  so they cannot disagree with them.

:func:`claim` adds a fit (checked again: no host CPU taken twice and, given
the host, every capacity rule of :mod:`~virtdriver.claims.capacity`),
:func:`release` removes one, :func:`inventory_usage` gives the totals in the
provider tree's resource classes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

import os_resource_classes as orc

from virtdriver.claims.capacity import check_capacity
from virtdriver.claims.model import ClaimError
from virtdriver.cpuset import format_cpuset
from virtdriver.drivers.host_resources import HostResources
from virtdriver.drivers.host_tree import page_resource_class


class ClaimConflict(ClaimError):
    """A fit cannot be added to (or a document cannot be) a usage.

    Attributes:
        problems: every problem, each naming the instance (and, for a
            document, the field) and what is wrong.
    """

    def __init__(self, head: str, problems: Iterable[str], hint: str) -> None:
        self.problems = tuple(problems)
        super().__init__(f"{head}: " + "; ".join(self.problems)
                         + f"; {hint}")


class UnknownClaim(ClaimError):
    """Release of an instance that holds no claim on this host."""


@dataclass(frozen=True)
class CellFit:
    """One guest NUMA node placed on one host cell.

    Attributes:
        guest_cell: the guest node id.
        host_cell: the host NUMA cell id.
        pinning: guest vCPU → the dedicated host CPU it is pinned to.
        shared_vcpus: guest vCPUs floating over the cell's shared CPUs.
        memory_mb: guest memory on this cell.
        page_size_kib: the huge page size backing it; ``None`` for small
            pages.
        reserved_cpus: dedicated host CPUs kept idle for this instance
            (the sibling threads under thread policy ``isolate``).
        emulator_cpus: dedicated host CPUs for the emulator threads.
    """

    guest_cell: int
    host_cell: int
    pinning: Mapping[int, int]
    shared_vcpus: frozenset[int]
    memory_mb: int
    page_size_kib: int | None = None
    reserved_cpus: frozenset[int] = frozenset()
    emulator_cpus: frozenset[int] = frozenset()

    def __post_init__(self) -> None:
        object.__setattr__(self, "pinning",
                           MappingProxyType(dict(self.pinning)))

    @property
    def host_cpus(self) -> frozenset[int]:
        """Every dedicated host CPU this cell fit takes."""
        return (frozenset(self.pinning.values()) | self.reserved_cpus
                | self.emulator_cpus)

    @property
    def pages(self) -> int:
        """Huge pages taken (0 for small pages)."""
        if self.page_size_kib is None:
            return 0
        return self.memory_mb * 1024 // self.page_size_kib


@dataclass(frozen=True)
class InstanceFit:
    """What one instance took from the host.

    Attributes:
        uuid: the instance.
        cells: one :class:`CellFit` per guest node; empty for an instance
            without a NUMA topology.
        cpu_thread_policy: the thread policy its pinning honours (checked
            again on load: ``isolate`` must keep its siblings).
        floating_vcpus: shared vCPUs of an instance without a NUMA
            topology, charged to the host as a whole.
        floating_memory_mb: its memory, likewise.
        devices: the devices it took
            (:class:`~virtdriver.claims.device_claim.DeviceClaim`).
    """

    uuid: str
    cells: tuple[CellFit, ...] = ()
    cpu_thread_policy: str | None = None
    floating_vcpus: int = 0
    floating_memory_mb: int = 0
    devices: tuple = ()

    @property
    def pinning(self) -> Mapping[int, int]:
        """Guest vCPU → host CPU over every cell."""
        return MappingProxyType({v: p for c in self.cells
                                 for v, p in c.pinning.items()})

    @property
    def emulator_cpus(self) -> frozenset[int]:
        """The host CPUs of the emulator threads (empty unless isolated)."""
        return frozenset().union(*(c.emulator_cpus for c in self.cells))

    @property
    def host_cpus(self) -> frozenset[int]:
        """Every dedicated host CPU the instance takes."""
        return frozenset().union(*(c.host_cpus for c in self.cells))


@dataclass(frozen=True)
class CellUsage:
    """The totals of one host cell over every instance."""

    cell_id: int
    pinned_cpus: frozenset[int] = frozenset()
    reserved_cpus: frozenset[int] = frozenset()
    emulator_cpus: frozenset[int] = frozenset()
    shared_vcpus: int = 0
    memory_mb: int = 0
    small_memory_mb: int = 0
    pages: Mapping[int, int] = field(
        default_factory=lambda: MappingProxyType({}))

    @property
    def used_cpus(self) -> frozenset[int]:
        """Dedicated CPUs nobody else may take."""
        return self.pinned_cpus | self.reserved_cpus | self.emulator_cpus


@dataclass(frozen=True)
class HostUsage:
    """Every claim on one host, by instance uuid (frozen).

    Construction refuses fits that overlap (:class:`ClaimConflict`): a host
    CPU taken twice, a uuid that is not its fit's.  Capacity needs the host:
    :func:`check_capacity`.  Two usages are equal when their fits are.
    """

    instances: Mapping[str, InstanceFit] = field(
        default_factory=lambda: MappingProxyType({}))
    cells: Mapping[int, CellUsage] = field(init=False, compare=False,
                                           repr=False)
    floating_vcpus: int = field(init=False, compare=False, repr=False)
    floating_memory_mb: int = field(init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        instances = dict(sorted(dict(self.instances).items()))
        problems = overlap_problems(instances)
        if problems:
            raise ClaimConflict("the claims overlap", problems,
                                "fit the instance again on the current usage")
        object.__setattr__(self, "instances", MappingProxyType(instances))
        object.__setattr__(self, "cells", _cell_totals(instances.values()))
        object.__setattr__(self, "floating_vcpus", sum(
            i.floating_vcpus for i in instances.values()))
        object.__setattr__(self, "floating_memory_mb", sum(
            i.floating_memory_mb for i in instances.values()))

    def cell(self, cell_id: int) -> CellUsage:
        """The totals of cell ``cell_id`` (empty if nothing is on it)."""
        return self.cells.get(cell_id) or CellUsage(cell_id)

    @property
    def shared_vcpus(self) -> int:
        """Shared vCPUs over every cell plus the floating ones."""
        return self.floating_vcpus + sum(c.shared_vcpus
                                         for c in self.cells.values())

    @property
    def small_memory_mb(self) -> int:
        """Small-page memory over every cell plus the floating memory."""
        return self.floating_memory_mb + sum(c.small_memory_mb
                                             for c in self.cells.values())


def _cell_totals(fits: Iterable[InstanceFit]) -> Mapping[int, CellUsage]:
    totals: dict[int, dict[str, Any]] = {}
    for inst in fits:
        for c in inst.cells:
            t = totals.setdefault(c.host_cell, {
                "pinned": set(), "reserved": set(), "emulator": set(),
                "shared": 0, "memory": 0, "small": 0, "pages": {}})
            t["pinned"].update(c.pinning.values())
            t["reserved"] |= c.reserved_cpus
            t["emulator"] |= c.emulator_cpus
            t["shared"] += len(c.shared_vcpus)
            t["memory"] += c.memory_mb
            if c.page_size_kib is None:
                t["small"] += c.memory_mb
            else:
                t["pages"][c.page_size_kib] = (
                    t["pages"].get(c.page_size_kib, 0) + c.pages)
    return MappingProxyType({
        cid: CellUsage(cid, frozenset(t["pinned"]), frozenset(t["reserved"]),
                       frozenset(t["emulator"]), t["shared"], t["memory"],
                       t["small"], MappingProxyType(dict(sorted(
                           t["pages"].items()))))
        for cid, t in sorted(totals.items())})


def overlap_problems(instances: Mapping[str, InstanceFit],
                     path: Callable[[str], str] = "instances.{}".format
                     ) -> list[str]:
    """What makes these fits inconsistent with each other, host aside.

    A fit's key must be its uuid; within a fit guest nodes, host cells and
    guest vCPUs appear once and no host CPU has two uses; across fits no
    host CPU is taken twice.  Problems start with ``path(uuid)``.
    """
    problems = []
    owner: dict[int, str] = {}
    units: dict[tuple[str, str], str] = {}
    for key, inst in instances.items():
        where = path(key)
        if inst.uuid != key:
            problems.append(f"{where}: holds the fit of instance {inst.uuid}")
        for label, values in (
                ("guest node", [c.guest_cell for c in inst.cells]),
                ("host cell", [c.host_cell for c in inst.cells]),
                ("guest vCPU", [v for c in inst.cells
                                for v in (*c.pinning, *c.shared_vcpus)]),
                ("host CPU", [p for c in inst.cells
                              for p in (*c.pinning.values(), *c.reserved_cpus,
                                        *c.emulator_cpus)])):
            if dup := _duplicates(values):
                problems.append(f"{where}: {label}s {format_cpuset(dup)} "
                                "appear more than once")
        for cpu in sorted(inst.host_cpus):
            other = owner.setdefault(cpu, key)
            if other != key:
                problems.append(f"{where}: host CPU {cpu} is already taken "
                                f"by instance {other}")
        for device in inst.devices:
            for unit in device.units:
                other = units.setdefault((device.provider, unit), key)
                if other != key or device.units.count(unit) > 1:
                    problems.append(
                        f"{where}: device {unit} of {device.provider} is "
                        f"already taken by instance {other}")
    return problems


def taken_devices(usage: HostUsage) -> dict[str, list[str]]:
    """Device provider name → the units claims hold on it."""
    found: dict[str, list[str]] = {}
    for inst in usage.instances.values():
        for device in inst.devices:
            found.setdefault(device.provider, []).extend(device.units)
    return found


def _duplicates(values: list[int]) -> set[int]:
    seen: set[int] = set()
    return {v for v in values if v in seen or seen.add(v)}


def claim(usage: HostUsage, fit: InstanceFit,
          host: HostResources | None = None, *,
          cpu_allocation_ratio: float | None = None) -> HostUsage:
    """``usage`` with ``fit`` added.

    Always checked again: the uuid holds no claim yet and no host CPU is
    taken twice, so a fit computed on stale usage cannot double-pin.  With
    ``host`` (the tracker passes it) also every capacity rule of the module
    (:mod:`~virtdriver.claims.capacity`; ``cpu_allocation_ratio`` defaults
    to the host's option).

    Raises:
        ClaimConflict: the fit no longer fits; fit it again on ``usage``.
    """
    if fit.uuid in usage.instances:
        raise ClaimConflict(f"instance {fit.uuid} cannot claim",
                            ["it already holds a claim on this host"],
                            "release it first")
    try:
        new = HostUsage({**usage.instances, fit.uuid: fit})
    except ClaimConflict as exc:
        raise ClaimConflict(f"the claim of instance {fit.uuid} conflicts "
                            "with the current usage", exc.problems,
                            "fit the instance again on the current usage"
                            ) from None
    if host is not None:
        problems = check_capacity(new, host,
                                  cpu_allocation_ratio=cpu_allocation_ratio)
        if problems:
            raise ClaimConflict(f"the claim of instance {fit.uuid} does not "
                                "fit the current usage", problems,
                                "fit the instance again on the current usage")
    return new


def release(usage: HostUsage, instance_uuid: str) -> HostUsage:
    """``usage`` without ``instance_uuid``'s claim, exactly as before it.

    Raises:
        UnknownClaim: the instance holds no claim here.
    """
    if instance_uuid not in usage.instances:
        held = ", ".join(usage.instances) or "none"
        raise UnknownClaim(f"instance {instance_uuid} holds no claim on this "
                           f"host (claims held: {held}); nothing to release, "
                           "check the instance uuid")
    return HostUsage({u: f for u, f in usage.instances.items()
                      if u != instance_uuid})


def inventory_usage(usage: HostUsage, host: HostResources
                    ) -> dict[int | None, dict[str, int]]:
    """Usage per host cell in the tree's resource classes.

    ``{cell_id: {VCPU, PCPU, MEMORY_MB, CUSTOM_MEM_PAGE_SIZE_<KiB>: used}}``
    with every class the cell offers (0 when unused).  ``PCPU`` counts every
    dedicated CPU taken (isolated siblings and emulator CPUs included);
    ``MEMORY_MB`` guest memory on the cell's small pages (huge pages count
    as their page class only, as the cell's inventory offers them: never
    both).  Instances without a
    NUMA topology are under the key ``None`` (the host as a whole), present
    only when there are some.
    """
    result: dict[int | None, dict[str, int]] = {}
    for cell in host.cells:
        used = usage.cell(cell.cell_id)
        row = {}
        if cell.vcpus or used.shared_vcpus:
            row[orc.VCPU] = used.shared_vcpus
        if cell.pcpus or used.used_cpus:
            row[orc.PCPU] = len(used.used_cpus)
        if cell.small_memory_mb or used.small_memory_mb:
            row[orc.MEMORY_MB] = used.small_memory_mb
        for size in sorted(set(cell.huge_pages) | set(used.pages)):
            pool = cell.huge_pages.get(size)
            if (pool is not None and pool.total) or used.pages.get(size):
                row[page_resource_class(size)] = used.pages.get(size, 0)
        result[cell.cell_id] = row
    if usage.floating_vcpus or usage.floating_memory_mb:
        result[None] = {orc.VCPU: usage.floating_vcpus,
                        orc.MEMORY_MB: usage.floating_memory_mb}
    return result
