"""The in-memory tree of resource providers a driver reports to Placement.

:class:`ProviderTree` keeps the method names and arguments of Nova's
``nova.compute.provider_tree.ProviderTree``, so a driver's
``update_provider_tree`` ports over unchanged; ``docs/provider-tree.md``
lists the few differences.  What it adds:

* every value is validated on the way in (inventory rules, trait names,
  UUIDs), with errors that name the provider and the field;
* O(1) lookup by name or uuid for every provider, roots and children alike;
* O(1) immutable snapshots (:meth:`ProviderTree.snapshot`) and
  :func:`~virtdriver.resource_tracker.tree_diff.diff` between two of them;
* nested savepoints (:meth:`ProviderTree.savepoint`) that undo the writes
  since, in O(writes), and O(1) per-root stamps
  (:meth:`ProviderTree.subtree_stamp`) that say whether a tree changed;
* a canonical JSON form (:meth:`to_json` / :meth:`ProviderTree.from_json`).

Each provider is an immutable :class:`ProviderData`, replaced on write;
storage is copy-on-write (see :mod:`.provider_index`), so ``snapshot()``,
``copy.deepcopy(tree)`` and ``subtree()`` share records instead of
copying them.
"""

from __future__ import annotations

import copy
import threading
from collections.abc import Iterable, Mapping
from types import MappingProxyType
from typing import Any
from uuid import uuid4

from virtdriver.drivers.identity import child_uuid
from virtdriver.resource_tracker import tree_copy, tree_json
from virtdriver.providers.errors import (
    InvalidProvider, ProviderExists, ProviderNotFound, ProviderTreeError,
    describe)
from virtdriver.providers.inventory import (
    Inventory, fast_inventory, inventory_changed, validate_inventory)
from virtdriver.providers.record import (
    MAX_NAME_LENGTH, UUID_MATCH, ProviderCopy, ProviderData,
    check_aggregates, check_generation, check_name, check_traits,
    check_uuid, fast_aggregates, fast_traits, make_record)
from virtdriver.resource_tracker.provider_index import ProviderIndex
from virtdriver.resource_tracker.savepoint import (
    Journal, Savepoint, SavepointError, TreeBefore)
from virtdriver.resource_tracker.snapshot import TreeReader, TreeSnapshot
from virtdriver.resource_tracker.tree_diff import ProviderDiff, TreeDiff, diff
from virtdriver.resource_tracker.tree_load import parents_first

__all__ = ["Inventory", "InvalidProvider", "ProviderCopy", "ProviderData",
           "ProviderDiff",
           "ProviderExists", "ProviderNotFound", "ProviderTree",
           "ProviderTreeError", "Savepoint", "SavepointError", "TreeBefore",
           "TreeDiff", "TreeSnapshot", "diff"]

_SET_CHECKS = {"traits": check_traits, "aggregates": check_aggregates}
_FAST_SET_CHECKS = {"traits": fast_traits, "aggregates": fast_aggregates}
_EMPTY: frozenset[str] = frozenset()
_NO_INVENTORY: Mapping = MappingProxyType({})
_NO_RESOURCES: Mapping = MappingProxyType({})
#: The lock every tree made without one of its own shares, as Nova's trees
#: share one named lock (so a deep copy and its original exclude each
#: other); re-entrant.
SHARED_LOCK = threading.RLock()


