"""The resource tracker: asks the driver, keeps owned traits true.

One :class:`ResourceTracker` per driver.  Each update of a node:

1. snapshots the tree (O(1)) and the driver's ownership for the node;
2. lets the driver update the node's providers in the tree — the driver
   applies its own trait report (owned traits follow it, unknown ones stay,
   others are not touched);
3. settles each of the node's providers with
   :func:`~.reconcile.settle`: the driver's result stands for the names it
   owns and its node report answers for; foreign traits stay as they were
   before (put back if the driver removed one); owned names nobody answers
   for any more — found by prefix, static name, or the ledger (inside the
   driver's namespace) — are removed; drift is computed;
4. saves the ledger atomically.

If anything fails — the driver, the tracker's checks, saving the ledger —
the tree is put back as the snapshot saw it (:func:`.rollback.restore`)
and the error propagates: an update happens whole or not at all.  The
tree's lock is held throughout, so no other writer interleaves.

``docs/resource-tracker.md`` has the whole story.
"""

from __future__ import annotations

import logging
import pathlib
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from virtdriver.drivers.base import ComputeDriver, DriverError
from virtdriver.resource_tracker.ledger import Ledger, ledger_path
from virtdriver.resource_tracker.provider import ProviderData
from virtdriver.resource_tracker.provider_tree import ProviderTree
from virtdriver.resource_tracker.reconcile import Drift, Settlement, settle
from virtdriver.resource_tracker.rollback import restore
from virtdriver.resource_tracker.snapshot import TreeReader, TreeSnapshot
from virtdriver.resource_tracker.tree_diff import TreeDiff, diff

LOG = logging.getLogger(__name__)

__all__ = ["Drift", "ResourceTracker", "UpdateAllError", "UpdateResult"]


@dataclass(frozen=True)
class UpdateResult:
    """What one node's update changed.

    Attributes:
        nodename: the node.
        diff: the changes to the node's providers (what sync must send).
        drift: owned traits others changed since the last update.
    """

    nodename: str
    diff: TreeDiff
    drift: Drift


class UpdateAllError(DriverError):
    """Some nodes failed to update in :meth:`ResourceTracker.update_all`.

    Their providers are unchanged; the other nodes were updated (and the
    ledger saved).

    Attributes:
        results: nodename → :class:`UpdateResult` of the nodes that worked.
        errors: nodename → the exception of each node that failed.
    """

    def __init__(self, results: Mapping[str, UpdateResult],
                 errors: Mapping[str, Exception]) -> None:
        self.results = dict(results)
        self.errors = dict(errors)
        failed = "; ".join(f"{node}: {exc}" for node, exc in errors.items())
        super().__init__(
            f"{len(errors)} of {len(errors) + len(results)} nodes failed to "
            f"update and were left unchanged ({failed}); the others were "
            "updated. Fix what each error names and update again")


def default_driver_name(driver: ComputeDriver) -> str:
    """``FakeDriver`` → ``fake``: the class name, lower case, without a
    ``Driver`` suffix (a ledger file name part)."""
    name = type(driver).__name__.lower().removesuffix("driver") or "driver"
    return re.sub(r"[^a-z0-9_.-]", "_", name)


