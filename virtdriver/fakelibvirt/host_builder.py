"""Build a host's ``getCapabilities()`` document from a topology.

:class:`HostBuilder` describes a host the way one would describe hardware
(NUMA cells, sockets per cell, cores per socket, threads per core, memory
and huge pages per cell, offline CPUs, CPU model and features, the guests
the hypervisor runs) and renders the ``<capabilities>`` XML libvirt 9.0
writes for it, plus the matching ``getCPUMap()`` and ``getInfo()`` answers.

What follows libvirt, and why:

* **CPU numbering.** ``numbering="interleaved"`` (the default) numbers CPUs
  as Linux does on most Intel servers: the first thread of every core of
  every socket first, then the second threads, so core 0's siblings are
  ``0`` and ``cores_total``, written ``siblings='0,8'``.
  ``numbering="adjacent"`` puts a core's threads next to each other
  (``siblings='0-1'``), as on many AMD and Arm hosts.  Sibling lists use
  libvirt's bitmap format (ranges for runs, ``0-1``; commas otherwise).
* **Ids.** ``socket_id`` counts sockets across the host (cell 1's first
  socket is ``sockets_per_cell``); ``core_id`` counts cores within a
  socket, as Linux's ``topology/core_id``; ``die_id`` is ``0``.
  ``cluster_id`` is not written: libvirt 9.0 (Debian 12) has no clusters
  and its schema refuses the attribute.
* **Offline CPUs are left out of the cells.** libvirt builds each cell
  from the kernel's per-node CPU map, which holds online CPUs only
  (``virCapabilitiesHostNUMAInitReal``; its fallback,
  ``virCapabilitiesHostNUMAInitFake``, skips offline CPUs explicitly), and
  a thread's sibling list names only online threads.  ``<cpus num>``
  counts the CPUs listed.  Offline CPUs show only in :meth:`cpu_map`.
* **Pages.** Each cell lists its base page first with ``(memory - huge
  pages' memory) / page size`` pages (libvirt's ``virNumaGetPageInfo``
  subtracts the huge pages from the node's memory), then every huge page
  size the host supports, with ``0`` where none are reserved.
  ``<host><cpu>`` lists every page size once.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import NamedTuple

from lxml import etree

from virtdriver.cpuset import format_cpuset
from virtdriver.fakelibvirt._builder_xml import sub, to_xml, yes_no

#: Guest features that carry ``default``/``toggle`` attributes, as libvirt's
#: QEMU driver reports them.
_TOGGLES = {"acpi": ("on", "yes"), "apic": ("on", "no"),
            "disksnapshot": ("on", "no")}
#: libvirt's order of guest features (``virCapsGuestFeatureType``).
_FEATURE_ORDER = ("pae", "nonpae", "ia64_be", "acpi", "apic",
                  "cpuselection", "deviceboot", "disksnapshot", "hap")
_WORDSIZE_32 = {"i686": 32, "armv7l": 32, "armv6l": 32, "ppc": 32,
                "riscv32": 32, "mips": 32, "mipsel": 32, "sparc": 32,
                "s390": 31}
_QEMU_BINARY_ARCH = {"i686": "i386", "armv7l": "arm", "armv6l": "arm",
                     "ppc64le": "ppc64"}
_DEFAULT_MACHINES = {
    "x86_64": ("pc-i440fx-7.2", ("pc", "pc-i440fx-7.2"),
               "pc-q35-7.2", ("q35", "pc-q35-7.2")),
    "i686": ("pc-i440fx-7.2", ("pc", "pc-i440fx-7.2"),
             "pc-q35-7.2", ("q35", "pc-q35-7.2")),
    "aarch64": ("virt-7.2", ("virt", "virt-7.2")),
    "armv7l": ("virt-7.2", ("virt", "virt-7.2")),
    "riscv64": ("virt",),
    "ppc64": ("pseries-7.2", ("pseries", "pseries-7.2")),
    "ppc64le": ("pseries-7.2", ("pseries", "pseries-7.2")),
    "s390x": ("s390-ccw-virtio-7.2",
              ("s390-ccw-virtio", "s390-ccw-virtio-7.2")),
}


@dataclass(frozen=True)
class Cell:
    """One NUMA cell that differs from the host-wide defaults.

    Any field left ``None`` takes :class:`HostBuilder`'s value
    (``memory_mb_per_cell``, ``pages``, ``base_page_kib``).
    """

    memory_mb: int | None = None
    #: Huge pages reserved in this cell: page size in KiB -> count.
    pages: Mapping[int, int] | None = None
    base_page_kib: int | None = None


@dataclass(frozen=True)
class Machine:
    """A machine type in a guest's ``<machine>`` list."""

    name: str
    canonical: str | None = None
    max_cpus: int | None = None
    deprecated: bool = False


