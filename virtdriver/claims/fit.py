"""Fit an instance's NUMA request onto a host's NUMA cells (pure).

:func:`fit` answers where an instance goes on a host given what others
already took (:class:`~virtdriver.claims.usage.HostUsage`), as an
:class:`~virtdriver.claims.usage.InstanceFit`, or refuses with
:class:`DoesNotFit` naming every cell tried and what it lacked.  The
semantics are Nova's (``numa_fit_instance_to_host``):

* **Cells.**  Each guest node goes to a host cell of its own.  With fewer
  guest nodes than host cells, cells are tried emptiest first (Nova's
  default "spread"): most free dedicated CPUs first when CPUs are pinned,
  fewest shared vCPUs placed otherwise, then most free memory, then id;
  the first assignment in that order where every node fits is taken.
* **Dedicated vCPUs** are pinned 1:1 to free dedicated host CPUs of the
  cell.  Thread policy ``prefer`` (or none): k vCPUs per core on cores
  with at least k free threads, k as large as fits (so siblings are packed
  and emptier cores used first), else any free CPUs.  ``require``: the same
  with k ≥ 2 only, so vCPUs sit on thread siblings; refused on a cell
  without SMT.  ``isolate``: one vCPU per wholly free core (every thread of
  it a free dedicated CPU), the core's other threads reserved for the
  instance so no one else runs there.
* **Emulator threads** ``isolate`` take one more dedicated CPU, on the cell
  of guest node 0 (as Nova): a spare thread of a core the instance already
  uses if any, else another free CPU; under ``isolate``, a wholly free core
  whose other threads are reserved too.
* **Shared vCPUs** go to the cell's shared CPUs within the overcommit
  (:mod:`~virtdriver.claims.capacity`).
* **Memory** per cell, never overcommitted.  No page size or ``small``:
  small-page memory.  An ``int``: pages of that size (the small page size
  means small pages); memory must be whole pages.  ``large``: the largest
  huge page size with enough free pages; ``any``: the same, else small.
* **Realtime** vCPUs must be dedicated.
* **No NUMA request** (``None``): the flavor's vCPUs and memory float over
  the host; they are charged to the host totals (shared CPUs × ratio,
  small-page memory of every cell), not to a cell.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from itertools import chain

from virtdriver.claims.model import (
    PAGE_ANY, PAGE_LARGE, PAGE_SMALL, THREAD_ISOLATE, THREAD_REQUIRE,
    CellRequest, ClaimError, Flavor, InvalidRequest, NUMARequest, Problem)
from virtdriver.claims.capacity import (
    cell_cores, host_small_capacity_mb, shared_limit, small_capacity_mb)
from virtdriver.claims.usage import (
    CellFit, CellUsage, ClaimConflict, HostUsage, InstanceFit)
from virtdriver.cpuset import format_cpuset
from virtdriver.drivers.host_resources import CellResources, HostResources

_HINT = ("release instances from this host, or place the instance on "
         "another host")


class DoesNotFit(ClaimError):
    """The instance does not fit the host as it is used now.

    Attributes:
        instance_uuid: the instance.
        reasons: one per host cell tried (``cell N: needs …``), and
            ``host: …`` for limits of the host as a whole.
    """

    def __init__(self, instance_uuid: str, reasons: Iterable[str]) -> None:
        self.instance_uuid = instance_uuid
        self.reasons = tuple(reasons)
        super().__init__(f"instance {instance_uuid} does not fit on this "
                         f"host: {'; '.join(self.reasons)}; {_HINT}")


def fit(request: NUMARequest | None, flavor: Flavor, host: HostResources,
        usage: HostUsage, *, cpu_allocation_ratio: float,
        instance_uuid: str,
        allowed: Mapping[int, frozenset[int]] | None = None) -> InstanceFit:
    """Where ``instance_uuid`` (``request`` from ``flavor``) goes on
    ``host`` given ``usage`` (module rules).  Changes nothing: add the
    result with :func:`~virtdriver.claims.usage.claim`.

    ``allowed`` (guest node → host cell ids) keeps each guest node within
    the cells the scheduler's allocation gave it
    (:func:`~virtdriver.claims.allocation.allocated_cells`); ``None``: any
    cell.

    Raises:
        DoesNotFit: no placement fits; the reasons name every cell tried.
        InvalidRequest: realtime vCPUs that are not dedicated, or a request
            whose size is not the flavor's.
        ClaimError: the instance already holds a claim here, or the ratio
            is not a finite number above 0.
    """
    if not (math.isfinite(cpu_allocation_ratio) and cpu_allocation_ratio > 0):
        raise ClaimError(f"cpu_allocation_ratio {cpu_allocation_ratio} must "
                         "be a finite number greater than 0, e.g. 16.0")
    if instance_uuid in usage.instances:
        raise ClaimConflict(f"instance {instance_uuid} cannot claim",
                            ["it already holds a claim on this host"],
                            "release it first")
    if request is None:
        reasons = _host_reasons(host, usage, cpu_allocation_ratio,
                                flavor.vcpus, flavor.memory_mb)
        if reasons:
            raise DoesNotFit(instance_uuid, reasons)
        return InstanceFit(instance_uuid, floating_vcpus=flavor.vcpus,
                           floating_memory_mb=flavor.memory_mb)
    _check_request(request, flavor)
    return _fit_numa(request, host, usage, cpu_allocation_ratio,
                     instance_uuid, allowed)


def _n(count: int, noun: str) -> str:
    """``1 shared vCPU``, ``2 shared vCPUs``."""
    return f"{count} {noun}{'' if count == 1 else 's'}"


def _check_request(request: NUMARequest, flavor: Flavor) -> None:
    problems = []
    if stray := request.realtime_cpus - request.dedicated_cpus:
        problems.append(Problem(
            f"realtime vCPUs {format_cpuset(stray)} are not dedicated "
            f"(dedicated: {format_cpuset(request.dedicated_cpus) or 'none'})"
            "; realtime vCPUs must be pinned: dedicate them or leave them "
            "out of the realtime mask"))
    if (request.vcpus, request.memory_mb) != (flavor.vcpus, flavor.memory_mb):
        problems.append(Problem(
            f"the NUMA request has {request.vcpus} vCPUs and "
            f"{request.memory_mb} MiB, flavor {flavor.name or '(unnamed)'} "
            f"{flavor.vcpus} vCPUs and {flavor.memory_mb} MiB; derive the "
            "request from this flavor (numa_constraints)"))
    if problems:
        raise InvalidRequest(problems)


def _host_reasons(host: HostResources, usage: HostUsage, ratio: float,
                  shared: int, small_mb: int) -> list[str]:
    """What the host as a whole lacks for ``shared`` more vCPUs and
    ``small_mb`` more MiB of small-page memory."""
    reasons = []
    cpus = len(host.vcpus)
    if shared and not cpus:
        reasons.append(f"host: needs {_n(shared, 'shared vCPU')}, the host has no "
                       "shared CPUs")
    elif shared > cpus:
        reasons.append(f"host: needs {_n(shared, 'shared vCPU')}, more than the "
                       f"host's {cpus} shared CPUs")
    elif shared and usage.shared_vcpus + shared > cpus * ratio:
        free = max(int(cpus * ratio) - usage.shared_vcpus, 0)
        reasons.append(f"host: needs {_n(shared, 'shared vCPU')}, {free} free "
                       f"({shared_limit(cpus, ratio)})")
    if small_mb:
        capacity = host_small_capacity_mb(host)
        if capacity is None:
            reasons.append(f"host: needs {small_mb} MiB of memory, the "
                           "host's memory is unknown")
        elif usage.small_memory_mb + small_mb > capacity:
            free = max(capacity - usage.small_memory_mb, 0)
            reasons.append(f"host: needs {small_mb} MiB of memory, {free} "
                           "MiB free")
    return reasons


def _fit_numa(request: NUMARequest, host: HostResources, usage: HostUsage,
              ratio: float, uuid: str,
              allowed: Mapping[int, frozenset[int]] | None = None
              ) -> InstanceFit:
    guests = request.cells
    if len(guests) > len(host.cells):
        raise DoesNotFit(uuid, [f"host: needs {_n(len(guests), 'NUMA cell')}, it "
                                f"has {len(host.cells)}"])
    order = _cell_order(host, usage, request)
    if allowed is not None:
        named = frozenset().union(*allowed.values())
        order = [cell for cell in order if cell.cell_id in named]
    cores = {cell.cell_id: cell_cores(cell) for cell in order}
    tried: dict[tuple[int, int], CellFit | tuple[str, ...]] = {
        (g, cell.cell_id): _fit_cell(
            guest, cell, cores[cell.cell_id], usage.cell(cell.cell_id),
            request, ratio,
            emulator=g == 0 and request.emulator_threads_isolated)
        for g, guest in enumerate(guests) for cell in order}
    ok = {g: [c.cell_id for c in order
              if isinstance(tried[g, c.cell_id], CellFit)
              and (allowed is None or c.cell_id in allowed.get(g, ()))]
          for g in range(len(guests))}
    reasons = _host_reasons(host, usage, ratio, len(request.shared_cpus), 0)
    chosen = _assign(len(guests), ok)
    if chosen is not None and not reasons:
        cells = tuple(tried[g, c] for g, c in enumerate(chosen))
        result = InstanceFit(uuid, cells,  # type: ignore[arg-type]
                             request.cpu_thread_policy
                             if request.dedicated_cpus else None)
        small = sum(c.memory_mb for c in result.cells
                    if c.page_size_kib is None)
        if usage.floating_memory_mb:  # per-cell checks cover the rest
            reasons = _host_reasons(host, usage, ratio, 0, small)
        if not reasons:
            return result
    for cell in sorted(order, key=lambda c: c.cell_id):
        lacks = {g: tried[g, cell.cell_id] for g in range(len(guests))
                 if allowed is None or cell.cell_id in allowed.get(g, ())}
        if any(not isinstance(v, CellFit) for v in lacks.values()):
            reasons.append(_cell_reason(cell.cell_id, lacks))
    if chosen is None and (violator := _hall_violator(len(guests), ok)):
        nodes, cells = violator
        if cells:
            reasons.append(
                f"host: guest nodes {format_cpuset(nodes)} fit only on cells "
                f"{format_cpuset(cells)}, and each guest node needs a cell "
                "of its own")
    raise DoesNotFit(uuid, reasons)


def _cell_order(host: HostResources, usage: HostUsage,
                request: NUMARequest) -> list[CellResources]:
    cells = sorted(host.cells, key=lambda c: c.cell_id)
    if len(request.cells) == len(cells):
        return cells

    def key(cell: CellResources) -> tuple[int, int, int]:
        used = usage.cell(cell.cell_id)
        free_memory = (cell.memory_mb or 0) - used.memory_mb
        if request.dedicated_cpus or request.emulator_threads_isolated:
            first = -len(cell.pcpus - used.used_cpus)
        else:
            first = used.shared_vcpus
        return first, -free_memory, cell.cell_id
    return sorted(cells, key=key)


def _fit_cell(guest: CellRequest, cell: CellResources,
              cores: tuple[tuple[int, ...], ...], used: CellUsage,
              request: NUMARequest, ratio: float, *, emulator: bool
              ) -> CellFit | tuple[str, ...]:
    """``guest`` on ``cell``, or what the cell lacks."""
    lacks = []
    pinned = None
    if guest.dedicated_cpus or emulator:
        pinned = _pack(cell, cores, used.used_cpus,
                       sorted(guest.dedicated_cpus),
                       request.cpu_thread_policy, emulator)
        if isinstance(pinned, str):
            lacks.append(pinned)
    if shared := len(guest.shared_cpus):
        cpus = len(cell.vcpus)
        if not cpus:
            lacks.append(f"{_n(shared, 'shared vCPU')}, the cell has no shared CPUs")
        elif shared > cpus:
            lacks.append(f"{_n(shared, 'shared vCPU')}, more than the cell's {cpus} "
                         "shared CPUs")
        elif used.shared_vcpus + shared > cpus * ratio:
            free = max(int(cpus * ratio) - used.shared_vcpus, 0)
            lacks.append(f"{_n(shared, 'shared vCPU')}, {free} free "
                         f"({shared_limit(cpus, ratio)})")
    page_size = _pages(guest.memory_mb, request.page_size, cell, used)
    if isinstance(page_size, str):
        lacks.append(page_size)
    if lacks:
        return tuple(lacks)
    pinning, reserved, emulator_cpus = pinned or ({}, frozenset(), frozenset())
    return CellFit(guest.id, cell.cell_id, pinning, guest.shared_cpus,
                   guest.memory_mb, page_size, reserved, emulator_cpus)


def _pack(cell: CellResources, cores: tuple[tuple[int, ...], ...],
          taken: frozenset[int], vcpus: list[int], policy: str | None,
          emulator: bool
          ) -> tuple[dict[int, int], frozenset[int], frozenset[int]] | str:
    """Pin ``vcpus`` (and one emulator CPU) on ``cell`` (its ``cores``) by
    ``policy``: (pinning, reserved, emulator CPUs), or what it lacks."""
    need = len(vcpus) + emulator
    label = _n(need, "dedicated CPU")
    if emulator:
        label += f" ({len(vcpus)} vCPUs + 1 for the emulator threads)"
    if policy in (THREAD_ISOLATE, THREAD_REQUIRE):
        label += f" with thread policy {policy}"
    if not cell.pcpus:
        return f"{label}, the cell has no dedicated CPUs"
    free = [[c for c in core if c in cell.pcpus and c not in taken]
            for core in cores]
    if (count := sum(map(len, free))) < need:
        return f"{label}, {count} free"
    if policy == THREAD_ISOLATE:
        whole = [core for core, f in zip(cores, free, strict=True)
                 if len(f) == len(core)]
        if len(whole) < need:
            return f"{label}, {_n(len(whole), 'free core')}"
        pinning = {v: core[0] for v, core in zip(vcpus, whole[:len(vcpus)],
                                                 strict=True)}
        reserved = frozenset(chain(*(core[1:] for core in whole[:need])))
        spare = frozenset(whole[len(vcpus)][:1]) if emulator else frozenset()
        return pinning, reserved, spare
    smt = any(len([c for c in core if c in cell.pcpus]) > 1 for core in cores)
    if policy == THREAD_REQUIRE and not smt:
        return f"{label}, the cell has no thread siblings (no SMT)"
    lowest = 2 if policy == THREAD_REQUIRE else 1
    most = 0
    for per_core in range(max(map(len, free)), lowest - 1, -1):
        groups = [f[:per_core] for f in free if len(f) >= per_core]
        chosen = list(chain(*groups))[:len(vcpus)]
        most = max(most, per_core * len(groups))
        if len(chosen) < len(vcpus):
            continue
        spare = _spare(free, set(chosen)) if emulator else frozenset()
        if emulator and not spare:
            continue
        return dict(zip(vcpus, chosen, strict=True)), frozenset(), spare
    return f"{label}, {most} free as thread siblings"


def _spare(free: list[list[int]], chosen: set[int]) -> frozenset[int]:
    """One free CPU for the emulator threads: a spare thread of a core the
    instance uses, else the first other free CPU."""
    used = [c for f in free if chosen & set(f) for c in f if c not in chosen]
    other = [c for f in free if not chosen & set(f) for c in f]
    return frozenset((used or other)[:1])


def _pages(memory_mb: int, wanted, cell: CellResources, used: CellUsage
           ) -> int | None | str:
    """The page size backing ``memory_mb`` on ``cell`` (``None``: small
    pages), or what the cell lacks."""
    kib = memory_mb * 1024
    capacity = small_capacity_mb(cell)
    small_free = None if capacity is None else capacity - used.small_memory_mb
    small_size = cell.small_pages.size_kib if cell.small_pages else None

    def free_pages(size: int) -> int:
        return cell.huge_pages[size].available - used.pages.get(size, 0)

    def huge_fits(size: int) -> bool:
        return kib % size == 0 and kib // size <= free_pages(size)

    if wanted in (None, PAGE_SMALL) or wanted == small_size:
        what = "memory" if wanted is None else "small pages"
        if small_free is None:
            return f"{memory_mb} MiB of {what}, the cell's memory is unknown"
        if memory_mb > small_free:
            return f"{memory_mb} MiB of {what}, {max(small_free, 0)} MiB free"
        return None
    if isinstance(wanted, int):
        if wanted not in cell.huge_pages:
            sizes = sorted({*cell.huge_pages, *([small_size] if small_size
                                                else [])})
            return (f"{memory_mb} MiB of {wanted} KiB pages, the cell has no "
                    f"{wanted} KiB pages (page sizes in KiB: "
                    f"{', '.join(map(str, sizes)) or 'none listed'})")
        if kib % wanted:
            return (f"{memory_mb} MiB of {wanted} KiB pages, not a whole "
                    "number of pages")
        if not huge_fits(wanted):
            return (f"{memory_mb} MiB of {wanted} KiB pages, "
                    f"{free_pages(wanted) * wanted // 1024} MiB free")
        return wanted
    for size in sorted(cell.huge_pages, reverse=True):
        if huge_fits(size):
            return size
    if wanted == PAGE_ANY and small_free is not None \
            and memory_mb <= small_free:
        return None
    free = [f"{free_pages(s) * s // 1024} MiB of {s} KiB pages"
            if kib % s == 0 else f"{s} KiB pages: not whole pages"
            for s in sorted(cell.huge_pages)]
    if wanted == PAGE_ANY:
        free.append(f"{max(small_free or 0, 0)} MiB of small pages")
        return f"{memory_mb} MiB of any page size, free: {', '.join(free)}"
    assert wanted == PAGE_LARGE, wanted
    if not cell.huge_pages:
        return f"{memory_mb} MiB of huge pages, the cell has none"
    return f"{memory_mb} MiB of huge pages, free: {', '.join(free)}"


def _cell_reason(cell_id: int, tried: dict[int, CellFit | tuple[str, ...]]
                 ) -> str:
    """``cell N: needs …`` for every guest node, grouped when alike."""
    groups: dict[tuple[str, ...], list[int]] = {}
    for g, result in tried.items():
        lacks = () if isinstance(result, CellFit) else result
        groups.setdefault(lacks, []).append(g)
    if len(groups) == 1:
        return f"cell {cell_id}: needs " + " and ".join(next(iter(groups)))
    parts = []
    for lacks, nodes in groups.items():
        one = len(nodes) == 1
        who = f"guest node{'' if one else 's'} {format_cpuset(nodes)}"
        if lacks:
            parts.append(f"{who} need{'s' if one else ''} "
                         + " and ".join(lacks))
        else:
            parts.append(f"{who} fit{'s' if one else ''}")
    return f"cell {cell_id}: " + ", ".join(parts)


def _assign(count: int, ok: dict[int, list[int]]) -> list[int] | None:
    """Host cells for guest nodes 0..count-1, each node its first cell (in
    ``ok`` order) that leaves the later nodes a cell each; ``None`` if no
    assignment exists."""
    if _hall_violator(count, ok):
        return None
    chosen: list[int] = []
    for g in range(count):
        for cell in ok[g]:
            if cell not in chosen and not _hall_violator(
                    count, ok, range(g + 1, count), {*chosen, cell}):
                chosen.append(cell)
                break
        else:
            return None
    return chosen


def _hall_violator(count: int, ok: dict[int, list[int]],
                   nodes: Sequence[int] | None = None,
                   blocked: set[int] | frozenset[int] = frozenset()
                   ) -> tuple[set[int], set[int]] | None:
    """``None`` if ``nodes`` can each have a cell of their own outside
    ``blocked``; else guest nodes and the fewer cells they all fit on."""
    match: dict[int, int] = {}

    def augment(g: int, seen: set[int], reached: set[int]) -> bool:
        reached.add(g)
        for cell in ok[g]:
            if cell in blocked or cell in seen:
                continue
            seen.add(cell)
            if cell not in match or augment(match[cell], seen, reached):
                match[cell] = g
                return True
        return False

    for g in range(count) if nodes is None else nodes:
        seen: set[int] = set()
        reached: set[int] = set()
        if not augment(g, seen, reached):
            return reached, seen
    return None