class ResourceTracker:
    """Keeps a driver's nodes' providers up to date in :attr:`tree`.

    Args:
        driver: an initialised driver (``init_host`` called).
        state_dir: where the ledger lives
            (``<state_dir>/ledger-<driver_name>.json``).
        tree: the tree to keep (a new empty one by default).
        driver_name: names the ledger file; default from the driver's
            class (:func:`default_driver_name`).  Two trackers must not
            share a ledger file.

    Raises:
        LedgerError: the ledger file exists but cannot be read.
    """

    def __init__(self, driver: ComputeDriver, *, state_dir: pathlib.Path,
                 tree: ProviderTree | None = None,
                 driver_name: str | None = None) -> None:
        self.driver = driver
        self.tree = tree if tree is not None else ProviderTree()
        self.driver_name = driver_name or default_driver_name(driver)
        self.ledger_path = ledger_path(state_dir, self.driver_name)
        self._ledger = Ledger.load(self.ledger_path)

    @property
    def ledger(self) -> Ledger:
        """The ledger as last saved."""
        return self._ledger

    def update_available_resource(self, nodename: str) -> UpdateResult:
        """Update ``nodename``'s providers, settle traits, save the ledger.

        Raises:
            DriverError: from the driver (e.g. ``NodeNotFoundError``); the
                tree and the ledger are unchanged.
            LedgerError: the ledger could not be saved; the tree is
                unchanged.
        """
        with self.tree.lock:
            start = self.tree.snapshot()
            changes: dict[str, frozenset[str] | None] = {}
            try:
                result = self._update_node(nodename, changes)
                self._commit(changes)
            except BaseException:
                restore(self.tree, start)
                raise
        return result

    def update_all(self) -> dict[str, UpdateResult]:
        """Update every node of ``driver.get_available_nodes(refresh=True)``.

        Then remove the trees of roots this tracker manages (listed in the
        ledger) whose name is no longer a node; each appears in the result
        under its root's name, its diff listing the deletions.  Roots the
        ledger does not list (someone else's) are never removed.  A node
        that fails is left unchanged and the others still update; the
        ledger is saved once at the end, without entries for providers no
        longer in the tree.

        Raises:
            UpdateAllError: some nodes failed (the others were updated).
            DriverError: the node list could not be read; nothing changed.
            LedgerError: the ledger could not be saved; nothing changed.
        """
        nodes = self.driver.get_available_nodes(refresh=True)
        results: dict[str, UpdateResult] = {}
        errors: dict[str, Exception] = {}
        with self.tree.lock:
            start = self.tree.snapshot()
            changes: dict[str, frozenset[str] | None] = {}
            try:
                for nodename in nodes:
                    before = self.tree.snapshot()
                    node_changes: dict[str, frozenset[str] | None] = {}
                    try:
                        results[nodename] = self._update_node(
                            nodename, node_changes)
                    except Exception as exc:  # one node must not stop all
                        restore(self.tree, before)
                        LOG.warning("node %s not updated: %s", nodename, exc)
                        errors[nodename] = exc
                    else:
                        changes.update(node_changes)
                results.update(self._remove_gone(set(nodes), changes))
                self._commit(changes)
            except BaseException:
                restore(self.tree, start)
                raise
        if errors:
            raise UpdateAllError(results, errors)
        return results

    # -- one node -------------------------------------------------------------

    def _update_node(self, nodename: str,
                     changes: dict[str, frozenset[str] | None]
                     ) -> UpdateResult:
        """Run the driver and settle the node; record ledger changes.

        The caller holds the lock and restores the tree on error.
        """
        start = self.tree.snapshot()
        owned = self.driver.ownership_for(nodename)
        self.driver.update_provider_tree(self.tree, nodename)
        root = self._root_name(nodename)
        owned = owned.union(self.driver.ownership_for(nodename))
        namespace = self.driver.ownership.union(owned)
        report = self.driver.node_capabilities(nodename).traits
        answered = frozenset(report.results) if report is not None else None
        before = _records(start, root)
        after_uuids = self.tree.get_provider_uuids_in_tree(root)
        removed_by, added_by = {}, {}
        for uuid in after_uuids:
            record = self.tree.data(uuid)
            existed = start.exists(uuid)
            # A provider created now has no baseline: no drift for it.
            done = settle(
                start.data(uuid).traits if existed else (), record.traits,
                ownership=owned,
                ledger=self._ledger.get(uuid) if existed else None,
                namespace=namespace, answered=answered)
            if done.traits != record.traits:
                self.tree.update_traits(uuid, done.traits)
            _log_settlement(record, done)
            removed_by[record.name] = done.removed_by_others
            added_by[record.name] = done.added_by_others
            changes[uuid] = done.ledger
        for record in before:
            if not self.tree.exists(record.uuid):
                changes[record.uuid] = None
        after = [self.tree.data(uuid) for uuid in after_uuids]
        result = UpdateResult(nodename, diff(_Records(before),
                                             _Records(after)),
                              Drift(removed_by, added_by))
        for line in result.drift.describe():
            LOG.warning("node %s: drift on owned traits: %s", nodename, line)
        return result

    def _root_name(self, nodename: str) -> str:
        """The node's root provider after the driver's update.

        Named ``nodename`` by the contract; a driver that names roots by
        uuid and accepts aliases (ironic) gives the canonical name through
        ``node_capabilities``.
        """
        if self.tree.exists(nodename):
            return nodename
        canonical = self.driver.node_capabilities(nodename).nodename
        if self.tree.exists(canonical):
            return canonical
        raise DriverError(
            f"driver {self.driver_name!r} updated node {nodename!r} but the "
            f"tree has no provider named {nodename!r} (or {canonical!r}); "
            "update_provider_tree must create the node's root under the "
            "node's name (see virtdriver.drivers.base)")

    def _remove_gone(self, nodes: set[str],
                     changes: dict[str, frozenset[str] | None]
                     ) -> dict[str, UpdateResult]:
        """Remove managed roots whose name is not a node any more, and
        forget ledger entries of providers not in the tree (after every
        node was updated, those are gone for good)."""
        results = {}
        for root in self.tree.roots:
            if root.name in nodes or root.uuid not in self._ledger:
                continue
            gone = _records(self.tree, root.uuid)
            self.tree.remove(root.uuid)
            changes.update((record.uuid, None) for record in gone)
            LOG.info("node %s is gone: removed its %d provider(s)",
                     root.name, len(gone))
            results[root.name] = UpdateResult(
                root.name, diff(_Records(gone), _Records([])), Drift())
        for uuid in self._ledger:
            if not self.tree.exists(uuid):
                changes[uuid] = None
        return results

    def _commit(self, changes: Mapping[str, frozenset[str] | None]) -> None:
        """Save the ledger with ``changes`` (if it changed or is new)."""
        ledger = self._ledger.updated(changes)
        if ledger != self._ledger or not self.ledger_path.exists():
            ledger.save(self.ledger_path)
        self._ledger = ledger


