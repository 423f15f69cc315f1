"""Copies of a provider tree: ``copy.deepcopy``, pickling, ``subtree()``.

Records are immutable, so a copy shares them: a deep copy shares the whole
index copy-on-write (O(1)), a subtree copies the index entries of one
root's tree (O(its providers)), and pickling writes each record's fields
as plain values.  Copies share their source's lock, as Nova's trees share
one named lock; an unpickled tree gets the shared default lock, or a new
lock of its own if the pickled tree had its own.
"""

from __future__ import annotations

import threading
from types import MappingProxyType
from typing import TYPE_CHECKING

from virtdriver.providers.errors import ProviderTreeError
from virtdriver.providers.record import make_record

if TYPE_CHECKING:
    from virtdriver.resource_tracker.provider_tree import ProviderTree

_NO_RESOURCES: MappingProxyType = MappingProxyType({})


def deep_copy(tree: ProviderTree) -> ProviderTree:
    """An independent tree with the same content and stamps, in O(1)."""
    with tree.lock:
        new = type(tree)(tree.lock)
        new._index = tree._index
        new._shared = tree._shared = True
        new._counter = tree._counter
        return new


def subtree(tree: ProviderTree, name_or_uuid: str) -> ProviderTree:
    """A new tree of root ``name_or_uuid``'s providers (see
    ``ProviderTree.subtree``)."""
    with tree.lock:
        root = tree._get(name_or_uuid)
        if root.parent_uuid is not None:
            raise ProviderTreeError(
                f"{root.label} is not a root provider; subtree() takes a "
                f"root (this one's is {root.root_uuid})")
        new = type(tree)(tree.lock)
        stamp = tree._index.stamps[root.uuid]
        index, by_uuid = new._index, tree._index.by_uuid
        for uuid in tree._index.subtree(root.uuid):
            index.add(by_uuid[uuid], stamp)
        new._counter = tree._counter
        return new


def state_of(tree: ProviderTree) -> dict:
    """What pickling keeps: each record's fields, parents first, the
    stamps, and whether the tree had a lock of its own."""
    from virtdriver.resource_tracker.provider_tree import SHARED_LOCK

    with tree.lock:
        return {"providers": [
            (r.uuid, r.name, r.generation, r.parent_uuid, r.root_uuid,
             dict(r.inventory), r.traits, r.aggregates, dict(r.resources))
            for r in tree.providers()],
            "stamps": dict(tree._index.stamps), "counter": tree._counter,
            "own_lock": tree.lock is not SHARED_LOCK}


def load_state(tree: ProviderTree, state: dict) -> None:
    """Fill a new (unpickled) ``tree`` from :func:`state_of`'s result."""
    tree.__init__(threading.RLock() if state["own_lock"] else None)
    for (uuid, name, generation, parent, root, inventory, traits,
         aggregates, resources) in state["providers"]:
        tree._index.add(make_record(
            uuid, name, generation, parent, root,
            MappingProxyType(inventory), traits, aggregates,
            MappingProxyType(resources) if resources else _NO_RESOURCES), 0)
    tree._index.stamps.update(state["stamps"])
    tree._counter = state["counter"]
