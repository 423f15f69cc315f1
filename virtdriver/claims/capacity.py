"""The capacity rules: what a host's NUMA cells can hold (pure).

Shared by :func:`~virtdriver.claims.fit.fit` (which places within them) and
:func:`check_capacity` (which proves a whole usage keeps to them, for
:func:`~virtdriver.claims.usage.claim` and the claims document):

* dedicated host CPUs are taken by one instance each: its pinned vCPUs, its
  emulator thread CPU and, under thread policy ``isolate``, the other
  threads of every core it uses;
* shared vCPUs of a cell stay within ``cpu_allocation_ratio`` × the cell's
  shared CPUs, over all cells plus floating vCPUs within the ratio × the
  host's shared CPUs (compared as Placement does: ``used > total × ratio``
  is over); no one instance has more shared vCPUs than there are shared CPUs;
* memory is never overcommitted: small-page memory of a cell is its
  ``memory_mb`` less the memory its huge pages hold (that is not available
  as small pages), further bounded by its small page pool; huge pages by
  the pool's available pages.  Floating memory counts against the host's
  small-page memory as a whole.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from virtdriver.claims.model import THREAD_ISOLATE
from virtdriver.cpuset import format_cpuset
from virtdriver.drivers.host_resources import CellResources, HostResources

if TYPE_CHECKING:
    from virtdriver.claims.usage import HostUsage, InstanceFit


def cell_cores(cell: CellResources) -> tuple[tuple[int, ...], ...]:
    """The cell's usable CPUs grouped by core (thread siblings together),
    each core sorted, cores ordered by their first CPU."""
    usable = cell.pcpus | cell.vcpus
    parent = {cpu: cpu for cpu in usable}

    def root(cpu: int) -> int:
        while parent[cpu] != cpu:
            parent[cpu] = parent[parent[cpu]]
            cpu = parent[cpu]
        return cpu

    for cpu in usable:
        for sibling in cell.siblings.get(cpu, ()):
            if sibling in usable:
                parent[root(sibling)] = root(cpu)
    cores: dict[int, list[int]] = {}
    for cpu in sorted(usable):
        cores.setdefault(root(cpu), []).append(cpu)
    return tuple(sorted(tuple(c) for c in cores.values()))


def small_capacity_mb(cell: CellResources) -> int | None:
    """Small-page memory guests may use in ``cell``; ``None`` if unknown
    (:attr:`~virtdriver.drivers.host_resources.CellResources.
    small_capacity_mb`, the ``MEMORY_MB`` the cell offers less its
    reservation)."""
    return cell.small_capacity_mb


def host_small_capacity_mb(host: HostResources) -> int | None:
    """Small-page memory over the cells that state it (``None``: none do)."""
    known = [c for c in map(small_capacity_mb, host.cells) if c is not None]
    return sum(known) if known else None


def shared_limit(cpus: int, ratio: float) -> str:
    """``N shared CPUs × cpu_allocation_ratio R`` for messages."""
    return f"{cpus} shared CPUs × cpu_allocation_ratio {ratio:g}"


def check_capacity(usage: HostUsage, host: HostResources, *,
                   cpu_allocation_ratio: float | None = None) -> list[str]:
    """Every way ``usage`` does not fit ``host`` (module rules); empty if it
    fits.  Each problem names the instance field or the cell."""
    ratio = (host.pinning.cpu_allocation_ratio if cpu_allocation_ratio is None
             else cpu_allocation_ratio)
    problems = []
    for uuid, inst in usage.instances.items():
        problems.extend(_fit_problems(inst, host, f"instances.{uuid}"))
    for cid, used in usage.cells.items():
        cell = host.cell(cid)
        if cell is None:
            continue  # named above, per instance
        shared = len(cell.vcpus)
        if used.shared_vcpus > shared * ratio:
            problems.append(f"cell {cid}: {used.shared_vcpus} shared vCPUs "
                            f"placed, above {shared_limit(shared, ratio)}")
        capacity = small_capacity_mb(cell)
        if used.small_memory_mb and (capacity is None
                                     or used.small_memory_mb > capacity):
            problems.append(f"cell {cid}: {used.small_memory_mb} MiB of small "
                            f"pages used, above the {capacity or 0} MiB it has")
        for size, pages in used.pages.items():
            pool = cell.huge_pages.get(size)
            if pool is not None and pages > pool.available:
                problems.append(f"cell {cid}: {pages} pages of {size} KiB "
                                f"used, above the {pool.available} available")
    shared = len(host.vcpus)
    if usage.shared_vcpus > shared * ratio:
        problems.append(f"host: {usage.shared_vcpus} shared vCPUs placed, "
                        f"above {shared_limit(shared, ratio)}")
    capacity = host_small_capacity_mb(host)
    if usage.floating_memory_mb and (capacity is None
                                     or usage.small_memory_mb > capacity):
        problems.append(f"host: {usage.small_memory_mb} MiB of small pages "
                        f"used, above the {capacity or 0} MiB it has")
    return problems


def _fit_problems(inst: InstanceFit, host: HostResources, where: str
                  ) -> list[str]:
    problems = []
    if inst.floating_vcpus > len(host.vcpus):
        problems.append(f"{where}.floating: {inst.floating_vcpus} vCPUs, "
                        f"more than the host's {len(host.vcpus)} shared CPUs")
    for index, c in enumerate(inst.cells):
        at = f"{where}.cells[{index}]"
        cell = host.cell(c.host_cell)
        if cell is None:
            problems.append(f"{at}.host_cell: the host has no cell "
                            f"{c.host_cell}")
            continue
        for name, cpus in (("pinning", frozenset(c.pinning.values())),
                           ("reserved_cpus", c.reserved_cpus),
                           ("emulator_cpus", c.emulator_cpus)):
            if stray := cpus - cell.pcpus:
                problems.append(
                    f"{at}.{name}: {_cpus(stray, 'is', 'are')} not "
                    f"dedicated on host cell {c.host_cell} (dedicated: "
                    f"{format_cpuset(cell.pcpus) or 'none'})")
        if len(c.shared_vcpus) > len(cell.vcpus):
            problems.append(f"{at}.shared_vcpus: {len(c.shared_vcpus)}, more "
                            f"than the {len(cell.vcpus)} shared CPUs of host "
                            f"cell {c.host_cell}")
        size = c.page_size_kib
        if size is not None and size not in cell.huge_pages:
            problems.append(f"{at}.page_size_kib: host cell {c.host_cell} has "
                            f"no {size} KiB huge pages")
        elif size is not None and c.memory_mb * 1024 % size:
            problems.append(f"{at}.memory_mb: {c.memory_mb} MiB is not a "
                            f"whole number of {size} KiB pages")
        if inst.cpu_thread_policy == THREAD_ISOLATE:
            taken = c.host_cpus
            for core in cell_cores(cell):
                if taken & set(core) and not taken >= set(core):
                    problems.append(
                        f"{at}: thread policy isolate, but core "
                        f"{format_cpuset(core)} is not kept whole for it "
                        f"(missing: {format_cpuset(set(core) - taken)})")
    return problems


def _cpus(cpus: set[int] | frozenset[int], one: str, many: str) -> str:
    """``host CPU 4 is`` or ``host CPUs 4-5 are``."""
    if len(cpus) == 1:
        return f"host CPU {format_cpuset(cpus)} {one}"
    return f"host CPUs {format_cpuset(cpus)} {many}"