class _Records:
    """A list of records posing as a tree for :func:`diff` (which reads
    only ``snapshot().providers()``), so a node's diff costs its own
    providers, not the whole tree's."""

    def __init__(self, records: Iterable[ProviderData]) -> None:
        self._records = list(records)

    def snapshot(self) -> _Records:
        return self

    def providers(self) -> list[ProviderData]:
        return self._records


def _records(reader: TreeReader | TreeSnapshot, root: str
             ) -> list[ProviderData]:
    """The records of the tree ``root`` names in ``reader`` (parents
    first), or none if it has no such provider."""
    if not reader.exists(root):
        return []
    return [reader.data(uuid)
            for uuid in reader.get_provider_uuids_in_tree(root)]


#: What the tracker did beyond the driver, and why: Settlement field,
#: log level, message (provider label and trait names filled in).
_NOTES = (
    ("restored", logging.WARNING, "%s: the driver removed foreign traits "
     "%s; put back (drivers may remove only traits they own)"),
    ("dropped", logging.WARNING, "%s: the driver set traits it does not "
     "own, %s; taken off (add them to the driver's ownership, or they could "
     "never be removed)"),
    ("stale", logging.INFO, "%s: removed %s: owned, and no longer reported "
     "by the driver"),
    ("ignored_ledger", logging.WARNING, "%s: ledger lists %s, which the "
     "driver does not own; ignored (tampered or stale ledger) and dropped "
     "from it"),
)


def _log_settlement(record: ProviderData, done: Settlement) -> None:
    """Log each of :data:`_NOTES` that applies to ``done``."""
    for name, level, message in _NOTES:
        traits = getattr(done, name)
        if traits:
            LOG.log(level, message, record.label, ", ".join(sorted(traits)))
