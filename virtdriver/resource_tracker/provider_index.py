"""The storage behind a provider tree: flat dicts, copied on write.

Layout (every lookup O(1), whatever the shape of the tree):

* ``by_uuid``: uuid -> :class:`ProviderData` (the immutable record);
* ``by_name``: name -> uuid;
* ``children``: parent uuid -> {child uuid: None} (an insertion-ordered
  set), with the roots under the key ``None``.  Leaves have no entry.

Copy-on-write.  A snapshot shares its index with the tree.  The tree's next
write first calls :meth:`ProviderIndex.copy`, a *shallow* copy of the three
outer dicts (records are immutable, so they are shared, never copied); a
parent's child set is copied only when that parent's children change.  So
taking a snapshot is O(1), the first write after it O(providers) in C-level
dict copies, and every later write O(1) again.

Stamps.  ``stamps`` maps each root's uuid to the stamp of its tree's last
write (the tree hands out the numbers, see ``ProviderTree.subtree_stamp``);
it is copied and restored with the rest, so an old stamp always means the
old state.

Undo log.  Every write takes ``log``: a list to append its before-images
to (``None``: keep none).  An entry is ``(kind, key, old)``; :meth:`undo`
applies a run of them backwards, putting the index back exactly as it was,
child order included, in O(entries).  Savepoints (:mod:`.savepoint`) keep
the log and read the state before it (:func:`children_before`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from virtdriver.providers.errors import ProviderNotFound
from virtdriver.providers.record import ProviderData

#: ``old`` of a log entry whose key was absent before the write.
MISSING = object()
# Log entry kinds.  UUID, NAME, STAMP: ``key`` of that table had ``old``.
# CHILD_ADDED: ``old`` was appended to parent ``key``'s child set.
# CHILD_DROPPED: ``old`` was the last of parent ``key``'s child set.
# CHILD_SET: parent ``key``'s whole child set was ``old`` (a dict no one
# changes any more, or MISSING).
UUID, NAME, STAMP, CHILD_ADDED, CHILD_DROPPED, CHILD_SET = range(6)


def preorder(uuid: str | None, children_of: Callable[[str | None], Any]
             ) -> list:
    """``uuid`` and its descendants, parents first, siblings in order;
    ``children_of(uuid)`` gives a node's ordered children (or nothing)."""
    order: list = []
    stack = [uuid]
    while stack:
        current = stack.pop()
        order.append(current)
        below = children_of(current)
        if below:
            stack.extend(reversed(below))
    return order


