"""The resource tracker: asks the driver, keeps owned traits true.

One :class:`ResourceTracker` per driver.  Each update is one transaction
over the tree, the ledger and the driver's own memory, under the state
directory's OS file lock (:mod:`virtdriver.filelock`) and the tree's lock:

1. re-read the ledger if another process changed it; snapshot the tree
   (O(1)) and take a savepoint for the node (its baseline; a failed node
   is rolled back in O(its writes)); open a driver transaction
   (:meth:`ComputeDriver.begin_update`);
2. create the node's root if the tree lacks it, as Nova's resource
   tracker does (:mod:`.node_root`: stable uuid), then let the driver
   update the node's providers — it applies its own trait report (owned
   traits follow it, unknown ones stay, others untouched); on
   ``ReshapeNeeded`` call it again with the allocations of the node's
   consumers (:mod:`.reshape_step`), keeping what it moved for the sync;
3. settle each provider *of the node* with :func:`~.reconcile.settle`
   against ``driver.ownership_for(node)`` — the ledger is trusted only
   inside that node's ownership — or, for a driver that declares none,
   with :func:`~.reconcile.settle_self_set` (the traits it provably set
   itself); a provider someone else put under the node's root (not
   derived from its parent and name, not created by this driver) is
   foreign as a whole and left as it was; then the tracker's own traits
   on the root (``COMPUTE_NODE``, ``COMPUTE_STATUS_DISABLED`` for a
   disabled node, :mod:`.node_status`);
4. save the ledger atomically, then commit the driver's transaction.

If anything fails the tree is put back exactly (generations included,
:meth:`ProviderTree.restore`), the driver's memory is rolled back, the
ledger file is not written, and the error propagates: a retry does what
the failed attempt would have done.  A node whose driver raised
``HypervisorUnavailable`` is such a failure: left exactly as it was.

In :meth:`ResourceTracker.update_all` a node whose inputs are all as the
tracker left them is skipped (:mod:`.fast_path`).

``docs/resource-tracker.md`` has the whole story.
"""

from __future__ import annotations

import logging
import pathlib
import re
import threading
from collections.abc import Mapping

from virtdriver.capabilities.traits.ownership import Ownership
from virtdriver.drivers.base import (
    ComputeDriver, DriverError, HypervisorUnavailable)
from virtdriver.drivers.identity import is_derived_child
from virtdriver.filelock import DEFAULT_TIMEOUT, exclusive_lock
from virtdriver.provider_config import AppliedRecord
from virtdriver.resource_tracker.claims_file import ClaimsFile
from virtdriver.resource_tracker.ledger import Ledger, LedgerFile
from virtdriver.resource_tracker.provider_config_step import (
    ProviderConfigStep)
from virtdriver.resource_tracker import fast_path
from virtdriver.resource_tracker.fast_path import Marks, NodeMark
from virtdriver.resource_tracker.gone import remove_gone
from virtdriver.resource_tracker.settle_step import settle_provider
from virtdriver.resource_tracker.tracker_claims import TrackerClaims
from virtdriver.resource_tracker.node_root import (
    TRACKER_TRAITS, prepare_root, stable_roots)
from virtdriver.resource_tracker.node_status import (
    NodeStatus, NodeStatusFile)
from virtdriver.resource_tracker.provider_tree import ProviderTree, Savepoint
from virtdriver.resource_tracker.reconcile import (
    NO_DRIFT, Drift)
from virtdriver.resource_tracker.reshape_step import (
    AllocationSource, Pending, ReshapeMoves, moves as reshape_moves,
    run_driver)
from virtdriver.resource_tracker.snapshot import TreeReader
from virtdriver.resource_tracker.results import (
    Records, UpdateAllError, UpdateResult, log_settlement, records)
from virtdriver.resource_tracker.tree_diff import diff

LOG = logging.getLogger(__name__)

__all__ = ["Drift", "ResourceTracker", "UpdateAllError", "UpdateResult"]