@dataclass(frozen=True)
class GuestSpec:
    """A ``<guest>``: OS type, arch, virt (domain) types and machines.

    ``machines`` items are :class:`Machine`, a name, or ``(alias,
    canonical)``; ``None`` gives the arch's usual QEMU 7.2 list.
    ``emulator`` ``None`` is ``/usr/bin/qemu-system-<arch>``; ``features``
    ``None`` is what libvirt's QEMU driver reports for the arch.
    """

    arch: str
    domain_types: tuple[str, ...] = ("qemu", "kvm")
    machines: tuple[Machine, ...] | None = None
    emulator: str | None = None
    os_type: str = "hvm"
    wordsize: int | None = None
    features: tuple[str, ...] | None = None

    def __post_init__(self) -> None:
        machines = (_DEFAULT_MACHINES.get(self.arch, ())
                    if self.machines is None else self.machines)
        object.__setattr__(self, "domain_types", tuple(self.domain_types))
        object.__setattr__(self, "machines",
                           tuple(_machine(m) for m in machines))
        if self.emulator is None:
            binary = _QEMU_BINARY_ARCH.get(self.arch, self.arch)
            object.__setattr__(self, "emulator",
                               f"/usr/bin/qemu-system-{binary}")
        if self.wordsize is None:
            object.__setattr__(self, "wordsize",
                               _WORDSIZE_32.get(self.arch, 64))
        if self.features is None:
            object.__setattr__(self, "features", _default_features(
                self.arch, self.os_type))
        if not self.domain_types:
            raise ValueError(f"guest {self.arch}: domain_types is empty; "
                             "name at least one virt type, e.g. ('kvm',)")


class CPUPlace(NamedTuple):
    """Where one CPU sits: what a ``<cpu>`` of a cell says about it."""

    id: int
    cell: int
    socket_id: int
    core_id: int
    siblings: frozenset[int]
    online: bool