class ProviderIndex:
    """Providers by uuid and by name, and who is whose child.

    Not thread-safe and not public: :class:`ProviderTree` guards it with its
    lock and hands out only immutable records and frozen snapshots.
    """

    __slots__ = ("by_uuid", "by_name", "children", "stamps", "_owned")

    def __init__(self) -> None:
        self.by_uuid: dict[str, ProviderData] = {}
        self.by_name: dict[str, str] = {}
        self.children: dict[str | None, dict[str, None]] = {None: {}}
        self.stamps: dict[str, int] = {}
        # Parents whose child set this index made itself and may change in
        # place; any other child set may be shared with a snapshot.
        self._owned: set[str | None] = {None}

    def copy(self) -> ProviderIndex:
        """A shallow copy that shares records and child sets until written."""
        new = ProviderIndex.__new__(ProviderIndex)
        new.by_uuid = dict(self.by_uuid)
        new.by_name = dict(self.by_name)
        new.children = dict(self.children)
        new.stamps = dict(self.stamps)
        new._owned = set()
        return new

    # -- reads ------------------------------------------------------------

    def find(self, name_or_uuid: str) -> ProviderData | None:
        """The provider with this uuid, else with this name, else ``None``."""
        found = self.by_uuid.get(name_or_uuid)
        if found is None:
            uuid = self.by_name.get(name_or_uuid)
            if uuid is not None:
                found = self.by_uuid[uuid]
        return found

    def get(self, name_or_uuid: str) -> ProviderData:
        """Like :meth:`find`, but raise :class:`ProviderNotFound`."""
        found = self.find(name_or_uuid)
        if found is None:
            raise ProviderNotFound(name_or_uuid)
        return found

    def subtree(self, uuid: str | None) -> list[str]:
        """``uuid`` and its descendants, parents before children (preorder,
        siblings in creation order).  ``None`` gives ``[None]`` + all."""
        return preorder(uuid, self.children.get)

    # -- writes (``stamp``: the new stamp of the record's root) -----------

    def add(self, record: ProviderData, stamp: int,
            log: list | None = None) -> None:
        """Insert a new provider under its parent (which must exist)."""
        uuid, parent, root = record.uuid, record.parent_uuid, record.root_uuid
        if log is not None:
            if parent not in self.children:
                log.append((CHILD_SET, parent, MISSING))
            log.append((UUID, uuid, MISSING))
            log.append((NAME, record.name, MISSING))
            log.append((CHILD_ADDED, parent, uuid))
            log.append((STAMP, root, self.stamps.get(root, MISSING)))
        self.by_uuid[uuid] = record
        self.by_name[record.name] = uuid
        if parent in self._owned:
            self.children[parent][uuid] = None
        else:
            self._child_set(parent)[uuid] = None
        self.stamps[root] = stamp

    def put(self, record: ProviderData, stamp: int,
            log: list | None = None) -> None:
        """Replace a provider's record (same uuid, name and parent)."""
        uuid, root = record.uuid, record.root_uuid
        if log is not None:
            log.append((UUID, uuid, self.by_uuid[uuid]))
            log.append((STAMP, root, self.stamps[root]))
        self.by_uuid[uuid] = record
        self.stamps[root] = stamp

    def remove(self, uuid: str, stamp: int, log: list | None = None
               ) -> list[str]:
        """Remove a provider and its descendants; return their uuids.

        Journaled, a removal that is not its parent's last child costs a
        copy of the parent's child set (so that undo restores the order).
        """
        gone = self.subtree(uuid)
        record = self.by_uuid[uuid]
        parent, root = record.parent_uuid, record.root_uuid
        if log is None:
            del self._child_set(parent)[uuid]
        else:
            log.append((STAMP, root, self.stamps[root]))
            siblings = self.children[parent]
            if next(reversed(siblings)) == uuid:
                log.append((CHILD_DROPPED, parent, uuid))
                del self._child_set(parent)[uuid]
            else:
                log.append((CHILD_SET, parent, siblings))
                self.children[parent] = {key: None for key in siblings
                                         if key != uuid}
                self._owned.add(parent)
        for each in gone:
            record = self.by_uuid.pop(each)
            del self.by_name[record.name]
            below = self.children.pop(each, None)
            self._owned.discard(each)
            if log is not None:
                log.append((UUID, each, record))
                log.append((NAME, record.name, each))
                if below is not None:
                    log.append((CHILD_SET, each, below))
        if parent is None:
            del self.stamps[uuid]
        else:
            self.stamps[root] = stamp
        return gone

    def undo(self, entries: list) -> None:
        """Undo the writes that logged ``entries`` (newest last)."""
        tables = {UUID: self.by_uuid, NAME: self.by_name, STAMP: self.stamps}
        for kind, key, old in reversed(entries):
            if kind == CHILD_ADDED:
                del self._child_set(key)[old]
            elif kind == CHILD_DROPPED:
                self._child_set(key)[old] = None
            elif kind == CHILD_SET:
                # ``old`` may be shared with a snapshot: not ours to change.
                self._owned.discard(key)
                if old is MISSING:
                    self.children.pop(key, None)
                else:
                    self.children[key] = old
            elif old is MISSING:
                del tables[kind][key]
            else:
                tables[kind][key] = old

    def _child_set(self, parent: str | None) -> dict[str, None]:
        if parent not in self._owned:
            self.children[parent] = dict(self.children.get(parent, ()))
            self._owned.add(parent)
        return self.children[parent]


def children_before(current: dict[str, None] | None, entries: list
                    ) -> dict[str, None] | None:
    """A parent's child set as it was before ``entries`` (that parent's
    CHILD_* entries, oldest first), given the set now (``None``: none)."""
    result = dict(current) if current is not None else None
    for kind, _, old in reversed(entries):
        if kind == CHILD_ADDED:
            del result[old]
        elif kind == CHILD_DROPPED:
            result[old] = None
        else:
            result = None if old is MISSING else dict(old)
    return result
