"""Frozen model of libvirt host capabilities (``virConnectGetCapabilities``).

Sizes are in KiB throughout, as libvirt reports them.  ``None`` means the
document did not say; empty tuples and sets mean it said "none".
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class CPUTopology:
    """Host CPU topology as libvirt summarises it (per socket counts)."""

    sockets: int | None = None
    dies: int | None = None
    clusters: int | None = None
    cores: int | None = None
    threads: int | None = None


@dataclass(frozen=True, slots=True)
class HostCPU:
    """The host CPU: architecture, model, vendor, features, page sizes."""

    arch: str | None = None
    model: str | None = None
    vendor: str | None = None
    features: frozenset[str] = frozenset()
    topology: CPUTopology | None = None
    page_sizes_kib: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class Pages:
    """Pages of one size in a NUMA cell."""

    size_kib: int
    count: int


@dataclass(frozen=True, slots=True)
class CellCPU:
    """One online CPU of a NUMA cell and where it sits."""

    id: int
    socket_id: int | None = None
    die_id: int | None = None
    cluster_id: int | None = None
    core_id: int | None = None
    siblings: frozenset[int] = frozenset()


@dataclass(frozen=True, slots=True)
class NUMACell:
    """A NUMA cell: memory, pages by size, distances and CPUs."""

    id: int
    memory_kib: int | None = None
    pages: tuple[Pages, ...] = ()
    distances: tuple[tuple[int, int], ...] = ()
    cpus: tuple[CellCPU, ...] = ()

    @property
    def cpu_ids(self) -> frozenset[int]:
        """Ids of this cell's CPUs."""
        return frozenset(cpu.id for cpu in self.cpus)

    def distance_to(self, cell_id: int) -> int | None:
        """Distance from this cell to ``cell_id``, if the document says."""
        return dict(self.distances).get(cell_id)


@dataclass(frozen=True, slots=True)
class CacheBank:
    """A host cache bank (``<cache><bank/>``)."""

    id: int
    level: int
    type: str
    size_kib: int
    cpus: frozenset[int] = frozenset()


@dataclass(frozen=True, slots=True)
class GuestMachine:
    """A machine type a guest architecture offers."""

    name: str
    canonical: str | None = None
    max_cpus: int | None = None
    deprecated: bool = False


@dataclass(frozen=True, slots=True)
class GuestDomain:
    """A domain (virt) type for a guest arch, with any overrides it has."""

    type: str
    emulator: str | None = None
    machines: tuple[GuestMachine, ...] = ()


@dataclass(frozen=True, slots=True)
class Guest:
    """A guest the host can run: OS type, arch, emulator, machines."""

    os_type: str
    arch: str
    wordsize: int | None = None
    emulator: str | None = None
    machines: tuple[GuestMachine, ...] = ()
    domains: tuple[GuestDomain, ...] = ()
    features: frozenset[str] = frozenset()

    @property
    def domain_types(self) -> tuple[str, ...]:
        """Virt types (``qemu``, ``kvm``, …) this guest arch supports."""
        return tuple(domain.type for domain in self.domains)

    def machines_for(self, domain_type: str) -> tuple[GuestMachine, ...]:
        """Machine types for ``domain_type``: its own list, else the arch's."""
        for domain in self.domains:
            if domain.type == domain_type and domain.machines:
                return domain.machines
        return self.machines


@dataclass(frozen=True, slots=True)
class HostCapabilities:
    """Everything read from one host capabilities document."""

    source: str
    uuid: str | None = None
    cpu: HostCPU = HostCPU()
    iommu: bool | None = None
    cells: tuple[NUMACell, ...] = ()
    cache: tuple[CacheBank, ...] = ()
    guests: tuple[Guest, ...] = ()

    @property
    def cpu_ids(self) -> frozenset[int]:
        """Ids of every CPU listed in any NUMA cell."""
        return frozenset().union(*(cell.cpu_ids for cell in self.cells))

    def cell(self, cell_id: int) -> NUMACell | None:
        """The NUMA cell with id ``cell_id``, if any."""
        for cell in self.cells:
            if cell.id == cell_id:
                return cell
        return None

    @property
    def guest_arches(self) -> tuple[str, ...]:
        """Architectures guests can be run as, in document order, unique."""
        return tuple(dict.fromkeys(guest.arch for guest in self.guests))
