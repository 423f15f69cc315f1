"""Savepoints: undo a provider tree's writes since a point, in O(writes).

:meth:`ProviderTree.savepoint` starts an undo log (:class:`Journal`);
while any savepoint is active every write appends its before-images to it
(see :mod:`.provider_index`).  :meth:`Savepoint.rollback` undoes the
entries after its mark, :meth:`Savepoint.release` keeps the writes.
Savepoints nest like SQL's: ending one (either way) ends those taken after
it, and entries a released inner savepoint leaves stay in the log, so an
outer one can still undo them.  When the last savepoint ends the log is
dropped and writes stop journaling.

:attr:`Savepoint.before` reads the tree as it was at the savepoint, by
looking up each key's oldest before-image in the log, falling back to the
tree's current value: its cost is what is asked plus the log's length,
never the tree's size.
"""

from __future__ import annotations

from virtdriver.providers.errors import ProviderNotFound
from virtdriver.providers.record import ProviderCopy, ProviderData, copy_of
from virtdriver.resource_tracker.provider_index import (
    MISSING, NAME, STAMP, UUID, children_before, preorder)


class SavepointError(RuntimeError):
    """A savepoint was used after it ended, or with the wrong tree."""


class Journal:
    """The undo log of one tree and its stack of active savepoints.

    Not thread-safe: the tree's lock guards it.
    """

    __slots__ = ("log", "stack", "taken", "undos")

    def __init__(self) -> None:
        #: The log while a savepoint is active, else ``None``.
        self.log: list | None = None
        self.stack: list[Savepoint] = []
        #: How many savepoints were ever taken (to number them).
        self.taken = 0
        #: How many times entries were undone (cut from the log).
        self.undos = 0

    def begin(self, tree) -> Savepoint:
        """A new innermost savepoint of ``tree``."""
        if self.log is None:
            self.log = []
        self.taken += 1
        savepoint = Savepoint(tree, self, len(self.log), self.taken)
        self.stack.append(savepoint)
        return savepoint

    def end(self, savepoint: Savepoint, how: str) -> None:
        """End ``savepoint`` and the ones taken after it."""
        position = self.stack.index(savepoint)
        for each in self.stack[position:]:
            each._ended = how
        del self.stack[position:]
        if not self.stack:
            self.log = None

    def abandon(self, how: str) -> None:
        """End every savepoint (the tree was restored from a snapshot)."""
        if self.stack:
            self.end(self.stack[0], how)


class Savepoint:
    """A point in a tree's history that it can go back to.

    Made by :meth:`ProviderTree.savepoint`; hold ``tree.lock`` from there
    to :meth:`rollback` or :meth:`release`.  Also a context manager: the
    block's writes are released when it ends normally and rolled back when
    it raises (unless it ended the savepoint itself).
    """

    __slots__ = ("_tree", "_journal", "_mark", "number", "_ended", "_before")

    def __init__(self, tree, journal: Journal, mark: int,
                 number: int) -> None:
        self._tree = tree
        self._journal = journal
        self._mark = mark
        #: 1 for the tree's first savepoint, 2 for the next, ...
        self.number = number
        self._ended: str | None = None
        self._before: TreeBefore | None = None

    @property
    def active(self) -> bool:
        """Whether the savepoint can still be rolled back or released."""
        return self._ended is None

    def rollback(self) -> None:
        """Undo every write since the savepoint, and end it (and the
        savepoints taken after it).  O(writes since).

        Raises:
            SavepointError: the savepoint has already ended.
        """
        with self._tree.lock:
            self._check("rollback()")
            log = self._journal.log
            if len(log) > self._mark:
                self._tree._writable().undo(log[self._mark:])
                del log[self._mark:]
                self._journal.undos += 1
            self._journal.end(self, "rolled back")

    def release(self) -> None:
        """Keep the writes since the savepoint and end it (and the
        savepoints taken after it); an outer savepoint can still undo
        them.  O(1).

        Raises:
            SavepointError: the savepoint has already ended.
        """
        with self._tree.lock:
            self._check("release()")
            self._journal.end(self, "released")

    @property
    def before(self) -> TreeBefore:
        """The tree as it was at this savepoint (read-only), while the
        savepoint is active."""
        self._check("before")
        if self._before is None:
            self._before = TreeBefore(self)
        return self._before

    def __enter__(self) -> Savepoint:
        return self

    def __exit__(self, kind, value, traceback) -> None:
        if self.active:
            if kind is None:
                self.release()
            else:
                self.rollback()

    def __repr__(self) -> str:
        state = self._ended or "active"
        return f"<Savepoint #{self.number} {state}>"

    def _check(self, what: str) -> None:
        if self._ended is not None:
            raise SavepointError(
                f"savepoint #{self.number} was already {self._ended}, so "
                f"{what} cannot use it; take a new tree.savepoint()")


