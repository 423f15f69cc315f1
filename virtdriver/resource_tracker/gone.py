"""Removing the trees of nodes that are gone, only when provably ours.

A root is removed only when all of these hold: its name is not a node any
more; it was not updated in this cycle; the ledger lists it; it is proved
ours by more than the ledger — the tracker saw the driver create or update
it in this process, or the driver recognises its uuid as the one it
derives for that name (:meth:`ComputeDriver.recognizes_root`); and every
provider under it is ours too (a foreign child keeps the whole tree).
"""

from __future__ import annotations

import logging
from typing import Any

from virtdriver.drivers.identity import is_derived_child
from virtdriver.providers.record import ProviderData
from virtdriver.resource_tracker.ledger import Ledger
from virtdriver.resource_tracker.reconcile import Drift
from virtdriver.resource_tracker.results import Records, UpdateResult, records
from virtdriver.resource_tracker.tree_diff import TreeDiff, diff

LOG = logging.getLogger("virtdriver.resource_tracker.tracker")


def remove_gone(tracker: Any, nodes: set[str], ledger: Ledger,
            updated: set[str],
            changes: dict[str, frozenset[str] | None]
            ) -> dict[str, UpdateResult]:
    """Remove the trees of gone nodes that are provably this tracker's.

    A root is removed only when all of these hold: its name is not a
    node any more; it was not updated in this cycle; the ledger lists
    it; it is proved ours by more than the ledger — this tracker saw
    the driver create or update it in this process, or the driver
    recognises its uuid as the one it derives for that name
    (:meth:`ComputeDriver.recognizes_root`); and every provider under
    it is ours too (a foreign child keeps the whole tree).  A root
    that fails only the proof is kept and reported in the result's
    ``kept``.
    """
    results = {}
    for root in tracker.tree.roots:
        if (root.name in nodes or root.uuid in updated
                or root.uuid not in ledger):
            continue
        gone = records(tracker.tree, root.uuid)
        reason = _why_not_ours(tracker, root, gone)
        if reason is not None:
            LOG.warning("%s is not a node any more but %s; not removed "
                        "(remove it by hand if it is stale)",
                        root.label, reason)
            results[root.name] = UpdateResult(
                root.name, TreeDiff(), Drift(), {root.label: reason})
            continue
        tracker.tree.remove(root.uuid)
        changes.update((record.uuid, None) for record in gone)
        LOG.info("node %s is gone: removed its %d provider(s)",
                 root.name, len(gone))
        results[root.name] = UpdateResult(
            root.name, diff(Records(gone), Records([])), Drift())
    return results

def _why_not_ours(tracker: Any, root: ProviderData,
              tree: list[ProviderData]) -> str | None:
    """``None`` if ``root``'s tree is provably ours, else why not."""
    if not (root.uuid in tracker._managed
            or tracker.driver.recognizes_root(root.name, root.uuid)):
        return ("only the ledger lists it: this driver did not create "
                "it in this process and its uuid is not the one the "
                "driver derives for that name")
    foreign = [record.label for record in tree[1:]
               if record.uuid not in tracker._managed
               and not is_derived_child(record.uuid, record.name,
                                        record.parent_uuid)]
    if foreign:
        return ("providers under it are someone else's: "
                + ", ".join(foreign))
    return None
