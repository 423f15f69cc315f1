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
"""

from __future__ import annotations

from virtdriver.resource_tracker.errors import ProviderNotFound
from virtdriver.resource_tracker.provider import ProviderData


class ProviderIndex:
    """Providers by uuid and by name, and who is whose child.

    Not thread-safe and not public: :class:`ProviderTree` guards it with its
    lock and hands out only immutable records and frozen snapshots.
    """

    __slots__ = ("by_uuid", "by_name", "children", "_owned")

    def __init__(self) -> None:
        self.by_uuid: dict[str, ProviderData] = {}
        self.by_name: dict[str, str] = {}
        self.children: dict[str | None, dict[str, None]] = {None: {}}
        # Parents whose child set this index made itself and may change in
        # place; any other child set may be shared with a snapshot.
        self._owned: set[str | None] = {None}

    def copy(self) -> ProviderIndex:
        """A shallow copy that shares records and child sets until written."""
        new = ProviderIndex.__new__(ProviderIndex)
        new.by_uuid = dict(self.by_uuid)
        new.by_name = dict(self.by_name)
        new.children = dict(self.children)
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
        order: list = []
        stack = [uuid]
        children = self.children
        while stack:
            current = stack.pop()
            order.append(current)
            below = children.get(current)
            if below:
                stack.extend(reversed(below))
        return order

    # -- writes -----------------------------------------------------------

    def add(self, record: ProviderData) -> None:
        """Insert a new provider under its parent (which must exist)."""
        self.by_uuid[record.uuid] = record
        self.by_name[record.name] = record.uuid
        self._child_set(record.parent_uuid)[record.uuid] = None

    def put(self, record: ProviderData) -> None:
        """Replace a provider's record (same uuid, name and parent)."""
        self.by_uuid[record.uuid] = record

    def remove(self, uuid: str) -> list[str]:
        """Remove a provider and its descendants; return their uuids."""
        gone = self.subtree(uuid)
        del self._child_set(self.by_uuid[uuid].parent_uuid)[uuid]
        for each in gone:
            del self.by_name[self.by_uuid.pop(each).name]
            self.children.pop(each, None)
            self._owned.discard(each)
        return gone

    def _child_set(self, parent: str | None) -> dict[str, None]:
        if parent not in self._owned:
            self.children[parent] = dict(self.children.get(parent, ()))
            self._owned.add(parent)
        return self.children[parent]