class TreeBefore:
    """Reads of a tree as it was at a savepoint.

    ``exists``, ``record``, ``data``, ``get_provider_uuids``,
    ``get_provider_uuids_in_tree`` and ``subtree_stamp``, with the
    semantics of :class:`~virtdriver.resource_tracker.snapshot.TreeReader`.
    Valid while the savepoint is active (then :class:`SavepointError`);
    each read costs what it returns, plus reading the log entries written
    since the last read (all of them again after an inner rollback).
    """

    def __init__(self, savepoint: Savepoint) -> None:
        self._savepoint = savepoint
        self._tree = savepoint._tree
        self._undos: int | None = None  # not read yet
        self._read = savepoint._mark

    def exists(self, name_or_uuid: str) -> bool:
        """Whether a provider had this name or uuid."""
        with self._tree.lock:
            return self._find(name_or_uuid) is not None

    def data(self, name_or_uuid: str) -> ProviderCopy:
        """A copy of the provider's data as it was (see
        :meth:`TreeReader.data`)."""
        return copy_of(self.record(name_or_uuid))

    def record(self, name_or_uuid: str) -> ProviderData:
        """The provider's record as it was.

        Raises:
            ProviderNotFound: no provider had this name or uuid.
        """
        with self._tree.lock:
            found = self._find(name_or_uuid)
            if found is None:
                raise ProviderNotFound(name_or_uuid)
            return found

    def get_provider_uuids(self, name_or_uuid: str | None = None
                           ) -> list[str]:
        """Uuids of the subtree at ``name_or_uuid`` (default: every tree),
        parents before children, as it was."""
        with self._tree.lock:
            if name_or_uuid is None:
                return self._subtree(None)[1:]
            return self._subtree(self.record(name_or_uuid).uuid)

    def get_provider_uuids_in_tree(self, name_or_uuid: str) -> list[str]:
        """Uuids of the whole tree ``name_or_uuid`` belonged to, root
        first, as it was."""
        with self._tree.lock:
            return self._subtree(self.record(name_or_uuid).root_uuid)

    def subtree_stamp(self, root_uuid: str) -> int:
        """:meth:`ProviderTree.subtree_stamp` as it was (0: no such root)."""
        with self._tree.lock:
            self._refresh()
            old = self._old[STAMP].get(root_uuid, self)
            if old is self:
                return self._tree._index.stamps.get(root_uuid, 0)
            return 0 if old is MISSING else old

    # -- internals -------------------------------------------------------

    def _refresh(self) -> None:
        """Read the log entries written since the last read.

        The log only grows between undos; after one (an inner savepoint
        rolled back) start over from the savepoint's mark.
        """
        savepoint = self._savepoint
        savepoint._check("before")
        journal = savepoint._journal
        log = journal.log
        if self._undos != journal.undos:
            self._undos = journal.undos
            self._read = savepoint._mark
            self._old: dict[int, dict] = {UUID: {}, NAME: {}, STAMP: {}}
            self._child_entries: dict[str | None, list] = {}
            self._children: dict[str | None, dict | None] = {}
        for position in range(self._read, len(log)):
            entry = log[position]
            kind, key, old = entry
            table = self._old.get(kind)
            if table is None:
                # A child set already worked out stays right: later
                # entries never change what it was at the savepoint.
                self._child_entries.setdefault(key, []).append(entry)
            elif key not in table:  # the oldest before-image wins
                table[key] = old
        self._read = len(log)

    def _lookup(self, kind: int, key: str, now: dict):
        old = self._old[kind].get(key, self)
        if old is self:
            return now.get(key)
        return None if old is MISSING else old

    def _find(self, name_or_uuid: str) -> ProviderData | None:
        self._refresh()
        index = self._tree._index
        found = self._lookup(UUID, name_or_uuid, index.by_uuid)
        if found is None:
            uuid = self._lookup(NAME, name_or_uuid, index.by_name)
            if uuid is not None:
                found = self._lookup(UUID, uuid, index.by_uuid)
        return found

    def _child_set(self, parent: str | None) -> dict | None:
        now = self._tree._index.children.get(parent)
        entries = self._child_entries.get(parent)
        if entries is None:
            return now
        if parent not in self._children:
            self._children[parent] = children_before(now, entries)
        return self._children[parent]

    def _subtree(self, uuid: str | None) -> list:
        self._refresh()
        return preorder(uuid, self._child_set)