class ProviderTree(TreeReader):
    """A thread-safe forest of resource providers.

    Every method takes the tree's lock (re-entrant, :attr:`lock`): by
    default :data:`SHARED_LOCK`, which every such tree shares as Nova's
    do; pass ``lock`` (e.g. ``threading.RLock()``) to give a tree its own.
    A deep copy and a ``subtree()`` share their source's lock.  Reads
    return immutable records or fresh copies, so nothing a caller holds
    changes under it.  Write methods raise subclasses of
    :class:`ValueError` (see :mod:`virtdriver.providers.errors`) and leave
    the tree unchanged when they do.
    """

    def __init__(self, lock: Any = None) -> None:
        self._lock = lock if lock is not None else SHARED_LOCK
        self._index = ProviderIndex()
        # True while a snapshot shares self._index: copy before writing.
        self._shared = False
        self._journal = Journal()
        # The last stamp handed out; never reset, so never reused.
        self._counter = 0
        #: name -> the uuid new_root(name) without one gives (a tracker
        #: sets it while its driver runs: stable uuids); None: random.
        self.root_uuids: Any = None

    @property
    def lock(self) -> threading.RLock:
        """The tree's lock, for callers that need several calls atomic."""
        return self._lock

    def snapshot(self) -> TreeSnapshot:
        """The tree as it is now, frozen; O(1) (copy-on-write)."""
        with self._lock:
            self._shared = True
            return TreeSnapshot(self._index, self)

    def savepoint(self) -> Savepoint:
        """Start journaling writes so they can be undone; O(1).

        Hold :attr:`lock` from here until the savepoint's
        :meth:`~Savepoint.rollback` (undo every write since, in O(writes))
        or :meth:`~Savepoint.release` (keep them).  Savepoints nest; see
        :mod:`.savepoint` and ``docs/provider-tree.md``.
        """
        with self._lock:
            return self._journal.begin(self)

    def restore(self, snapshot: TreeSnapshot) -> None:
        """Make the tree exactly what ``snapshot`` saw again, in O(1).

        Everything comes back — providers, content, generations and
        stamps — for the snapshot shares its storage with the tree
        (copy-on-write).  It undoes *every* write since the snapshot, so
        hold :attr:`lock` from the snapshot to here (as the resource
        tracker does) when others may write.  It ends every active
        savepoint (their writes are undone or predate the snapshot).

        Raises:
            ValueError: ``snapshot`` was taken of another tree.
        """
        if snapshot.origin is not self:
            raise ValueError("restore() takes a snapshot of this tree; "
                             "this one was taken of another tree")
        with self._lock:
            self._index = snapshot._index
            self._shared = True
            self._journal.abandon("ended by restore()")

    def __deepcopy__(self, memo: dict) -> ProviderTree:
        """A tree with the same providers, sharing this one's lock and
        (copy-on-write) its records: O(1).  Savepoints are not copied."""
        return tree_copy.deep_copy(self)

    def __getstate__(self) -> dict:
        """Pickle the providers (parents first) and stamps, not the lock."""
        return tree_copy.state_of(self)

    def __setstate__(self, state: dict) -> None:
        tree_copy.load_state(self, state)

    def subtree(self, name_or_uuid: str) -> ProviderTree:
        """A new tree holding only the tree of root ``name_or_uuid``, as
        Nova's ``subtree()``: changes to either never show in the other.
        It shares this tree's lock and records; O(providers in it).

        Raises:
            ProviderNotFound: no provider has this name or uuid.
            ProviderTreeError: the provider is not a root.
        """
        return tree_copy.subtree(self, name_or_uuid)

    # -- creating and removing providers ------------------------------------

    def new_root(self, name: str, uuid: str | None = None,
                 generation: int | None = None) -> str:
        """Add a root provider and return its uuid (if not given:
        :attr:`root_uuids`'s for the name when set, else made up).

        Raises:
            ProviderExists: the name or uuid is taken by another provider.
            InvalidProvider: the name, uuid or generation is not valid.
        """
        with self._lock:
            derive = getattr(self, "root_uuids", None)   # copies lack it
            if uuid is None and derive is not None:
                uuid = derive(name)
            record = _new_record(self._index, name, None, uuid, generation)
            self._counter += 1
            index = self._writable() if self._shared else self._index
            index.add(record, self._counter, self._journal.log)
            return record.uuid

    def new_child(self, name: str, parent: str, uuid: str | None = None,
                  generation: int | None = None) -> str:
        """Add a provider under ``parent`` (a name or uuid); return its uuid.

        Without ``uuid`` the child's uuid is derived from its parent's and
        its name (:func:`virtdriver.drivers.identity.child_uuid`), so the
        same tree gets the same uuids on every run.

        Raises:
            ProviderNotFound: no provider is ``parent``.
            ProviderExists: the name or uuid is taken by another provider.
            InvalidProvider: the name, uuid or generation is not valid.
        """
        with self._lock:
            above = self._get(parent)
            if uuid is None and isinstance(name, str):
                uuid = child_uuid(above.uuid, name)
            record = _new_record(self._index, name, above, uuid, generation)
            self._counter += 1
            index = self._writable() if self._shared else self._index
            index.add(record, self._counter, self._journal.log)
            return record.uuid

    def remove(self, name_or_uuid: str) -> None:
        """Remove a provider and all its descendants.

        Raises:
            ProviderNotFound: no provider has this name or uuid.
        """
        with self._lock:
            self._remove(self._get(name_or_uuid).uuid)

    def populate_from_iterable(self, provider_dicts: Iterable[Mapping]
                               ) -> None:
        """Add or replace providers given as Placement provider dicts.

        Each dict has ``uuid`` and ``name``, and may have ``generation``,
        ``parent_provider_uuid`` and (beyond Nova) ``inventories``,
        ``traits`` and ``aggregates``.  A provider already in the tree is
        replaced with its whole subtree, as in Nova; others are kept.  The
        dicts may come in any order.  All or nothing: on error the tree is
        unchanged.

        Raises:
            InvalidProvider: a parent is missing, a value is invalid.
            ProviderExists: a name is taken by a provider not replaced.
        """
        objects = list(provider_dicts)
        with self._lock, self.savepoint():  # all or nothing
            _load(self, objects)

    @classmethod
    def from_json(cls, document: Mapping | str | bytes) -> ProviderTree:
        """Build a tree from its canonical JSON form (dict or text).

        Validates everything :meth:`populate_from_iterable` does, plus the
        document's shape and each ``root_provider_uuid``.
        """
        objects = tree_json.provider_objects(document)
        tree = cls()
        _load(tree, objects)
        for obj in objects:
            root = tree._index.by_uuid[obj["uuid"]].root_uuid
            if obj["root_provider_uuid"] not in (None, root):
                raise InvalidProvider(
                    describe(obj["name"], obj["uuid"]), "root_provider_uuid",
                    f"is {obj['root_provider_uuid']!r} but its parents lead "
                    f"to root {root}", "fix parent_provider_uuid or "
                    "root_provider_uuid so they agree")
        return tree

    # -- changing a provider -------------------------------------------------

    def update_inventory(self, name_or_uuid: str,
                         inventory: Mapping[str, Inventory | Mapping],
                         generation: int | None = None) -> bool:
        """Set the provider's whole inventory; return whether it changed.

        ``inventory`` maps resource class to an :class:`Inventory` or a
        Nova-style dict (``total`` plus any other field; the rest get
        Placement's defaults).  Whether it changed is decided by Nova's
        rule (:func:`~virtdriver.providers.inventory.inventory_changed`:
        a field the new record leaves out keeps its stored value); only a
        change is validated and stored.  ``generation``, when given, is
        stored even if nothing else changed.

        Raises:
            ProviderNotFound: no provider has this name or uuid.
            InvalidProvider: a record breaks one of Placement's rules
                (which one is named).
        """
        with self._lock:
            current = self._get(name_or_uuid)
            if not inventory_changed(current.inventory, inventory):
                self._store(current, generation, None, None, None)
                return False
            records = fast_inventory(inventory)
            if records is None:
                records = validate_inventory(current.label, inventory)
            self._store(current, generation, records, None, None, True)
            return True

    def update_resources(self, name_or_uuid: str,
                         resources: Mapping[str, Iterable]) -> bool:
        """Set the provider's resources (resource class -> set of the
        driver's resource objects, Nova's ``objects.Resource``); return
        whether they changed.  Stored as deep copies, handed back by
        ``data()``; not validated, not synced to Placement.

        Raises:
            ProviderNotFound: no provider has this name or uuid.
            InvalidProvider: ``resources`` is not a mapping of sets.
        """
        with self._lock:
            current = self._get(name_or_uuid)
            if current.resources == resources:
                return False
            try:
                stored = MappingProxyType({
                    rc: frozenset(copy.deepcopy(list(values)))
                    for rc, values in resources.items()})
            except (AttributeError, TypeError) as exc:
                raise InvalidProvider(
                    current.label, "resources", f"cannot be stored ({exc})",
                    "give a dict of resource class -> set of resources"
                    ) from None
            self._store(current, None, None, None, None, True, stored)
            return True

    def update_traits(self, name_or_uuid: str, traits: Iterable[str],
                      generation: int | None = None) -> bool:
        """Set the provider's traits; return whether they changed."""
        with self._lock:
            current = self._get(name_or_uuid)
            given = fast_traits(traits)
            if given is None:
                given = check_traits(current.label, traits)
            return self._store(current, generation, None, given, None)

    def add_traits(self, name_or_uuid: str, *traits: str) -> bool:
        """Add traits, keeping the others; return whether any was new.
        With no traits, a no-op that looks nothing up (as in Nova)."""
        if not traits:
            return False
        return self._change_set(name_or_uuid, "traits", traits, "add")

    def remove_traits(self, name_or_uuid: str, *traits: str) -> bool:
        """Remove traits (absent ones are ignored); return whether any was
        there.  With no traits, a no-op that looks nothing up."""
        if not traits:
            return False
        return self._change_set(name_or_uuid, "traits", traits, "remove")

    def update_aggregates(self, name_or_uuid: str, aggregates: Iterable[str],
                          generation: int | None = None) -> bool:
        """Set the provider's aggregate uuids; return whether they changed."""
        return self._change_set(name_or_uuid, "aggregates", aggregates, "set",
                                generation)

    def add_aggregates(self, name_or_uuid: str, *aggregates: str) -> bool:
        """Add aggregate uuids; return whether any was new."""
        return self._change_set(name_or_uuid, "aggregates", aggregates, "add")

    def remove_aggregates(self, name_or_uuid: str, *aggregates: str) -> bool:
        """Remove aggregate uuids; return whether any was there."""
        return self._change_set(name_or_uuid, "aggregates", aggregates,
                                "remove")

    # -- internals -------------------------------------------------------------

    def _get(self, name_or_uuid: str) -> ProviderData:
        # Caller holds the lock.  Inlines the index's by-uuid lookup.
        found = self._index.by_uuid.get(name_or_uuid)
        return found if found is not None else self._index.get(name_or_uuid)

    def _change_set(self, name_or_uuid: str, field: str,
                    values: Iterable[str], how: str,
                    generation: int | None = None) -> bool:
        with self._lock:
            current = self._get(name_or_uuid)
            old = getattr(current, field)
            if how == "remove":
                new = old.difference(values)
            else:
                given = _FAST_SET_CHECKS[field](values)
                if given is None:
                    given = _SET_CHECKS[field](current.label, values)
                new = old | given if how == "add" else given
            if field == "traits":
                return self._store(current, generation, None, new, None)
            return self._store(current, generation, None, None, new)

    def _store(self, current: ProviderData, generation: int | None,
               inventory: Mapping | None, traits: frozenset | None,
               aggregates: frozenset | None, force: bool = False,
               resources: Mapping | None = None) -> bool:
        """Store ``current`` with the fields given (``None``: keep);
        return whether the content differs.  Equal values keep the old
        objects, so an unchanged record stays the same object, unless
        ``force`` (a new inventory equal in content but given differently,
        or new resources): then the record is replaced."""
        if generation is None:
            generation = current.generation
        elif type(generation) is not int or generation < 0:
            generation = check_generation(current.label, generation)
        changed = False
        if inventory is None or (not force
                                 and inventory == current.inventory):
            inventory = current.inventory
        else:
            changed = True
        if traits is None or traits == current.traits:
            traits = current.traits
        else:
            changed = True
        if aggregates is None or aggregates == current.aggregates:
            aggregates = current.aggregates
        else:
            changed = True
        if resources is None:
            resources = current.resources
        else:
            changed = True
        if changed or generation != current.generation:
            self._counter += 1
            index = self._writable() if self._shared else self._index
            index.put(make_record(current.uuid, current.name, generation,
                                  current.parent_uuid, current.root_uuid,
                                  inventory, traits, aggregates, resources),
                      self._counter, self._journal.log)
        return changed

    def _add(self, record: ProviderData) -> None:
        self._counter += 1
        index = self._writable() if self._shared else self._index
        index.add(record, self._counter, self._journal.log)

    def _remove(self, uuid: str) -> None:
        self._counter += 1
        self._writable().remove(uuid, self._counter, self._journal.log)

    def _writable(self) -> ProviderIndex:
        # Caller holds the lock.
        if self._shared:
            self._index = self._index.copy()
            self._shared = False
        return self._index