@dataclass(frozen=True)
class HostBuilder:
    """A host topology, rendered as libvirt's host capabilities.

    Counts are per containing level: ``sockets_per_cell`` sockets in each
    cell, ``cores`` per socket, ``threads`` per core.  ``cells`` is a count
    of identical cells or a sequence of :class:`Cell` overrides.
    ``pages`` maps a huge page size (KiB) to the pages reserved in each
    cell; ``huge_page_sizes_kib`` are the sizes the host supports (listed
    with 0 pages where none are reserved).  ``offline_cpus`` are CPU ids
    that exist but are offline.  ``distances`` ``True`` writes the usual
    SLIT (10 local, 21 remote), ``False`` none, or give the matrix.
    ``guests`` items are :class:`GuestSpec` or ``(arch, domain_types,
    machines)``; ``None`` is one QEMU guest of the host arch.
    """

    arch: str = "x86_64"
    cells: int | Sequence[Cell] = 1
    sockets_per_cell: int = 1
    cores: int = 4
    threads: int = 1
    memory_mb_per_cell: int = 8192
    pages: Mapping[int, int] = field(
        default_factory=lambda: MappingProxyType({}))
    huge_page_sizes_kib: tuple[int, ...] = (2048, 1048576)
    base_page_kib: int = 4
    cpu_model: str | None = None
    vendor: str | None = None
    features: tuple[str, ...] = ()
    topology: bool = True
    offline_cpus: frozenset[int] = frozenset()
    numbering: str = "interleaved"
    distances: bool | Sequence[Sequence[int]] = True
    uuid: str | None = None
    iommu: bool = False
    migration: bool = True
    mhz: int = 2400
    guests: Sequence[GuestSpec | tuple] | None = None

    def __post_init__(self) -> None:
        cells = (tuple(Cell() for _ in range(self.cells))
                 if isinstance(self.cells, int) else tuple(self.cells))
        guests = ((GuestSpec(self.arch),) if self.guests is None else tuple(
            g if isinstance(g, GuestSpec) else GuestSpec(*g)
            for g in self.guests))
        object.__setattr__(self, "cells", cells)
        object.__setattr__(self, "guests", guests)
        object.__setattr__(self, "pages", MappingProxyType(dict(self.pages)))
        object.__setattr__(self, "features", tuple(self.features))
        object.__setattr__(self, "offline_cpus", frozenset(self.offline_cpus))
        self._check()

    def _check(self) -> None:
        for name in ("sockets_per_cell", "cores", "threads", "mhz",
                     "base_page_kib", "memory_mb_per_cell"):
            if getattr(self, name) < 1:
                raise ValueError(f"HostBuilder.{name} must be at least 1, "
                                 f"not {getattr(self, name)}")
        if not self.cells:
            raise ValueError("HostBuilder.cells: a host has at least one "
                             "NUMA cell")
        if self.numbering not in ("interleaved", "adjacent"):
            raise ValueError(f"HostBuilder.numbering {self.numbering!r}: "
                             "use 'interleaved' or 'adjacent'")
        unknown = self.offline_cpus - {p.id for p in self._all_places()}
        if unknown:
            raise ValueError(
                f"HostBuilder.offline_cpus names CPUs the host does not "
                f"have: {format_cpuset(unknown)} (it has CPUs 0-"
                f"{self.cpu_count - 1})")
        for cell_id, cell in enumerate(self.cells):
            memory_kib = self._memory_kib(cell)
            huge_kib = sum(size * count
                           for size, count in self._huge(cell).items())
            if huge_kib > memory_kib:
                raise ValueError(
                    f"cell {cell_id}: huge pages need {huge_kib} KiB but the "
                    f"cell has {memory_kib} KiB; lower the page counts or "
                    f"raise the memory")
        if not isinstance(self.distances, bool):
            n = len(self.cells)
            if len(self.distances) != n or any(len(r) != n
                                               for r in self.distances):
                raise ValueError(f"HostBuilder.distances must be a {n}x{n} "
                                 "matrix, one row per cell")

    # -- topology -----------------------------------------------------------

    @property
    def cpu_count(self) -> int:
        """CPUs the host has, online or not."""
        return len(self.cells) * self.sockets_per_cell * self.cores \
            * self.threads

    def places(self) -> tuple[CPUPlace, ...]:
        """Every CPU, in id order, with siblings among online CPUs only."""
        places = self._all_places()
        online = {p.id for p in places if p.online}
        return tuple(p._replace(siblings=p.siblings & online)
                     if p.online else p._replace(siblings=frozenset())
                     for p in places)

    def _all_places(self) -> list[CPUPlace]:
        total_cores = len(self.cells) * self.sockets_per_cell * self.cores
        places = []
        for core in range(total_cores):
            socket = core // self.cores
            ids = [self._cpu_id(core, thread, total_cores)
                   for thread in range(self.threads)]
            places.extend(
                CPUPlace(cpu_id, socket // self.sockets_per_cell, socket,
                         core % self.cores, frozenset(ids),
                         cpu_id not in self.offline_cpus)
                for cpu_id in ids)
        return sorted(places)

    def _cpu_id(self, core: int, thread: int, total_cores: int) -> int:
        if self.numbering == "interleaved":
            return thread * total_cores + core
        return core * self.threads + thread

    def _memory_kib(self, cell: Cell) -> int:
        return (cell.memory_mb if cell.memory_mb is not None
                else self.memory_mb_per_cell) * 1024

    def _huge(self, cell: Cell) -> dict[int, int]:
        reserved = self.pages if cell.pages is None else cell.pages
        sizes = sorted(set(self.huge_page_sizes_kib) | set(reserved))
        return {size: reserved.get(size, 0) for size in sizes}

    def _base(self, cell: Cell) -> int:
        return (cell.base_page_kib if cell.base_page_kib is not None
                else self.base_page_kib)

    def _distance(self, a: int, b: int) -> int:
        if self.distances is True:
            return 10 if a == b else 21
        return self.distances[a][b]

    # -- the answers ----------------------------------------------------------

    def cpu_map(self) -> tuple[int, tuple[bool, ...], int]:
        """``getCPUMap()``: (CPU count, online flag per CPU, online count)."""
        flags = tuple(p.online for p in self.places())
        return len(flags), flags, sum(flags)

    def info(self) -> tuple:
        """``getInfo()``: [arch, memory MiB, online CPUs, MHz, nodes,
        sockets per node, cores per socket, threads per core].

        Like libvirt (``virHostCPUGetInfoPopulateLinux``), when nodes ×
        sockets × cores × threads is not the online CPU count (some CPUs
        offline) the topology is reported flat: 1, 1, CPUs, 1.
        """
        online = sum(1 for p in self.places() if p.online)
        memory_mib = sum(self._memory_kib(c) for c in self.cells) // 1024
        topo = (len(self.cells), self.sockets_per_cell, self.cores,
                self.threads)
        if topo[0] * topo[1] * topo[2] * topo[3] != online:
            topo = (1, 1, online, 1)
        return (self.arch, memory_mib, online, self.mhz) + topo

    def to_xml(self) -> str:
        """The ``<capabilities>`` document."""
        root = etree.Element("capabilities")
        host = sub(root, "host")
        if self.uuid:
            sub(host, "uuid", self.uuid)
        self._host_cpu(sub(host, "cpu"))
        sub(host, "power_management")
        sub(host, "iommu", support=yes_no(self.iommu))
        if self.migration:
            features = sub(host, "migration_features")
            sub(features, "live")
            transports = sub(features, "uri_transports")
            for transport in ("tcp", "rdma"):
                sub(transports, "uri_transport", transport)
        self._topology(sub(host, "topology"))
        for guest in self.guests:
            _guest(root, guest)
        return to_xml(root)

    def _host_cpu(self, cpu: etree._Element) -> None:
        sub(cpu, "arch", self.arch)
        if self.cpu_model:
            sub(cpu, "model", self.cpu_model)
        if self.vendor:
            sub(cpu, "vendor", self.vendor)
        if self.topology:
            sub(cpu, "topology", sockets=self.sockets_per_cell, dies=1,
                cores=self.cores, threads=self.threads)
        for name in self.features:
            sub(cpu, "feature", name=name)
        sizes = {self._base(c) for c in self.cells}
        sizes.update(self.huge_page_sizes_kib)
        for cell in self.cells:
            sizes.update(self._huge(cell))
        for size in sorted(sizes):
            sub(cpu, "pages", unit="KiB", size=size)

    def _topology(self, topology: etree._Element) -> None:
        cells_el = sub(topology, "cells", num=len(self.cells))
        places = self.places()
        for cell_id, cell in enumerate(self.cells):
            cell_el = sub(cells_el, "cell", id=cell_id)
            memory_kib = self._memory_kib(cell)
            sub(cell_el, "memory", memory_kib, unit="KiB")
            base = self._base(cell)
            huge_kib = sum(size * count
                           for size, count in self._huge(cell).items())
            sub(cell_el, "pages", (memory_kib - huge_kib) // base,
                unit="KiB", size=base)
            for size, count in self._huge(cell).items():
                sub(cell_el, "pages", count, unit="KiB", size=size)
            if self.distances is not False:
                distances = sub(cell_el, "distances")
                for other in range(len(self.cells)):
                    sub(distances, "sibling", id=other,
                        value=self._distance(cell_id, other))
            mine = [p for p in places if p.cell == cell_id and p.online]
            cpus = sub(cell_el, "cpus", num=len(mine))
            for place in mine:
                sub(cpus, "cpu", id=place.id, socket_id=place.socket_id,
                    die_id=0, core_id=place.core_id,
                    siblings=format_cpuset(place.siblings))


