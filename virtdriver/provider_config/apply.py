"""What to apply: provider config files, the tree and the applied record
in; per provider the traits and inventories to add and remove out.

:func:`plan` is pure: it reads a tree (a snapshot or the live tree) and
changes nothing; :func:`apply_plan` writes a plan into a tree.  The rules
(``docs/provider-config.md``):

* **Who.** An entry with ``uuid`` or ``name`` is for that provider (a root
  or a child) in the tree; ``uuid: $COMPUTE_NODE`` is for every compute
  node root — except a root an explicit entry names, which gets that
  entry only (Nova's rule).  Two entries reaching one provider by uuid and
  by name are refused.  An entry matching nothing is a warning.
* **Set.** What the files give a provider is put there: traits added,
  inventories set.  A trait the driver owns or a resource class it
  reports is refused, and so is a resource class the provider already has
  with other values that virtdriver did not set (someone else's).
* **Remove.** What the record says the files applied to a provider and the
  files no longer give it is removed — only if virtdriver *added* it (the
  provider lacked it when a file first named it), it is a ``CUSTOM_``
  name the driver does not own, the provider still has it, and, for an
  inventory, it still has exactly the values virtdriver set.  Anything
  else is left in place and said so (:attr:`Plan.kept`).
* **Hold.** When the files cannot be used — one is refused, or the
  directory does not exist — :func:`hold` keeps every provider with what
  the record says the files applied: nothing is added beyond it, nothing
  removed.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING

import os_traits

from virtdriver.capabilities.traits.names import CUSTOM_PREFIX, invalid_reason
from virtdriver.capabilities.traits.ownership import Ownership
from virtdriver.provider_config.model import (
    Identification, ProviderConfig, ProviderConfigError, ProviderEntry)
from virtdriver.provider_config.record import (
    Applied, AppliedRecord, ProviderRecord)
from virtdriver.providers.inventory import (
    Inventory, invalid_resource_class_reason)
from virtdriver.providers.record import ProviderData

if TYPE_CHECKING:  # annotations only: the tracker imports this package
    from virtdriver.resource_tracker.provider_tree import ProviderTree
    from virtdriver.resource_tracker.snapshot import TreeReader

_EMPTY: Mapping = MappingProxyType({})
_NOTHING = Ownership(frozenset())


@dataclass(frozen=True, slots=True)
class ProviderChanges:
    """What to change on one provider.

    Attributes:
        uuid, name: the provider.
        add_traits, remove_traits: traits to add and to take off.
        set_inventories: resource class → record to write (new or changed).
        remove_inventories: resource classes to take off.
    """

    uuid: str
    name: str
    add_traits: frozenset[str] = frozenset()
    remove_traits: frozenset[str] = frozenset()
    set_inventories: Mapping[str, Inventory] = field(
        default_factory=lambda: _EMPTY)
    remove_inventories: frozenset[str] = frozenset()

    @property
    def empty(self) -> bool:
        """Whether nothing changes."""
        return not (self.add_traits or self.remove_traits
                    or self.set_inventories or self.remove_inventories)

    def traits_after(self, traits: Iterable[str]) -> frozenset[str]:
        """``traits`` with these changes made."""
        return (frozenset(traits) - self.remove_traits) | self.add_traits

    def inventory_after(self, inventory: Mapping[str, Inventory]
                        ) -> dict[str, Inventory]:
        """``inventory`` with these changes made (a new dict)."""
        after = {rc: record for rc, record in inventory.items()
                 if rc not in self.remove_inventories}
        after.update(self.set_inventories)
        return after

    def describe(self) -> str:
        """``'cn1': +CUSTOM_A -CUSTOM_B; inventory +CUSTOM_X -CUSTOM_Y``."""
        parts = [f"+{t}" for t in sorted(self.add_traits)]
        parts += [f"-{t}" for t in sorted(self.remove_traits)]
        text = f"{self.name!r}: traits {' '.join(parts)}" if parts else (
            f"{self.name!r}:")
        rcs = [f"={rc}" for rc in sorted(self.set_inventories)]
        rcs += [f"-{rc}" for rc in sorted(self.remove_inventories)]
        if rcs:
            text += ("; " if parts else " ") + "inventory " + " ".join(rcs)
        return text


@dataclass(frozen=True, slots=True)
class Plan:
    """The outcome of :func:`plan`.

    Attributes:
        changes: provider uuid → its (non-empty) changes, parents first.
        record: the applied record once the changes are made (save it
            with them, in the same transaction).
        kept: one line per recorded trait or inventory the files no longer
            give a provider but that stays there, and why.
        warnings: one line per entry that matches no provider (only in a
            plan of the whole tree).
    """

    changes: Mapping[str, ProviderChanges]
    record: AppliedRecord
    kept: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()

    @property
    def empty(self) -> bool:
        """Whether no provider changes."""
        return not self.changes

    def describe(self) -> list[str]:
        """One line per provider that changes."""
        return [change.describe() for change in self.changes.values()]


def plan(config: ProviderConfig, tree: TreeReader, record: AppliedRecord, *,
         ownership: Ownership = _NOTHING, owned_classes: Iterable[str] = (),
         compute_nodes: Iterable[str] | None = None,
         scope: Iterable[str] | None = None) -> Plan:
    """What to change so the providers have what the files give them.

    Args:
        config: from :func:`~.directory.load_directory`.
        tree: the tree after the driver's update (read only).
        record: what the files applied before (:mod:`.record`).
        ownership: what the driver owns on these providers (per node:
            ``driver.ownership_for(node)``); a file naming an owned trait
            is refused.
        owned_classes: resource classes the driver reports; refused too.
        compute_nodes: uuids of the compute node roots ``$COMPUTE_NODE``
            means; default: every root with the ``COMPUTE_NODE`` trait.
        scope: uuids of the providers to plan for (one node's tree,
            parents first); default every provider.  The record of any
            other provider is kept as it is, and entries matching nothing
            are not reported (see :func:`unmatched`).

    Raises:
        ProviderConfigError: an entry collides with the driver or with
            another entry (each problem names file, line and entry; all
            of them are in it).
    """
    # One node's scope is walked alone: planning each of many nodes must
    # cost that node's providers, not a walk of the tree or the entries.
    if scope is None:
        providers = tree.providers()
        warnings = unmatched(config, tree)
    else:
        providers = [tree.record(uuid) for uuid in dict.fromkeys(scope)
                     if tree.exists(uuid)]
        warnings = []
    targets = _targets(config, providers, compute_nodes)
    owned_classes = frozenset(owned_classes)
    changes: dict[str, ProviderChanges] = {}
    updates: dict[str, ProviderRecord] = {}
    kept: list[str] = []
    errors: list[ProviderConfigError] = []
    for current in providers:
        uuid = current.uuid
        entry = targets.get(uuid)
        if entry is None and uuid not in record:
            continue
        done = _Provider(current, entry, record.provider(uuid), ownership,
                         owned_classes)
        try:
            change, updates[uuid] = done.plan()
        except ProviderConfigError as exc:
            errors.append(exc)   # the others are checked too
            continue
        kept.extend(done.kept)
        if not change.empty:
            changes[uuid] = change
    if errors:
        raise ProviderConfigError.every(errors)
    return Plan(MappingProxyType(changes), record.updated(updates),
                tuple(kept), tuple(warnings))


def hold(tree: TreeReader, record: AppliedRecord, scope: Iterable[str], *,
         ownership: Ownership = _NOTHING, owned_classes: Iterable[str] = ()
         ) -> Plan:
    """What keeps the providers ``scope`` as the files last left them,
    when the files cannot be used (a file refused, the directory missing):
    each trait and inventory ``record`` lists for a provider is put back
    where the tree lacks it (a tree built afresh never had it), nothing is
    removed, and the record stays as it is.  Only valid ``CUSTOM_`` names
    the driver neither owns nor reports, as for a removal.  Pure."""
    owned_classes = frozenset(owned_classes)
    changes: dict[str, ProviderChanges] = {}
    for uuid in dict.fromkeys(scope):
        if uuid not in record or not tree.exists(uuid):
            continue
        current, recorded = tree.record(uuid), record.provider(uuid)
        add = frozenset(
            trait for trait in recorded.traits
            if trait not in current.traits and _removable(trait, False)
            and not ownership.owns(trait))
        put = {rc: applied.inventory
               for rc, applied in recorded.inventories.items()
               if rc not in current.inventory and applied.inventory
               is not None and _removable(rc, True)
               and rc not in owned_classes}
        change = ProviderChanges(uuid, current.name, add,
                                 set_inventories=MappingProxyType(put))
        if not change.empty:
            changes[uuid] = change
    return Plan(MappingProxyType(changes), record)


def apply_plan(tree: ProviderTree, plan: Plan) -> None:
    """Make ``plan``'s changes in ``tree`` (hold the tree's lock from the
    read :func:`plan` made to here, as the tracker does).

    Raises:
        ProviderTreeError: a provider is gone or a value is refused; the
            providers changed before it stay changed (restore a snapshot).
    """
    for uuid, change in plan.changes.items():
        current = tree.record(uuid)
        if change.add_traits or change.remove_traits:
            tree.update_traits(uuid, change.traits_after(current.traits))
        if change.set_inventories or change.remove_inventories:
            tree.update_inventory(uuid,
                                  change.inventory_after(current.inventory))


def reported_classes(tree: TreeReader, uuids: Iterable[str],
                     record: AppliedRecord) -> frozenset[str]:
    """The resource classes on ``uuids`` that the files did not apply
    there: after the driver's update, what the driver reports — pass it
    as :func:`plan`'s ``owned_classes`` so no file names them anywhere on
    the node (``CUSTOM_MEM_PAGE_SIZE_2048`` on a NUMA cell, say)."""
    found: set[str] = set()
    for uuid in uuids:
        if tree.exists(uuid):
            applied = record.provider(uuid).inventories
            found.update(rc for rc in tree.record(uuid).inventory
                         if rc not in applied)
    return frozenset(found)


def unmatched(config: ProviderConfig, tree: TreeReader) -> list[str]:
    """One warning per entry that names no provider in ``tree`` (in a
    plan without ``scope``; with one, call this once per cycle)."""
    return [f"{entry.source}: {entry.identification} matches no provider "
            "in the tree; ignored until one appears"
            for entry in config.entries
            if not entry.identification.compute_node
            and _find(tree, entry.identification) is None]


def _targets(config: ProviderConfig, providers: list[ProviderData],
             compute_nodes: Iterable[str] | None
             ) -> dict[str, ProviderEntry]:
    """Provider uuid → the entry that applies to it, for ``providers``."""
    targets: dict[str, ProviderEntry] = {}
    for current in providers:
        by_uuid = config.by_uuid.get(current.uuid)
        by_name = config.by_name.get(current.name)
        if by_uuid is not None and by_name is not None:
            first, second = sorted((by_uuid, by_name), key=lambda e: (
                e.source.path, e.source.entry))
            raise ProviderConfigError.at(
                second.source.path, second.source.line,
                f"providers[{second.source.entry}]",
                f"{second.identification} is {current.label}, which "
                f"{first.identification} at {first.source} identifies too",
                "keep one entry for the provider")
        if by_uuid is not None or by_name is not None:
            targets[current.uuid] = by_uuid or by_name
    default = config.compute_node
    if default is not None:
        roots = (frozenset(compute_nodes) if compute_nodes is not None else
                 {p.uuid for p in providers if p.parent_uuid is None
                  and os_traits.COMPUTE_NODE in p.traits})
        for current in providers:
            if current.uuid in roots and current.uuid not in targets:
                targets[current.uuid] = default
    return targets


def _find(tree: TreeReader, ident: Identification) -> str | None:
    """The uuid of the provider ``ident`` names, or ``None``."""
    key = ident.uuid if ident.uuid is not None else ident.name
    if key is None or not tree.exists(key):
        return None
    found = tree.record(key)
    matches = found.uuid if ident.uuid is not None else found.name
    return found.uuid if matches == key else None


def _removable(name: str, inventory: bool) -> bool:
    """Whether ``name`` is a valid CUSTOM_ name of its kind."""
    bad = (invalid_resource_class_reason(name) if inventory
           else invalid_reason(name))
    return bad is None and name.startswith(CUSTOM_PREFIX)


class _Provider:
    """The plan for one provider (:func:`plan`'s rules)."""

    def __init__(self, current: ProviderData, entry: ProviderEntry | None,
                 recorded: ProviderRecord, ownership: Ownership,
                 owned_classes: frozenset[str]) -> None:
        self.current = current
        self.entry = entry
        self.recorded = recorded
        self.ownership = ownership
        self.owned_classes = owned_classes
        self.kept: list[str] = []
        self.errors: list[ProviderConfigError] = []

    def plan(self) -> tuple[ProviderChanges, ProviderRecord]:
        """Raises: ProviderConfigError: every refusal on this provider."""
        add, remove, traits = self.traits()
        set_, drop, inventories = self.inventories()
        if self.errors:
            raise ProviderConfigError.every(self.errors)
        change = ProviderChanges(
            self.current.uuid, self.current.name, frozenset(add),
            frozenset(remove), MappingProxyType(set_), frozenset(drop))
        return change, ProviderRecord(traits, inventories)

    def keep(self, name: str, reason: str) -> None:
        self.kept.append(f"{self.current.label}: {name} stays: {reason}")

    def traits(self) -> tuple[set[str], set[str], dict[str, Applied]]:
        present = self.current.traits
        desired = self.entry.traits if self.entry is not None else {}
        add: set[str] = set()
        applied: dict[str, Applied] = {}
        for trait, source in desired.items():
            if self.ownership.owns(trait):
                self.errors.append(ProviderConfigError.at(
                    source.path, source.line, f"providers[{source.entry}]"
                    ".traits", f"{trait} is owned by the driver on "
                    f"{self.current.label} (it sets and removes it itself)",
                    "remove it from the file"))
                continue
            before = self.recorded.traits.get(trait)
            if trait in present:
                added = before.added if before is not None else False
            else:
                add.add(trait)
                added = True
            applied[trait] = Applied(source.path, source.line, source.entry,
                                     added)
        remove = set()
        for trait, before in self.recorded.traits.items():
            if trait in desired or trait not in present:
                continue
            reason = self.why_keep(trait, before, inventory=False)
            if reason:
                self.keep(trait, reason)
            else:
                remove.add(trait)
        return add, remove, applied

    def inventories(self) -> tuple[dict[str, Inventory], set[str],
                                   dict[str, Applied]]:
        present = self.current.inventory
        entry = self.entry
        desired = entry.inventories if entry is not None else {}
        set_: dict[str, Inventory] = {}
        applied: dict[str, Applied] = {}
        for rc, wanted in desired.items():
            source = entry.inventory_sources[rc]
            where = f"providers[{source.entry}].inventories"
            if rc in self.owned_classes:
                self.errors.append(ProviderConfigError.at(
                    source.path, source.line, where, f"{rc} is a resource "
                    f"class the driver reports on {self.current.label}",
                    "remove it from the file"))
                continue
            before = self.recorded.inventories.get(rc)
            now = present.get(rc)
            if now is None:
                set_[rc], added = wanted, True
            elif now == wanted:
                added = before.added if before is not None else False
            elif before is not None and now == before.inventory:
                set_[rc], added = wanted, before.added
            else:
                self.errors.append(ProviderConfigError.at(
                    source.path, source.line, where, f"{rc} is already on "
                    f"{self.current.label} with other values, set by someone "
                    "else (the driver or another agent)", "remove it from "
                    "the file, or from whatever else sets it"))
                continue
            applied[rc] = Applied(source.path, source.line, source.entry,
                                  added, wanted)
        drop = set()
        for rc, before in self.recorded.inventories.items():
            if rc in desired or rc not in present:
                continue
            reason = self.why_keep(rc, before, inventory=True)
            if reason:
                self.keep(rc, reason)
            else:
                drop.add(rc)
        return set_, drop, applied

    def why_keep(self, name: str, before: Applied, *, inventory: bool
                 ) -> str | None:
        """Why a recorded name no file gives any more must stay, or None."""
        if not _removable(name, inventory):
            return "not a CUSTOM_ name (an edited record?)"
        if inventory and name in self.owned_classes:
            return "the driver reports this resource class now"
        if not inventory and self.ownership.owns(name):
            return "the driver owns this trait now"
        if not before.added:
            return ("it was there before a provider config file named it "
                    f"({before.source}); remove it by hand if unwanted")
        if inventory and self.current.inventory[name] != before.inventory:
            return ("its values changed since virtdriver set them (someone "
                    "else manages it now)")
        return None