def _new_record(index: ProviderIndex, name: str, parent: ProviderData | None,
                uuid: str | None, generation: int | None) -> ProviderData:
    """A checked record for a new provider (not yet added)."""
    if uuid is None:
        uuid = str(uuid4())
    if not (type(name) is str and 0 < len(name) <= MAX_NAME_LENGTH
            and type(uuid) is str and UUID_MATCH(uuid)
            and (generation is None
                 or type(generation) is int and generation >= 0)):
        label = describe(name, uuid)
        check_name(label, name)
        check_uuid(label, "uuid", uuid)
        generation = check_generation(label, generation)
    by_uuid, by_name = index.by_uuid, index.by_name
    if (uuid in by_uuid or uuid in by_name or name in by_uuid
            or name in by_name):
        for value in (uuid, name):
            holder = index.find(value)
            if holder is not None:
                raise ProviderExists(describe(name, uuid), value,
                                     holder.label)
    if parent is None:
        return make_record(uuid, name, generation, None, uuid,
                           _NO_INVENTORY, _EMPTY, _EMPTY, _NO_RESOURCES)
    return make_record(uuid, name, generation, parent.uuid, parent.root_uuid,
                       _NO_INVENTORY, _EMPTY, _EMPTY, _NO_RESOURCES)


def _load(tree: ProviderTree, objects: list[Mapping]) -> None:
    """Add or replace providers from dicts, parents first, into ``tree``."""
    index = tree._index
    for obj in parents_first(objects, index.by_uuid.__contains__):
        uuid, parent_uuid = obj["uuid"], obj.get("parent_provider_uuid")
        if uuid in tree._index.by_uuid:
            tree._remove(uuid)
        index = tree._index
        parent = None
        if parent_uuid is not None:
            parent = index.by_uuid.get(parent_uuid)
            if parent is None:
                raise InvalidProvider(
                    describe(obj.get("name"), uuid), "parent_provider_uuid",
                    f"{parent_uuid} was removed when an ancestor of it was "
                    "replaced", "give the replaced provider's whole subtree")
        record = _new_record(index, obj.get("name"), parent, uuid,
                             obj.get("generation"))
        inventory = obj.get("inventories", {})
        traits = obj.get("traits", ())
        aggregates = obj.get("aggregates", ())
        inventory_ok = fast_inventory(inventory)
        traits_ok = fast_traits(traits)
        aggregates_ok = fast_aggregates(aggregates)
        if inventory_ok is None or traits_ok is None or aggregates_ok is None:
            label = record.label  # the full checks, in their usual order
            inventory_ok = validate_inventory(label, inventory)
            traits_ok = check_traits(label, traits)
            aggregates_ok = check_aggregates(label, aggregates)
        tree._add(make_record(
            record.uuid, record.name, record.generation, record.parent_uuid,
            record.root_uuid, inventory_ok, traits_ok, aggregates_ok,
            _NO_RESOURCES))