_NOTHING = Ownership(frozenset())
_TRACKER_TRAITS = TRACKER_TRAITS
_TRACKER = Ownership(TRACKER_TRAITS)
_EMPTY: frozenset[str] = frozenset()
#: The lock file in a state directory: one per directory, every state file
#: in it (ledger, and later claims and sync state) is read and written
#: under it.
LOCK_FILE = "virtdriver.lock"


def default_driver_name(driver: ComputeDriver) -> str:
    """``FakeDriver`` → ``fake``: the class name, lower case, without a
    ``Driver`` suffix (a ledger file name part)."""
    name = type(driver).__name__.lower().removesuffix("driver") or "driver"
    return re.sub(r"[^a-z0-9_.-]", "_", name)


class ResourceTracker(TrackerClaims):
    """Keeps a driver's nodes' providers up to date in :attr:`tree`.

    Args:
        driver: an initialised driver (``init_host`` called).
        state_dir: where the ledger lives
            (``<state_dir>/ledger-<driver_name>.json``), with the lock file
            every process using the directory shares.
        tree: the tree to keep (a new empty one by default).
        driver_name: names the ledger file; default from the driver's
            class (:func:`default_driver_name`).  Trackers in several
            processes may share a ledger file: each update re-reads it
            under the lock and changes only its own entries.
        lock_timeout: seconds to wait for another process holding the
            state directory's lock before :class:`~virtdriver.filelock.
            LockTimeout` (which names the holder).
        provider_config: the directory of operators' provider config files
            (``[compute] provider_config_location``), applied to each node
            in its update (``docs/provider-config.md``); ``None``: none.
        allocations: where a driver's reshape reads the allocations of its
            node's consumers (:mod:`.reshape_step`); ``None``: a driver
            that raises ``ReshapeNeeded`` fails its node.
        known_roots: node name → the uuid of the root an earlier sync made
            for it (the sync state's); a node whose root the tree lacks
            gets that uuid if the ledger lists it (:mod:`.node_root`).

    Raises:
        LedgerError: the ledger file exists but cannot be read.
        LockTimeout, LockError: the state directory's lock.
    """

    def __init__(self, driver: ComputeDriver, *, state_dir: pathlib.Path,
                 tree: ProviderTree | None = None,
                 driver_name: str | None = None,
                 lock_timeout: float = DEFAULT_TIMEOUT,
                 provider_config: pathlib.Path | str | None = None,
                 allocations: AllocationSource | None = None,
                 known_roots: Mapping[str, str] | None = None) -> None:
        self.driver = driver
        self.allocations = allocations
        self.known_roots: Mapping[str, str] = known_roots or {}
        # A lock of its own: trackers in one process do not wait on each
        # other (trees share one lock by default, as Nova's do).
        self.tree = (tree if tree is not None
                     else ProviderTree(threading.RLock()))
        self.driver_name = driver_name or default_driver_name(driver)
        self.state_dir = pathlib.Path(state_dir)
        self._ledger_file = LedgerFile(self.state_dir, self.driver_name)
        self.ledger_path = self._ledger_file.path
        self.lock_path = self.state_dir / LOCK_FILE
        self._claims_file = ClaimsFile(self.state_dir, self.driver_name)
        self.claims_path = self._claims_file.path
        self.provider_config = ProviderConfigStep(
            provider_config, self.state_dir, self.driver_name)
        self._lock_timeout = lock_timeout
        # Uuids of providers this driver created or updated as its nodes'
        # in this process: proof of ownership no file edit can forge.
        self._managed: set[str] = set()
        # Nodes update_all may skip while their inputs stay as they were.
        self._marks = Marks()
        self._status_file = NodeStatusFile(self.state_dir, self.driver_name)
        self._status = NodeStatus()
        # What this transaction leaves for the sync, and what is confirmed.
        self._pending = Pending()
        self._left = Pending()
        with self._state_lock():
            self._ledger_file.read()
            self._status = self._status_file.read()

    def node_status(self) -> NodeStatus:
        """The disabled nodes as the state directory says now."""
        with self._state_lock():
            return self._status_file.read()

    @property
    def reshapes(self) -> Mapping[str, ReshapeMoves]:
        """Root uuid → what the driver's reshape moved there, until
        :meth:`synced` confirms a sync sent it."""
        return self._left.moves

    def released(self, uuid: str) -> frozenset[str]:
        """Traits the tracker took off provider ``uuid`` as its own
        (traits a driver set itself and removed, a ``COMPUTE_STATUS_
        DISABLED`` it had set), until :meth:`synced`: Placement must lose
        them too.  The ledger keeps them as the tracker's until then, so a
        sync that fails (or a process that ends first) loses nothing: the
        next update releases them again."""
        return frozenset(self._left.released.get(uuid, ()))

    def synced(self, failed: set[str] | frozenset[str] = frozenset()) -> None:
        """A sync sent what the updates left, but for providers ``failed``
        (their reshapes and releases stay for the next sync): the traits
        it took off leave the ledger (saved under the state lock).

        Raises:
            LedgerError: the ledger could not be saved (the releases stay
                and are sent again).
        """
        self._left.moves = {root: m for root, m in self._left.moves.items()
                            if root in failed}
        confirmed = {u: t for u, t in self._left.released.items()
                     if u not in failed}
        if confirmed:
            with self._state_lock():
                ledger = self._ledger_file.read()
                self._ledger_file.save(ledger.updated({
                    uuid: ledger[uuid] - traits
                    for uuid, traits in confirmed.items()
                    if uuid in ledger and ledger[uuid] & traits}))
        self._left.released = {u: t for u, t in self._left.released.items()
                               if u in failed}

    @property
    def ledger(self) -> Ledger:
        """The ledger as last read or saved."""
        return self._ledger_file.ledger

    def manages(self, uuid: str) -> bool:
        """Whether this tracker saw its driver create or update provider
        ``uuid`` as a node's in this process — the proof of ownership no
        file can forge (a root, or a child with any uuid)."""
        return uuid in self._managed

    def update_available_resource(self, nodename: str) -> UpdateResult:
        """Update ``nodename``'s providers, settle traits, save the ledger.

        Raises:
            DriverError: from the driver (e.g. ``NodeNotFoundError``); the
                tree, the ledger and the driver's memory are unchanged.
            LedgerError: the ledger could not be read or saved; nothing
                changed.
            LockTimeout: another process held the state directory.
        """
        with self._state_lock(), self.tree.lock:
            ledger = self._ledger_file.read()
            applied = [self.provider_config.read_record()]
            self._status = self._status_file.read()
            start = self.tree.snapshot()
            token = self.driver.begin_update()
            changes: dict[str, frozenset[str] | None] = {}
            self._pending = Pending()
            try:
                with self.tree.savepoint() as savepoint:
                    result, managed, _ = self._update_node(
                        nodename, ledger, changes, applied, savepoint)
                self.provider_config.save_record(applied[0])
                self._ledger_file.save(ledger.updated(changes))
            except BaseException:
                self.tree.restore(start)
                self.driver.rollback_update(token)
                raise
            self.driver.commit_update(token)
            self._managed.update(managed)
            self._left.merge(self._pending)
        return result

    def update_all(self) -> dict[str, UpdateResult]:
        """Update every node of ``driver.get_available_nodes(refresh=True)``.

        Then remove the trees of roots this tracker can prove are its own
        (module doc, :meth:`_remove_gone`) whose name is no longer a node;
        each appears in the result under its root's name, its diff listing
        the deletions.  A node that fails is left unchanged and the others
        still update; the ledger is saved once at the end.

        Raises:
            UpdateAllError: some nodes failed (the others were updated).
            DriverError: the node list could not be read; nothing changed.
            LedgerError: the ledger could not be saved; nothing changed.
            LockTimeout: another process held the state directory.
        """
        results: dict[str, UpdateResult] = {}
        errors: dict[str, Exception] = {}
        cycle = Pending()
        with self._state_lock(), self.tree.lock:
            ledger = self._ledger_file.read()
            status = self._status_file.read()
            if status != self._status:   # disabled or enabled since
                self._marks = Marks()
            self._status = status
            applied = [self.provider_config.read_record()]
            start = self.tree.snapshot()
            outer = self.driver.begin_update()
            changes: dict[str, frozenset[str] | None] = {}
            managed: set[str] = set()
            marks: dict[str, NodeMark] = {}
            try:
                nodes = self.driver.get_available_nodes(refresh=True)
                config = self.provider_config.token()
                left = self._marks.current(self.tree)
                unchanged = fast_path.Unchanged(
                    self.driver, self.tree, ledger, applied[0]
                    if self.provider_config.enabled else None, config).check
                for nodename in nodes:
                    found = left.get(nodename)
                    if found is not None and unchanged(found, nodename):
                        results[nodename] = found.result
                        managed.update(found.ours)
                        marks[nodename] = found
                        continue
                    self._cycle_node(nodename, ledger, applied, config,
                                     results, errors, changes, managed,
                                     marks)
                    cycle.merge(self._pending)
                results.update(remove_gone(
                    self, set(nodes), ledger, managed, changes))
                self.provider_config.warn_unmatched(self.tree)
                self.provider_config.save_record(applied[0].without(
                    uuid for uuid, kept in changes.items()
                    if kept is None and not self.tree.exists(uuid)))
                self._ledger_file.save(ledger.updated(changes))
            except BaseException:
                self.tree.restore(start)
                self.driver.rollback_update(outer)
                raise
            self.driver.commit_update(outer)
            self._managed.update(managed)
            self._managed.difference_update(
                uuid for uuid, traits in changes.items() if traits is None)
            self._marks.replace(self.tree, marks)
            self._left.merge(cycle)
        if errors:
            unreachable = [exc for exc in errors.values()
                           if isinstance(exc, HypervisorUnavailable)]
            # Only the hypervisor failed: "not now" (exit 3), not bad input.
            raise UpdateAllError(results, errors) from (
                unreachable[0] if len(unreachable) == len(errors) else None)
        return results

    def _cycle_node(self, nodename: str, ledger: Ledger,
                    applied: list[AppliedRecord], config: object,
                    results: dict[str, UpdateResult],
                    errors: dict[str, Exception],
                    changes: dict[str, frozenset[str] | None],
                    managed: set[str], marks: dict[str, NodeMark]) -> None:
        """One node of :meth:`update_all` that the fast path did not skip:
        updated inside a savepoint and a driver transaction of its own
        (a failure is undone and recorded in ``errors``), then marked if
        it ended in a fixed point (:mod:`.fast_path`)."""
        record = applied[0] if self.provider_config.enabled else None
        stamp = fast_path.driver_stamp(self.driver, nodename)
        self._pending = Pending()
        inner = self.driver.begin_update()
        node_changes: dict[str, frozenset[str] | None] = {}
        node_applied = list(applied)
        savepoint = self.tree.savepoint()
        try:
            result, ours, quiet = self._update_node(
                nodename, ledger, node_changes, node_applied, savepoint)
        except Exception as exc:  # one node must not stop all
            savepoint.rollback()
            self.driver.rollback_update(inner)
            self._pending = Pending()
            LOG.warning("node %s not updated: %s", nodename, exc)
            errors[nodename] = exc
            return
        savepoint.release()
        self.driver.commit_update(inner)
        results[nodename] = result
        changes.update(node_changes)
        managed.update(ours)
        applied[0] = node_applied[0]
        # A mark only after a fixed point (module doc of .fast_path).
        if (quiet is not None and stamp is not None and not result.kept
                and self.provider_config.last_token() is config
                and fast_path.driver_stamp(self.driver, nodename) == stamp):
            marks[nodename] = fast_path.mark(
                nodename, stamp, self.tree, quiet, ours, ledger,
                node_changes, node_applied[0] if record is not None
                else None, config)

    # -- one node -------------------------------------------------------------

    def _state_lock(self):
        return exclusive_lock(
            self.lock_path, timeout=self._lock_timeout,
            purpose=f"the virtdriver state directory {self.state_dir}")

    def _update_node(self, nodename: str, ledger: Ledger,
                     changes: dict[str, frozenset[str] | None],
                     applied: list[AppliedRecord], savepoint: Savepoint
                     ) -> tuple[UpdateResult, set[str], str | None]:
        """Create the node's root if need be, run the driver (with the
        reshape round trip), settle the node, apply the tracker's root
        traits and the provider config files; record ledger changes, the
        applied record (``applied[0]``, replaced), traits released and
        reshape moves (in :attr:`_pending`).

        ``savepoint`` was taken just before: its ``before`` view is the
        tree as the update found it.  Returns the result, the uuids of the
        node's own providers, and the node's root uuid if the update was
        quiet — nothing logged: no settlement note, no drift, the provider
        config files changed nothing — else ``None``.  The caller holds
        the locks and undoes everything on error.
        """
        start = savepoint.before
        owned = self.driver.ownership_for(nodename)
        def known(name: str) -> str | None:
            uuid = self.known_roots.get(name)
            return uuid if uuid in ledger else None   # managed by us

        prepare_root(self.tree, self.driver, nodename, known(nodename))
        with stable_roots(self.tree, self.driver, known):
            trip = run_driver(
                self.driver, self.tree, nodename,
                lambda: self._providers_of(start, nodename),
                self.allocations)
        root = self._root_name(nodename)
        # Per node, never the union over nodes: a trait one node manages
        # is foreign on the others.
        again = self.driver.ownership_for(nodename)
        if owned is None or again is None:
            owned = again if owned is None else owned
        elif again is not owned:
            owned = owned.union(again)
        report = (self.driver.node_capabilities(nodename).traits
                  if owned is not None else None)
        answered = frozenset(report.results) if report is not None else None
        before = records(start, root)
        after_uuids = self.tree.get_provider_uuids_in_tree(root)
        root_uuid = after_uuids[0]
        disabled = nodename in self._status or root in self._status
        removed_by, added_by = {}, {}
        ours: set[str] = set()
        quiet = trip is None
        for uuid in after_uuids:
            record = self.tree.record(uuid)
            existed = start.exists(uuid)
            mine = (uuid == root_uuid or not existed or uuid in self._managed
                    or is_derived_child(uuid, record.name,
                                        record.parent_uuid))
            done, tracker_part = settle_provider(
                uuid, record, start if existed else None, mine=mine,
                owned=owned, ledger=ledger, answered=answered,
                disabled=disabled, is_root=uuid == root_uuid,
                released=self._pending.released,
                unconfirmed=frozenset(self._left.released.get(uuid, ())))
            final = record.traits
            if done.traits != final:
                self.tree.update_traits(uuid, done.traits)
                final = done.traits
            if log_settlement(record, done):
                quiet = False
            if mine:
                ours.add(uuid)
                removed_by[record.name] = done.removed_by_others
                added_by[record.name] = done.added_by_others
                kept = done.ledger | tracker_part if tracker_part \
                    else done.ledger
                # One set object for the ledger and the tree when equal.
                changes[uuid] = final if kept == final else kept
            elif uuid in ledger:
                changes[uuid] = None
        applied[0], config_quiet = self.provider_config.apply(
            self.tree, root_uuid, after_uuids,
            (owned or _NOTHING).union(_TRACKER), applied[0])
        for record in before:
            if not self.tree.exists(record.uuid):
                changes[record.uuid] = None
        if trip is not None:   # checked even when nothing moved
            moved = reshape_moves(nodename, root_uuid, *trip)
            if moved.moved:
                self._pending.moves[root_uuid] = moved
        after = [self.tree.record(uuid) for uuid in after_uuids]
        drifted = any(removed_by.values()) or any(added_by.values())
        result = UpdateResult(nodename, diff(Records(before),
                                             Records(after)),
                              Drift(removed_by, added_by) if drifted
                              else NO_DRIFT)
        for line in result.drift.describe():
            LOG.warning("node %s: drift on owned traits: %s", nodename, line)
        quiet = quiet and config_quiet and result.drift.empty
        return result, ours, root_uuid if quiet else None

    def _providers_of(self, start: TreeReader, nodename: str) -> list[str]:
        """The node's provider uuids, in the tree as the update found it
        and now (for the reshape's allocations)."""
        found: dict[str, None] = {}
        for reader in (start, self.tree):
            if reader.exists(nodename):
                found.update(dict.fromkeys(
                    reader.get_provider_uuids_in_tree(nodename)))
        return list(found)

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
