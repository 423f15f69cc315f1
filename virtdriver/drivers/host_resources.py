"""What each NUMA cell of a host offers guests, given the pinning options.

Pure: host capabilities, the online CPUs (libvirt's ``getCPUMap``) and a
:class:`~virtdriver.conf.PinningConfig` in, :class:`HostResources` out.
The result is whole or not at all: every mismatch between the options
and the host is collected into one :class:`HostResourceError`.

Rules (Nova's where Nova has one):

* **CPUs.**  Neither ``cpu_dedicated_set`` nor ``cpu_shared_set`` set:
  every online CPU of the NUMA cells is shared (VCPU), none dedicated.
  Only ``cpu_dedicated_set``: those CPUs are dedicated (PCPU) and *none*
  are shared, as in Nova.  Only ``cpu_shared_set``: those are shared,
  none dedicated.  Online CPUs in neither set are left to the host.
  ``online_cpus=None`` (not known) counts every CPU of the cells online;
  online CPUs outside every NUMA cell are not offered.
* **Siblings.**  For each usable (dedicated or shared) CPU: its hardware
  thread siblings, itself included, limited to usable CPUs; an unusable
  sibling is dropped, as in Nova.  A CPU libvirt lists without siblings
  is its own only sibling.
* **Memory.**  Cell memory in MiB (KiB // 1024).  Nova reserves
  ``reserved_host_memory_mb`` on the host as a whole; here it is taken
  from cell 0 first, then from the next cells in id order (the kernel
  and host services mostly live on node 0).  A cell whose memory
  libvirt does not state has ``total_memory_mb=None`` (unknown, not
  zero) and takes no reservation; reserving more than the stated memory
  is an error unless no cell states its memory.
* **Pages.**  The smallest page size of a cell (4 KiB on x86, 64 KiB on
  some arm64 and ppc64 hosts) is reported apart, as ``small_pages``;
  every larger size is in ``huge_pages``.  Memory held in huge pages is
  not small-page memory: a cell's ``small_memory_mb`` is its memory less
  its huge pages' (the ``MEMORY_MB`` it offers), never both.
  ``reserved_huge_pages`` may reserve either kind; each entry must name a
  cell and a page size the host has, and no more pages than the cell has.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

from virtdriver.capabilities.host import HostCapabilities, NUMACell
from virtdriver.conf.pinning import (
    OPTION_DEDICATED,
    OPTION_RESERVED_MEMORY,
    OPTION_RESERVED_PAGES,
    OPTION_SHARED,
    PinningConfig,
)
from virtdriver.cpuset import format_cpuset


class HostResourceError(ValueError):
    """The pinning options do not fit this host.

    Attributes:
        problems: one line per problem, each naming the option, the CPUs
            or entry at fault and what to do.
    """

    def __init__(self, problems: list[str]) -> None:
        self.problems = tuple(problems)
        # One problem: one line; several: each on its own line below.
        super().__init__(
            f"the configuration does not fit this host: {problems[0]}"
            if len(self.problems) == 1 else
            "the configuration does not fit this host:"
            + "".join(f"\n  - {p}" for p in self.problems))


@dataclass(frozen=True, slots=True)
class PagePool:
    """Pages of one size in a cell: how many, and how many the host keeps."""

    size_kib: int
    total: int
    reserved: int = 0

    @property
    def available(self) -> int:
        """Pages guests may use."""
        return self.total - self.reserved


@dataclass(frozen=True, slots=True)
class CellResources:
    """What one NUMA cell offers guests.

    Attributes:
        cell_id: the NUMA cell (node) id.
        pcpus: dedicated CPUs (PCPU inventory).
        vcpus: shared CPUs (VCPU inventory).
        siblings: usable CPU -> its thread siblings among usable CPUs.
        total_memory_mb: the cell's memory; ``None`` if libvirt did not say.
        reserved_memory_mb: the part of ``reserved_host_memory_mb`` taken
            from this cell.
        small_pages: the smallest page size, if libvirt lists pages.
        huge_pages: every larger page size, by size in KiB.
        socket: the socket every CPU of the cell is on (``None``: libvirt
            did not say, or they differ); a device's ``socket`` NUMA
            policy compares it.
    """

    cell_id: int
    pcpus: frozenset[int]
    vcpus: frozenset[int]
    siblings: Mapping[int, frozenset[int]]
    total_memory_mb: int | None
    reserved_memory_mb: int
    small_pages: PagePool | None
    huge_pages: Mapping[int, PagePool]
    socket: int | None = None

    @property
    def memory_mb(self) -> int | None:
        """Memory guests may use (MiB), huge pages included; ``None`` if
        unknown."""
        if self.total_memory_mb is None:
            return None
        return self.total_memory_mb - self.reserved_memory_mb

    @property
    def huge_memory_mb(self) -> int:
        """MiB the cell's huge pages hold (reserved ones included)."""
        return sum(p.total * p.size_kib
                   for p in self.huge_pages.values()) // 1024

    @property
    def small_memory_mb(self) -> int | None:
        """The cell's small-page memory (MiB), before any reservation:
        its memory less what its huge pages hold, and no more than its
        small pages hold when libvirt lists them; ``None`` if unknown."""
        return self._small_mb(self.total_memory_mb, lambda pool: pool.total)

    @property
    def small_capacity_mb(self) -> int | None:
        """Small-page memory guests may use (MiB): :attr:`small_memory_mb`
        less ``reserved_host_memory_mb``'s share and the small pages
        ``reserved_huge_pages`` keeps; ``None`` if unknown."""
        return self._small_mb(self.memory_mb, lambda pool: pool.available)

    def _small_mb(self, memory_mb: int | None, pages) -> int | None:
        if memory_mb is None:
            return None
        small = memory_mb - self.huge_memory_mb
        if self.small_pages is not None:
            small = min(small, pages(self.small_pages)
                        * self.small_pages.size_kib // 1024)
        return max(small, 0)


@dataclass(frozen=True, slots=True)
class HostResources:
    """Every cell's resources, and the options they were computed with."""

    cells: tuple[CellResources, ...]
    pinning: PinningConfig

    @property
    def pcpus(self) -> frozenset[int]:
        """Dedicated CPUs of every cell."""
        return frozenset().union(*(cell.pcpus for cell in self.cells))

    @property
    def vcpus(self) -> frozenset[int]:
        """Shared CPUs of every cell."""
        return frozenset().union(*(cell.vcpus for cell in self.cells))

    def cell(self, cell_id: int) -> CellResources | None:
        """The resources of cell ``cell_id``, if the host has it."""
        return next((c for c in self.cells if c.cell_id == cell_id), None)


def host_resources(host: HostCapabilities, online_cpus: frozenset[int] | None,
                   pinning: PinningConfig) -> HostResources:
    """Split the host's CPUs, memory and pages per NUMA cell (module rules).

    Raises:
        HostResourceError: every problem at once: configured CPUs the host
            lacks or that are offline, CPUs in both sets, a memory
            reservation above the host's memory, page reservations for a
            node or size the host lacks or beyond what it has.
    """
    host_cpus = host.cpu_ids
    online = host_cpus if online_cpus is None else host_cpus & online_cpus
    problems = _cpu_problems(pinning, host_cpus, online)
    memory = _memory_reservations(host.cells, pinning.reserved_host_memory_mb,
                                  problems)
    problems.extend(_page_problems(host, pinning))
    if problems:
        raise HostResourceError(problems)
    pcpus = pinning.cpu_dedicated_set or frozenset()
    if pinning.cpu_shared_set is not None:
        vcpus = pinning.cpu_shared_set
    else:
        vcpus = frozenset() if pinning.cpu_dedicated_set else online
    return HostResources(
        cells=tuple(_cell(cell, pcpus, vcpus, memory.get(cell.id, 0), pinning)
                    for cell in host.cells),
        pinning=pinning)


def _cell(cell: NUMACell, pcpus: frozenset[int], vcpus: frozenset[int],
          reserved_mb: int, pinning: PinningConfig) -> CellResources:
    usable = cell.cpu_ids & (pcpus | vcpus)
    siblings = {cpu.id: (cpu.siblings or frozenset({cpu.id})) & usable
                for cpu in cell.cpus if cpu.id in usable}
    pools = sorted((PagePool(p.size_kib, p.count,
                             pinning.reserved_pages(cell.id, p.size_kib))
                    for p in cell.pages), key=lambda pool: pool.size_kib)
    return CellResources(
        cell_id=cell.id, pcpus=cell.cpu_ids & pcpus,
        vcpus=cell.cpu_ids & vcpus, siblings=MappingProxyType(siblings),
        total_memory_mb=(None if cell.memory_kib is None
                         else cell.memory_kib // 1024),
        reserved_memory_mb=reserved_mb,
        small_pages=pools[0] if pools else None,
        huge_pages=MappingProxyType({p.size_kib: p for p in pools[1:]}),
        socket=_socket(cell))


def _socket(cell: NUMACell) -> int | None:
    sockets = {cpu.socket_id for cpu in cell.cpus}
    return sockets.pop() if len(sockets) == 1 else None


def _cpus(cpus: frozenset[int]) -> tuple[str, str, str]:
    """``CPUs 4-5,9``, ``are``, ``them`` (or the singular forms)."""
    if len(cpus) == 1:
        return f"CPU {format_cpuset(cpus)}", "is", "it"
    return f"CPUs {format_cpuset(cpus)}", "are", "them"


def _cpu_problems(pinning: PinningConfig, host_cpus: frozenset[int],
                  online: frozenset[int]) -> list[str]:
    problems = []
    for option, cpus in ((OPTION_DEDICATED, pinning.cpu_dedicated_set),
                         (OPTION_SHARED, pinning.cpu_shared_set)):
        cpus = cpus or frozenset()
        if missing := cpus - host_cpus:
            named, _, it = _cpus(missing)
            problems.append(
                f"{option} names {named}, which this host does not have "
                f"(its NUMA cells hold CPUs {format_cpuset(host_cpus) or 'none'}"
                f"); remove {it} from the option")
        if offline := (cpus & host_cpus) - online:
            named, are, it = _cpus(offline)
            problems.append(
                f"{option} names {named}, which {are} offline (online: "
                f"{format_cpuset(online) or 'none'}); bring {it} online or "
                f"remove {it} from the option")
    both = (pinning.cpu_dedicated_set or frozenset()) & (
        pinning.cpu_shared_set or frozenset())
    if both:
        named, are, it = _cpus(both)
        problems.append(
            f"{named} {are} in both {OPTION_DEDICATED} and {OPTION_SHARED}; "
            f"a CPU is either dedicated or shared, remove {it} from one")
    return problems


def _memory_reservations(cells: tuple[NUMACell, ...], reserved_mb: int,
                         problems: list[str]) -> dict[int, int]:
    """MiB reserved per cell id: cell 0 first, then the next cells."""
    stated = sorted((c for c in cells if c.memory_kib is not None),
                    key=lambda c: c.id)
    total = sum(c.memory_kib // 1024 for c in stated)
    if stated and reserved_mb > total:
        problems.append(
            f"{OPTION_RESERVED_MEMORY} = {reserved_mb} is more than the "
            f"{total} MiB the host's NUMA cells have; lower it")
        return {}
    taken: dict[int, int] = {}
    left = reserved_mb if stated else 0
    for cell in stated:
        taken[cell.id] = min(left, cell.memory_kib // 1024)
        left -= taken[cell.id]
    return taken


def _page_problems(host: HostCapabilities,
                   pinning: PinningConfig) -> list[str]:
    problems = []
    nodes = format_cpuset(c.id for c in host.cells) or "none"
    for r in pinning.reserved_huge_pages:
        where = f"{OPTION_RESERVED_PAGES} entry {r.entry!r}"
        cell = host.cell(r.node)
        if cell is None:
            problems.append(f"{where}: the host has no NUMA node {r.node} "
                            f"(nodes: {nodes}); name one of those")
            continue
        sizes = {p.size_kib: p.count for p in cell.pages}
        if r.size_kib not in sizes:
            listed = ", ".join(map(str, sorted(sizes))) or "none"
            problems.append(f"{where}: NUMA node {r.node} has no "
                            f"{r.size_kib} KiB pages (sizes in KiB: "
                            f"{listed}); use one of those")
        elif r.count > sizes[r.size_kib]:
            problems.append(f"{where}: NUMA node {r.node} has only "
                            f"{sizes[r.size_kib]} pages of {r.size_kib} KiB; "
                            "reserve at most that many")
    return problems
