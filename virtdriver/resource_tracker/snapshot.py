"""Reading a provider tree, live or frozen.

:class:`TreeReader` holds every read method once; :class:`ProviderTree`
runs them under its lock, :class:`TreeSnapshot` runs them on an index that
no one will write again.  Reads return immutable records and new lists;
they never copy the tree.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Mapping

from virtdriver.resource_tracker import tree_json
from virtdriver.providers.inventory import (
    Inventory, fast_inventory, validate_inventory)
from virtdriver.providers.record import ProviderData
from virtdriver.resource_tracker.provider_index import ProviderIndex


class TreeReader:
    """The read methods of :class:`ProviderTree` and :class:`TreeSnapshot`.

    Subclasses set ``_index`` (a :class:`ProviderIndex`) and ``_lock`` (a
    context manager held around each read).
    """

    _index: ProviderIndex
    _lock: contextlib.AbstractContextManager

    def exists(self, name_or_uuid: str) -> bool:
        """Whether a provider has this name or uuid."""
        with self._lock:
            return self._index.find(name_or_uuid) is not None

    def data(self, name_or_uuid: str) -> ProviderData:
        """The provider's current record (immutable; no copy is made).

        Raises:
            ProviderNotFound: no provider has this name or uuid.
        """
        with self._lock:
            return self._index.get(name_or_uuid)

    def get_provider_uuids(self, name_or_uuid: str | None = None
                           ) -> list[str]:
        """Uuids of the subtree at ``name_or_uuid`` (default: every tree),
        parents before children."""
        with self._lock:
            if name_or_uuid is None:
                return self._index.subtree(None)[1:]
            return self._index.subtree(self._index.get(name_or_uuid).uuid)

    def get_provider_uuids_in_tree(self, name_or_uuid: str) -> list[str]:
        """Uuids of the whole tree ``name_or_uuid`` belongs to, root first."""
        with self._lock:
            root = self._index.get(name_or_uuid).root_uuid
            return self._index.subtree(root)

    def subtree_stamp(self, root_uuid: str) -> int:
        """A number that changes with every write to a root's tree; O(1).

        Any write to the root or a descendant (content or generation), a
        provider added or removed below it, the root's removal: each gives
        the tree a stamp never handed out before in this tree's life.
        Rollback and ``restore()`` bring back the old stamps with the old
        state, and a snapshot keeps the stamps of its moment.  ``0``
        (never a stamp) when no *root* has this uuid.
        """
        with self._lock:
            return self._index.stamps.get(root_uuid, 0)

    @property
    def roots(self) -> list[ProviderData]:
        """The root providers' records, in creation order."""
        with self._lock:
            index = self._index
            return [index.by_uuid[uuid] for uuid in index.children[None]]

    def providers(self) -> list[ProviderData]:
        """Every provider's record, parents before children."""
        with self._lock:
            index = self._index
            return [index.by_uuid[uuid] for uuid in index.subtree(None)[1:]]

    def __len__(self) -> int:
        return len(self._index.by_uuid)

    def has_inventory(self, name_or_uuid: str) -> bool:
        """Whether the provider has any inventory record."""
        return bool(self.data(name_or_uuid).inventory)

    def has_inventory_changed(self, name_or_uuid: str,
                              inventory: Mapping[str, Inventory | Mapping]
                              ) -> bool:
        """Whether ``inventory`` (validated, defaults filled) differs."""
        current = self.data(name_or_uuid)
        records = fast_inventory(inventory)
        if records is None:
            records = validate_inventory(current.label, inventory)
        return records != current.inventory

    def has_traits(self, name_or_uuid: str, traits: Iterable[str]) -> bool:
        """Whether the provider has *all* of ``traits``."""
        return self.data(name_or_uuid).traits.issuperset(traits)

    def have_traits_changed(self, name_or_uuid: str,
                            traits: Iterable[str]) -> bool:
        """Whether ``traits`` differ from the provider's."""
        return frozenset(traits) != self.data(name_or_uuid).traits

    def in_aggregates(self, name_or_uuid: str,
                      aggregates: Iterable[str]) -> bool:
        """Whether the provider is in *all* of ``aggregates``."""
        return self.data(name_or_uuid).aggregates.issuperset(aggregates)

    def have_aggregates_changed(self, name_or_uuid: str,
                                aggregates: Iterable[str]) -> bool:
        """Whether ``aggregates`` differ from the provider's."""
        return frozenset(aggregates) != self.data(name_or_uuid).aggregates

    def to_json(self) -> dict:
        """The canonical JSON document (see ``docs/provider-tree.md``)."""
        return tree_json.to_json(self.providers())


class TreeSnapshot(TreeReader):
    """A provider tree frozen at one moment: every read, no writes.

    Made by :meth:`ProviderTree.snapshot` in O(1); later writes to the tree
    never show here.  Safe to share between threads without locking.
    """

    def __init__(self, index: ProviderIndex, origin: object = None) -> None:
        self._index = index
        self._lock = contextlib.nullcontext()
        #: The tree this snapshot was taken of (``None`` if unknown).
        self.origin = origin

    def snapshot(self) -> TreeSnapshot:
        """This snapshot itself (it is already frozen)."""
        return self
