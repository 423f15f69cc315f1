"""The scheduler's allocation → the host cells each guest node may use.

Pure.  The scheduler sent :func:`~virtdriver.claims.placement_request.
placement_request`'s groups and Placement answered with an allocation
``{provider uuid: {resource class: amount}}``; the claim must pin the
instance within exactly the cells that allocation names.
:func:`allocated_cells` reads which cells those are and which guest node
each can hold (a cell's NUMA resources equal to that node's group), or
refuses with :class:`AllocationRefused` when the allocation cannot be this
instance's: a provider not of this node holding NUMA resources, a cell
count other than the guest node count, a cell whose amounts match no
guest node.  :func:`refusal` words a fit that fails within those cells,
naming what the request could not tell Placement.
:func:`corrected_allocations` is the allocation as the claim really
consumes it (isolated siblings, the emulator CPU), for the compute service
to write back through the consumer's generation.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import os_resource_classes as orc

from virtdriver.claims.model import ClaimError, NUMARequest
from virtdriver.claims.usage import InstanceFit
from virtdriver.claims.placement_request import (
    FLOATING_SPLIT, PAGE_SIZE_CHOICE, REALTIME_MASK,
    THREAD_SIBLINGS_ISOLATE, THREAD_SIBLINGS_REQUIRE, Unexpressed,
    node_resources)
from virtdriver.cpuset import format_cpuset
from virtdriver.drivers.host_tree import PAGE_RC_PREFIX, page_resource_class

_HINT = ("the compute service reschedules the instance (Placement's "
         "answer does not fit this host as it is)")


class AllocationRefused(ClaimError):
    """The instance cannot be pinned within the scheduler's allocation.

    Attributes:
        instance_uuid: the instance.
        reasons: every reason, one line each.
        cases: the unexpressed cases (``Unexpressed.case``) the reasons
            fall under, if any.
    """

    def __init__(self, instance_uuid: str, reasons: Iterable[str],
                 cases: Iterable[str] = ()) -> None:
        self.instance_uuid = instance_uuid
        self.reasons = tuple(reasons)
        self.cases = tuple(cases)
        super().__init__(
            f"instance {instance_uuid} cannot be pinned within the "
            f"scheduler's allocation: {'; '.join(self.reasons)}; {_HINT}")


def is_numa_class(resource_class: str) -> bool:
    """A class the NUMA cells hold (VCPU, PCPU, MEMORY_MB, pages)."""
    return resource_class in (orc.VCPU, orc.PCPU, orc.MEMORY_MB) \
        or resource_class.startswith(PAGE_RC_PREFIX)


def allocated_cells(request: NUMARequest | None,
                    allocations: Mapping[str, Mapping[str, int]],
                    cells: Mapping[str, int], root_uuid: str,
                    instance_uuid: str
                    ) -> Mapping[int, frozenset[int]] | None:
    """Guest node → the host cells of ``allocations`` it may go to.

    ``cells`` maps this node's cell provider uuids to cell ids;
    ``root_uuid`` is the node's root provider.  ``None`` for an instance
    without a NUMA topology (it floats; only the providers are checked).

    Raises:
        AllocationRefused: the allocation cannot be this instance's here.
    """
    reasons = []
    numa_on: dict[int, dict[str, int]] = {}
    for provider, resources in sorted(allocations.items()):
        numa = {rc: n for rc, n in resources.items()
                if n and is_numa_class(rc)}
        if provider in cells:
            if numa:
                numa_on[cells[provider]] = numa
        elif numa:
            where = "the compute node (root)" if provider == root_uuid \
                else f"provider {provider}, not a NUMA cell of this node"
            reasons.append(f"the allocation puts {_amounts(numa)} on {where}")
    if reasons:
        raise AllocationRefused(instance_uuid, reasons)
    if request is None:
        return None
    wanted = {cell.id: node_resources(request, cell)
              for cell in request.cells}
    if len(numa_on) != len(wanted):
        raise AllocationRefused(instance_uuid, [
            f"the allocation uses {len(numa_on)} cell(s) "
            f"({format_cpuset(numa_on) or 'none'}) but the instance has "
            f"{len(wanted)} guest node(s), each on a cell of its own"])
    allowed = {g: frozenset(c for c, got in numa_on.items() if got == want)
               for g, want in wanted.items()}
    matched = frozenset().union(*allowed.values())
    for cell_id in sorted(set(numa_on) - matched):
        reasons.append(
            f"cell {cell_id}'s allocation {_amounts(numa_on[cell_id])} is no "
            "guest node's request ("
            + "; ".join(f"node {g}: {_amounts(w)}"
                        for g, w in sorted(wanted.items())) + ")")
    for g in sorted(g for g, c in allowed.items() if not c):
        reasons.append(f"no allocated cell holds guest node {g}'s "
                       f"{_amounts(wanted[g])}")
    if reasons:
        raise AllocationRefused(instance_uuid, reasons)
    return allowed


def refusal(instance_uuid: str, allowed: Mapping[int, frozenset[int]] | None,
            reasons: Iterable[str], unexpressed: Iterable[Unexpressed]
            ) -> AllocationRefused:
    """The refusal of a fit that failed within ``allowed``'s cells (``None``:
    a floating instance): the fit's reasons, and those of the cases
    Placement was not asked that the reasons fall under (why Placement's
    candidate is refused here); none named: Placement and the claim
    disagree on something the request does express."""
    reasons = tuple(reasons)
    cases = tuple(u for u in unexpressed if any(
        marker in reason for marker in _MARKERS[u.case]
        for reason in reasons))
    where = "on this host" if allowed is None else (
        "within the allocated cells "
        + format_cpuset(frozenset().union(*allowed.values())))
    lines = [f"{where}: " + "; ".join(reasons)]
    if cases:
        lines.append("not expressed to Placement, checked here: "
                     + ", ".join(u.case for u in cases))
    return AllocationRefused(instance_uuid, lines, [u.case for u in cases])


#: Words of the fit's reasons that show a refusal falls in a case.
_MARKERS = {
    THREAD_SIBLINGS_ISOLATE: ("thread policy isolate",),
    THREAD_SIBLINGS_REQUIRE: ("thread policy require",),
    REALTIME_MASK: ("realtime",),
    PAGE_SIZE_CHOICE: ("MiB of huge pages", "MiB of any page size"),
    FLOATING_SPLIT: ("host: ",),
}


def _amounts(resources: Mapping[str, int]) -> str:
    return ",".join(f"{rc}:{n}" for rc, n in sorted(resources.items()))


def claim_consumption(fit: InstanceFit) -> dict[int, dict[str, int]]:
    """Host cell → what the claim ``fit`` takes of it, in the tree's
    classes: ``VCPU`` its shared vCPUs, ``PCPU`` every dedicated CPU it
    holds (isolated siblings and the emulator CPU included), its memory
    as ``MEMORY_MB`` when on small pages, else as its pages only (as
    :func:`~virtdriver.claims.usage.inventory_usage` counts usage)."""
    found: dict[int, dict[str, int]] = {}
    for cell in fit.cells:
        row = found.setdefault(cell.host_cell, {})
        for rc, amount in ((orc.VCPU, len(cell.shared_vcpus)),
                           (orc.PCPU, len(cell.host_cpus))):
            row[rc] = row.get(rc, 0) + amount
        if cell.page_size_kib is None:     # small pages
            row[orc.MEMORY_MB] = row.get(orc.MEMORY_MB, 0) + cell.memory_mb
        else:                              # huge pages, and no MEMORY_MB
            rc = page_resource_class(cell.page_size_kib)
            row[rc] = row.get(rc, 0) + cell.pages
    return {c: {rc: n for rc, n in row.items() if n}
            for c, row in found.items()}


def corrected_allocations(allocations: Mapping[str, Mapping[str, int]],
                          fit: InstanceFit, cells: Mapping[str, int]
                          ) -> dict[str, dict[str, int]] | None:
    """``allocations`` with each cell provider's NUMA classes replaced by
    what the claim takes there (:func:`claim_consumption`); every other
    provider and class as it was.  ``None`` when they already agree (or
    the instance floats: its allocation stands as Placement made it)."""
    if not fit.cells:
        return None
    taken = claim_consumption(fit)
    corrected: dict[str, dict[str, int]] = {}
    for provider, resources in allocations.items():
        row = dict(resources)
        if provider in cells:
            row = {rc: n for rc, n in row.items() if not is_numa_class(rc)}
            row.update(taken.get(cells[provider], {}))
        if row:
            corrected[provider] = row
    same = {p: {rc: n for rc, n in r.items() if n}
            for p, r in allocations.items()}
    return None if corrected == same else corrected
