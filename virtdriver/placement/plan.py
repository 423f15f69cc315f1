"""The smallest set of writes that makes one provider what the tree says.

Pure functions, no I/O: :func:`plan_provider` compares the desired
provider (from the tree) with what Placement holds (:class:`~.state.Known`)
and says which parts to replace — only those that differ, since every
``PUT`` bumps the provider's generation and so conflicts with other
writers.

* **Inventories** are the driver's: replaced by the tree's when they
  differ (``allocation_ratio`` compared with a tolerance: MySQL keeps it
  as a single-precision float).
* **Traits** follow the ownership rule
  (:func:`virtdriver.resource_tracker.reconcile.reconcile`) against
  *Placement's* current traits: traits the provider's node does not own
  stay exactly as Placement has them (whoever set them), owned traits the
  tree has are asserted, owned traits it lacks are removed.
* **Aggregates**: the tree's are added; one leaves only if this process
  set it and the tree no longer has it, so aggregates others set (Nova's
  host aggregates) survive.  ``keep`` (the agent's marking aggregate,
  :mod:`~.listing`) is wanted on every provider like the tree's own.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from virtdriver.capabilities.traits.ownership import Ownership
from virtdriver.placement.state import Known
from virtdriver.providers.inventory import FIELDS, Inventory
from virtdriver.providers.record import ProviderData
from virtdriver.resource_tracker.reconcile import drift, owner, reconcile

_EMPTY: frozenset[str] = frozenset()
#: Relative tolerance for allocation_ratio (single-precision storage).
RATIO_TOLERANCE = 1e-6


@dataclass(frozen=True)
class ProviderPlan:
    """The writes one provider needs (``None``: leave that part alone).

    Attributes:
        inventory, traits, aggregates: the complete new content of each
            part to ``PUT``.
        inventory_changes: resource class → ``(old, new)``.
        traits_added, traits_removed, aggregates_added,
        aggregates_removed: the differences.
        removed_by_others, added_by_others: drift (see
            :func:`plan_provider`).
    """

    inventory: Mapping[str, Inventory] | None = None
    traits: frozenset[str] | None = None
    aggregates: frozenset[str] | None = None
    inventory_changes: Mapping[str, tuple[Inventory | None,
                                          Inventory | None]] = field(
        default_factory=lambda: MappingProxyType({}))
    traits_added: frozenset[str] = _EMPTY
    traits_removed: frozenset[str] = _EMPTY
    aggregates_added: frozenset[str] = _EMPTY
    aggregates_removed: frozenset[str] = _EMPTY
    removed_by_others: frozenset[str] = _EMPTY
    added_by_others: frozenset[str] = _EMPTY

    @property
    def empty(self) -> bool:
        """Whether nothing needs writing."""
        return (self.inventory is None and self.traits is None
                and self.aggregates is None)


def plan_provider(desired: ProviderData, current: Known,
                  ownership: Ownership, *, baseline: Known | None = None,
                  wrote_aggregates: Iterable[str] = (),
                  keep: frozenset[str] = _EMPTY) -> ProviderPlan:
    """The writes that make ``current`` (Placement) match ``desired``.

    Args:
        desired: the provider as the tree has it.
        current: what Placement holds now.
        ownership: what the provider's node owns (traits outside it are
            never added or removed).
        baseline: what Placement held at the last sync, if known and
            different from ``current`` (someone else wrote since): the
            base for the drift report.
        wrote_aggregates: aggregates this process set on the provider.
        keep: aggregates wanted besides the tree's (the marking one).
    """
    inventory, inventory_changes = None, {}
    if not same_inventory(current.inventory, desired.inventory):
        inventory = desired.inventory
        inventory_changes = {
            rc: (current.inventory.get(rc), desired.inventory.get(rc))
            for rc in current.inventory.keys() | desired.inventory.keys()
            if not _same_record(current.inventory.get(rc),
                                desired.inventory.get(rc))}
    asserted = frozenset(t for t in desired.traits if ownership.owns(t))
    new_traits = reconcile(current.traits, asserted,
                           ownership=ownership).traits
    removed_by, added_by = _EMPTY, _EMPTY
    if baseline is not None:
        owns = owner(ownership)
        removed_by, added_by = drift(
            (t for t in baseline.traits if owns(t)), current.traits,
            new_traits, owns)
    wanted = desired.aggregates | keep
    removable = frozenset(wrote_aggregates) - wanted
    new_aggregates = (current.aggregates - removable) | wanted
    return ProviderPlan(
        inventory=inventory,
        traits=new_traits if new_traits != current.traits else None,
        aggregates=(new_aggregates if new_aggregates != current.aggregates
                    else None),
        inventory_changes=MappingProxyType(inventory_changes),
        traits_added=new_traits - current.traits,
        traits_removed=current.traits - new_traits,
        aggregates_added=new_aggregates - current.aggregates,
        aggregates_removed=current.aggregates - new_aggregates,
        removed_by_others=removed_by,
        added_by_others=added_by)


def same_inventory(a: Mapping[str, Inventory],
                   b: Mapping[str, Inventory]) -> bool:
    """Whether two inventories are equal (ratios within tolerance)."""
    return a.keys() == b.keys() and all(_same_record(a[rc], b[rc])
                                        for rc in a)


def _same_record(a: Inventory | None, b: Inventory | None) -> bool:
    if a is None or b is None:
        return a is b
    return all(
        math.isclose(a[f], b[f], rel_tol=RATIO_TOLERANCE)
        if f == "allocation_ratio" else a[f] == b[f] for f in FIELDS)


def custom_names(plan: ProviderPlan) -> tuple[frozenset[str],
                                              frozenset[str]]:
    """The ``CUSTOM_`` traits and resource classes ``plan`` writes."""
    traits = frozenset(t for t in plan.traits or () if
                       t.startswith("CUSTOM_"))
    classes = frozenset(rc for rc in plan.inventory or () if
                        rc.startswith("CUSTOM_"))
    return traits, classes


def inventory_from_placement(doc: Mapping[str, Mapping]
                             ) -> Mapping[str, Inventory]:
    """Placement's ``inventories`` object as records (as it has them —
    not validated against the tree's rules, which others need not
    follow).

    Raises:
        ValueError: a record lacks a field or has a wrong type.
    """
    records = {}
    for rc, record in doc.items():
        if not isinstance(record, Mapping):
            raise ValueError(f"inventory {rc}: not an object")
        try:
            values = {f: record[f] for f in FIELDS}
        except KeyError as exc:
            raise ValueError(f"inventory {rc}: no {exc.args[0]}") from None
        if not all(isinstance(values[f], int) for f in FIELDS
                   if f != "allocation_ratio") or not isinstance(
                values["allocation_ratio"], (int, float)):
            raise ValueError(f"inventory {rc}: a field has a wrong type")
        values["allocation_ratio"] = float(values["allocation_ratio"])
        records[rc] = Inventory(**values)
    return MappingProxyType(records)


def deletion_order(uuids: Iterable[str],
                   parent_of: Mapping[str, str | None]) -> list[str]:
    """``uuids`` with every provider after its descendants among them
    (children first), otherwise in the given order."""
    uuids = list(dict.fromkeys(uuids))
    wanted = set(uuids)
    depth: dict[str, int] = {}

    def depth_of(uuid: str) -> int:
        if uuid not in depth:
            seen, node, n = set(), uuid, 0
            while parent_of.get(node) in wanted and node not in seen:
                seen.add(node)
                node, n = parent_of[node], n + 1
            depth[uuid] = n
        return depth[uuid]

    return sorted(uuids, key=lambda u: -depth_of(u))
