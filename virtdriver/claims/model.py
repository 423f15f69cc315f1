"""The frozen model of an instance's request, shared by every claims module.

Inputs (what the compute service is asked to run):

* :class:`Flavor` — vCPUs, memory and the operator's extra specs
  (``hw:numa_nodes``, ``hw:cpu_policy``, ``resources:PCPU``, ``trait:…``).
* :class:`Instance` — a flavor, the image properties it was built from and
  its Placement allocations ``{provider uuid: {resource class: amount}}``.

Derived (what :func:`virtdriver.claims.constraints.numa_constraints` makes
of a flavor and an image):

* :class:`NUMARequest` — the guest NUMA topology: one :class:`CellRequest`
  per guest node (which guest vCPUs, which of them dedicated, how much
  memory) plus the instance-wide policies.  ``None`` stands for "no NUMA
  topology": the guest floats over the whole host as today.

Values are normalised, so two requests that mean the same compare equal:
CPU policy is always one of :data:`CPU_POLICIES`; the thread and emulator
thread policies are ``None`` unless CPUs are dedicated; page sizes are
:data:`PAGE_SMALL`, :data:`PAGE_LARGE`, :data:`PAGE_ANY` or an ``int`` in
KiB.

Errors: :class:`ClaimError` (a ``ValueError``) is the base of every claims
refusal; :class:`InvalidRequest` carries every :class:`Problem` found in a
flavor and image, each naming the keys and values at fault.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

#: CPU policies (``hw:cpu_policy`` / ``hw_cpu_policy``).
CPU_SHARED = "shared"
CPU_DEDICATED = "dedicated"
CPU_MIXED = "mixed"
CPU_POLICIES = (CPU_SHARED, CPU_DEDICATED, CPU_MIXED)

#: CPU thread policies (``hw:cpu_thread_policy`` / ``hw_cpu_thread_policy``).
THREAD_PREFER = "prefer"
THREAD_ISOLATE = "isolate"
THREAD_REQUIRE = "require"
THREAD_POLICIES = (THREAD_PREFER, THREAD_ISOLATE, THREAD_REQUIRE)

#: Emulator threads policies (``hw:emulator_threads_policy``).
EMULATOR_SHARE = "share"
EMULATOR_ISOLATE = "isolate"
EMULATOR_POLICIES = (EMULATOR_SHARE, EMULATOR_ISOLATE)

#: Symbolic page sizes (``hw:mem_page_size``); an explicit size is an int
#: in KiB.
PAGE_SMALL = "small"
PAGE_LARGE = "large"
PAGE_ANY = "any"
PAGE_SIZES = (PAGE_SMALL, PAGE_LARGE, PAGE_ANY)

PageSize = str | int | None


def _frozen_mapping(value: Mapping[str, Any] | None) -> Mapping[str, Any]:
    return MappingProxyType(dict(value or {}))


@dataclass(frozen=True)
class Flavor:
    """A flavor: size plus the operator's extra specs (strings to strings).

    ``extra_specs`` is copied into a read-only mapping.  ``root_gb``,
    ``ephemeral_gb`` and ``swap`` (MiB) size its local disk, as Nova's
    flavor fields do.
    """

    vcpus: int
    memory_mb: int
    extra_specs: Mapping[str, str] = field(default_factory=dict)
    name: str = ""
    root_gb: int = 0
    ephemeral_gb: int = 0
    swap: int = 0

    def __post_init__(self) -> None:
        object.__setattr__(self, "extra_specs",
                           _frozen_mapping(self.extra_specs))

    @property
    def disk_gb(self) -> int:
        """``DISK_GB`` the flavor asks for: root + ephemeral + swap rounded
        up to whole GiB (as Nova's scheduler asks)."""
        return self.root_gb + self.ephemeral_gb + -(-self.swap // 1024)


@dataclass(frozen=True)
class Instance:
    """An instance as the claims code needs it.

    Attributes:
        uuid: the instance uuid.
        flavor: its flavor.
        image_properties: the properties of the image it runs now
            (``hw_numa_nodes``, ``trait:CUSTOM_X``…), strings to strings.
        allocations: ``{resource provider uuid: {resource class: amount}}``
            as Placement holds them for this instance.
    """

    uuid: str
    flavor: Flavor
    image_properties: Mapping[str, str] = field(default_factory=dict)
    allocations: Mapping[str, Mapping[str, int]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "image_properties",
                           _frozen_mapping(self.image_properties))
        object.__setattr__(self, "allocations", MappingProxyType({
            rp: _frozen_mapping(res)
            for rp, res in dict(self.allocations or {}).items()}))


@dataclass(frozen=True)
class CellRequest:
    """One guest NUMA node.

    Attributes:
        id: the guest node id (0, 1, …); not a host cell id.
        cpus: the guest vCPU ids on this node.
        memory_mb: the guest memory on this node.
        dedicated_cpus: the subset of ``cpus`` to pin 1:1 to dedicated host
            CPUs (all of them for ``dedicated``, the mask for ``mixed``,
            none for ``shared``).
    """

    id: int
    cpus: frozenset[int]
    memory_mb: int
    dedicated_cpus: frozenset[int] = frozenset()

    @property
    def shared_cpus(self) -> frozenset[int]:
        """The vCPUs of this node that float over the host's shared set."""
        return self.cpus - self.dedicated_cpus


@dataclass(frozen=True)
class NUMARequest:
    """The NUMA topology an instance asks for.

    Attributes:
        cells: the guest nodes, ordered by id; together they hold every
            vCPU exactly once and all the flavor's memory.
        cpu_policy: one of :data:`CPU_POLICIES`.
        cpu_thread_policy: one of :data:`THREAD_POLICIES`, or ``None`` when
            no CPU is dedicated (nothing to place against siblings).
        emulator_threads_policy: one of :data:`EMULATOR_POLICIES`, or
            ``None`` when no CPU is dedicated or nothing asked for one.
            ``isolate`` pins the emulator threads to one extra dedicated
            host CPU.
        page_size: ``None`` (no preference), :data:`PAGE_SMALL`,
            :data:`PAGE_LARGE`, :data:`PAGE_ANY` or a size in KiB.
        realtime_cpus: guest vCPUs given a realtime scheduler (a subset of
            the dedicated ones); empty when realtime is off.
        locked_memory: guest memory is locked in host RAM.
    """

    cells: tuple[CellRequest, ...]
    cpu_policy: str = CPU_SHARED
    cpu_thread_policy: str | None = None
    emulator_threads_policy: str | None = None
    page_size: PageSize = None
    realtime_cpus: frozenset[int] = frozenset()
    locked_memory: bool = False

    @property
    def vcpus(self) -> int:
        """The number of guest vCPUs over all nodes."""
        return sum(len(c.cpus) for c in self.cells)

    @property
    def memory_mb(self) -> int:
        """The guest memory over all nodes."""
        return sum(c.memory_mb for c in self.cells)

    @property
    def dedicated_cpus(self) -> frozenset[int]:
        """Every guest vCPU to pin, over all nodes."""
        return frozenset().union(*(c.dedicated_cpus for c in self.cells))

    @property
    def shared_cpus(self) -> frozenset[int]:
        """Every guest vCPU that floats, over all nodes."""
        return frozenset().union(*(c.shared_cpus for c in self.cells))

    @property
    def emulator_threads_isolated(self) -> bool:
        """The emulator threads need one dedicated host CPU of their own."""
        return self.emulator_threads_policy == EMULATOR_ISOLATE


@dataclass(frozen=True)
class Problem:
    """One thing wrong with a flavor and image, as an operator would fix it.

    Attributes:
        message: one line: what is wrong (naming the keys and their
            values), then after "; " what to do.
        keys: every key at fault and its value as given (``None`` when the
            problem is that the key is missing).
    """

    message: str
    keys: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "keys", _frozen_mapping(self.keys))

    def __str__(self) -> str:
        return self.message


class ClaimError(ValueError):
    """Base of every refusal raised by the claims code."""


class InvalidRequest(ClaimError):
    """A flavor and image whose NUMA settings are invalid or conflict.

    Attributes:
        problems: every problem found (never empty), in a stable order.
    """

    def __init__(self, problems: Iterable[Problem]) -> None:
        self.problems: tuple[Problem, ...] = tuple(problems)
        if not self.problems:
            raise ValueError("InvalidRequest needs at least one problem")
        head = ("invalid flavor/image NUMA request: " if len(self.problems) == 1
                else f"invalid flavor/image NUMA request "
                     f"({len(self.problems)} problems): ")
        super().__init__(head + "\n".join(p.message for p in self.problems))
