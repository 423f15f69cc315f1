"""Put a provider tree back the way a snapshot saw it.

The tracker lets a driver write into the live tree (holding the tree's
lock) and, when the driver or anything after it fails, calls
:func:`restore`.  Only the trees (a root and its descendants) that changed
are touched: roots created since the snapshot are removed, and every other
changed tree is replaced whole, through the public
``populate_from_iterable``, by its records from the snapshot — generations
included.  Cost: one :func:`~.tree_diff.diff` plus the changed trees.
"""

from __future__ import annotations

from virtdriver.resource_tracker import tree_json
from virtdriver.resource_tracker.provider_tree import ProviderTree
from virtdriver.resource_tracker.snapshot import TreeSnapshot
from virtdriver.resource_tracker.tree_diff import diff


def restore(tree: ProviderTree, snapshot: TreeSnapshot) -> None:
    """Make ``tree``'s content equal ``snapshot``'s again (module doc)."""
    with tree.lock:
        old_roots: dict[str, None] = {}
        new_roots: dict[str, None] = {}
        for entry in diff(snapshot, tree):
            if snapshot.exists(entry.uuid):
                old_roots[snapshot.data(entry.uuid).root_uuid] = None
            if tree.exists(entry.uuid):
                root = tree.data(entry.uuid).root_uuid
                if _was_root(snapshot, root):
                    old_roots[root] = None
                else:
                    new_roots[root] = None
        for root in new_roots:
            if tree.exists(root):
                tree.remove(root)
        records = [snapshot.data(uuid) for root in old_roots
                   for uuid in snapshot.get_provider_uuids(root)]
        if records:
            tree.populate_from_iterable(
                tree_json.to_json(records)["providers"])


def _was_root(snapshot: TreeSnapshot, uuid: str) -> bool:
    return snapshot.exists(uuid) and snapshot.data(uuid).parent_uuid is None
