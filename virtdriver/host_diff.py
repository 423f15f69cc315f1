"""What changes from one host reading to another: providers, inventories,
and traits flipped, each flip with the evidence on both sides.

Pure: each side is a provider tree and, for the providers a driver derived
traits for, the :class:`~virtdriver.capabilities.traits.derive.TraitReport`
(provider uuid → report).  Provider uuids derive from names, so the same
host on two readings compares provider by provider.  ``virtdriver diff``
builds the sides (:mod:`virtdriver.cli.diff`) and renders the answer
(:mod:`virtdriver.render.diff`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from virtdriver.capabilities.traits.derive import TraitReport
from virtdriver.capabilities.traits.explain import Explanation, explain
from virtdriver.capabilities.traits.model import TraitState
from virtdriver.providers.inventory import Inventory
from virtdriver.resource_tracker.tree_diff import diff as tree_diff

ASSERTED = TraitState.ASSERTED.value

#: A flip's direction from A to B.
ADDED, DROPPED, CHANGED = "added", "dropped", "changed"


@dataclass(frozen=True, slots=True)
class HostSide:
    """One side of a comparison.

    Attributes:
        label: what it is, in words (``snapshot /tmp/cmp1``, ``live``).
        tree: the provider tree (or a snapshot of one).
        reports: provider uuid → the trait report derived for it.
    """

    label: str
    tree: Any
    reports: Mapping[str, TraitReport]


@dataclass(frozen=True, slots=True)
class ProviderChange:
    """A provider on one side only, or whose inventory or traits differ.

    ``inventory`` maps each resource class whose record differs to
    ``(old, new)``, ``None`` standing for "no record".  ``traits_added``
    and ``traits_removed`` are the tree's trait changes that no flip
    explains (a flipped trait is explained on every provider it moves on).
    """

    uuid: str
    name: str
    parent_uuid: str | None
    added: bool = False
    removed: bool = False
    renamed_from: str | None = None
    inventory: Mapping[str, tuple[Inventory | None, Inventory | None]] = (
        field(default_factory=dict, hash=False))
    traits_added: tuple[str, ...] = ()
    traits_removed: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class TraitFlip:
    """A trait whose status differs, with each side's explanation.

    ``direction`` is :data:`ADDED` (asserted on B only), :data:`DROPPED`
    (asserted on A only) or :data:`CHANGED` (neither asserts it: e.g.
    unasserted on A, unknown on B).
    """

    provider_uuid: str
    provider_name: str
    trait: str
    direction: str
    old: Explanation
    new: Explanation

    @property
    def old_summary(self) -> str:
        """A's evidence in one line."""
        return self.old.summary

    @property
    def new_summary(self) -> str:
        """B's evidence in one line."""
        return self.new.summary


@dataclass(frozen=True, slots=True)
class HostDiff:
    """Everything that changes from side A to side B."""

    old_label: str
    new_label: str
    providers: tuple[ProviderChange, ...] = ()
    flips: tuple[TraitFlip, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.providers or self.flips)

    @property
    def added(self) -> list[ProviderChange]:
        """Providers on B only."""
        return [p for p in self.providers if p.added]

    @property
    def removed(self) -> list[ProviderChange]:
        """Providers on A only."""
        return [p for p in self.providers if p.removed]


def diff_hosts(old: HostSide, new: HostSide) -> HostDiff:
    """What changes from ``old`` to ``new`` (see :class:`HostDiff`)."""
    names = {p.uuid: p.name for side in (old, new)
             for p in side.tree.snapshot().providers()}
    flips = []
    for uuid in sorted(old.reports.keys() | new.reports.keys(),
                       key=lambda u: names.get(u, u)):
        flips += _flips(uuid, names.get(uuid, uuid), old.reports.get(uuid),
                        new.reports.get(uuid))
    # A node's traits may sit on its children too (CPU traits on each NUMA
    # cell): a flip explains the trait wherever it moves in the tree.
    flipped = {f.trait for f in flips}
    changes = []
    for entry in tree_diff(old.tree, new.tree):
        added = tuple(sorted(t for t in entry.traits_added
                             if t not in flipped))
        removed = tuple(sorted(t for t in entry.traits_removed
                               if t not in flipped))
        if not (entry.created or entry.deleted or entry.renamed_from
                or entry.inventory or added or removed):
            continue  # only traits a flip explains, or aggregates
        changes.append(ProviderChange(
            entry.uuid, entry.name, entry.parent_uuid, added=entry.created,
            removed=entry.deleted, renamed_from=entry.renamed_from,
            inventory=dict(entry.inventory), traits_added=added,
            traits_removed=removed))
    return HostDiff(old.label, new.label, tuple(changes), tuple(flips))


def _flips(uuid: str, name: str, old: TraitReport | None,
           new: TraitReport | None) -> list[TraitFlip]:
    if old is None or new is None:
        return []  # a provider on one side only: its entry says so
    flips = []
    for trait in sorted(old.results.keys() | new.results.keys()):
        before, after = explain(trait, old), explain(trait, new)
        if before.status == after.status:
            continue
        direction = (ADDED if after.status == ASSERTED else
                     DROPPED if before.status == ASSERTED else CHANGED)
        flips.append(TraitFlip(uuid, name, trait, direction, before, after))
    return flips