def _machine(spec: Machine | str | tuple) -> Machine:
    if isinstance(spec, Machine):
        return spec
    if isinstance(spec, str):
        return Machine(spec)
    return Machine(*spec)


def _default_features(arch: str, os_type: str) -> tuple[str, ...]:
    if os_type != "hvm":
        return ()
    x86 = arch in ("i686", "x86_64")
    return (("pae", "nonpae") if arch == "i686" else ()) \
        + (("acpi", "apic") if x86 else ()) \
        + ("cpuselection", "deviceboot", "disksnapshot")


def _guest(root: etree._Element, spec: GuestSpec) -> None:
    guest = sub(root, "guest")
    sub(guest, "os_type", spec.os_type)
    arch = sub(guest, "arch", name=spec.arch)
    sub(arch, "wordsize", spec.wordsize)
    sub(arch, "emulator", spec.emulator)
    for machine in spec.machines:
        sub(arch, "machine", machine.name, canonical=machine.canonical,
            maxCpus=machine.max_cpus,
            deprecated="yes" if machine.deprecated else None)
    for domain_type in spec.domain_types:
        sub(arch, "domain", type=domain_type)
    if spec.features:
        features = sub(guest, "features")
        order = {name: i for i, name in enumerate(_FEATURE_ORDER)}
        for name in sorted(spec.features,
                           key=lambda n: order.get(n, len(order))):
            default, toggle = _TOGGLES.get(name, (None, None))
            sub(features, name, default=default, toggle=toggle)
