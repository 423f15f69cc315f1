"""Reading a provider tree, live or frozen.

:class:`TreeReader` holds every read method once; :class:`ProviderTree`
runs them under its lock, :class:`TreeSnapshot` runs them on an index that
no one will write again.  :meth:`TreeReader.record` and the other reads
return immutable records and new lists and never copy; :meth:`TreeReader.
data` returns a copy the caller may change, as Nova's tree does.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Mapping

import os_traits

from virtdriver.providers.inventory import Inventory, inventory_changed
from virtdriver.providers.record import ProviderCopy, ProviderData, copy_of
from virtdriver.resource_tracker import tree_json
from virtdriver.resource_tracker.provider_index import ProviderIndex


_SHARES = os_traits.MISC_SHARES_VIA_AGGREGATE


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

    def record(self, name_or_uuid: str) -> ProviderData:
        """The provider's current record: immutable, no copy made, O(1).

        The fast read for code that only reads (the tracker, the sync).

        Raises:
            ProviderNotFound: no provider has this name or uuid.
        """
        with self._lock:
            return self._index.get(name_or_uuid)

    def data(self, name_or_uuid: str) -> ProviderCopy:
        """A copy of the provider's data the caller may change, as Nova's
        ``ProviderTree.data()`` returns (see :class:`ProviderCopy`).

        Raises:
            ProviderNotFound: no provider has this name or uuid.
        """
        with self._lock:
            return copy_of(self._index.get(name_or_uuid))

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
        return bool(self.record(name_or_uuid).inventory)

    def has_inventory_changed(self, name_or_uuid: str,
                              inventory: Mapping[str, Inventory | Mapping]
                              ) -> bool:
        """Whether ``inventory`` differs from the provider's, by Nova's
        rule (:func:`~virtdriver.providers.inventory.inventory_changed`).

        Never raises for the values: input the tree would refuse is simply
        "changed" (``update_inventory`` then says why).

        Raises:
            ProviderNotFound: no provider has this name or uuid.
        """
        return inventory_changed(self.record(name_or_uuid).inventory,
                                 inventory)

    def has_sharing_provider(self, resource_class: str) -> bool:
        """Whether any provider has inventory of ``resource_class`` and
        the trait ``MISC_SHARES_VIA_AGGREGATE``."""
        with self._lock:
            return any(resource_class in record.inventory
                       and _SHARES in record.traits
                       for record in self._index.by_uuid.values())

    def has_traits(self, name_or_uuid: str, traits: Iterable[str]) -> bool:
        """Whether the provider has *all* of ``traits``."""
        return self.record(name_or_uuid).traits.issuperset(traits)

    def have_traits_changed(self, name_or_uuid: str,
                            traits: Iterable[str]) -> bool:
        """Whether ``traits`` differ from the provider's."""
        return frozenset(traits) != self.record(name_or_uuid).traits

    def in_aggregates(self, name_or_uuid: str,
                      aggregates: Iterable[str]) -> bool:
        """Whether the provider is in *all* of ``aggregates``."""
        return self.record(name_or_uuid).aggregates.issuperset(aggregates)

    def have_aggregates_changed(self, name_or_uuid: str,
                                aggregates: Iterable[str]) -> bool:
        """Whether ``aggregates`` differ from the provider's."""
        return frozenset(aggregates) != self.record(name_or_uuid).aggregates

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
