"""The resource tracker: asks the driver, keeps owned traits true.

One :class:`ResourceTracker` per driver.  Each update is one transaction
over the tree, the ledger and the driver's own memory, under the state
directory's OS file lock (:mod:`virtdriver.filelock`) and the tree's lock:

1. re-read the ledger if another process changed it; snapshot the tree
   (O(1)) and take a savepoint for the node (its baseline; a failed node
   is rolled back in O(its writes)); open a driver transaction
   (:meth:`ComputeDriver.begin_update`);
2. let the driver update the node's providers — it applies its own trait
   report (owned traits follow it, unknown ones stay, others untouched);
3. settle each provider *of the node* with :func:`~.reconcile.settle`
   against ``driver.ownership_for(node)`` — the ledger is trusted only
   inside that node's ownership; a provider someone else put under the
   node's root (not derived from its parent and name, not created by this
   driver) is foreign as a whole and left as it was;
4. save the ledger atomically, then commit the driver's transaction.

If anything fails the tree is put back exactly (generations included,
:meth:`ProviderTree.restore`), the driver's memory is rolled back, the
ledger file is not written, and the error propagates: a retry does what
the failed attempt would have done.

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
from typing import Any

from virtdriver.capabilities.traits.ownership import Ownership
from virtdriver.claims.model import Instance
from virtdriver.claims.rebuild import ProviderInfo
from virtdriver.claims.usage import HostUsage, InstanceFit
from virtdriver.drivers.base import ComputeDriver, DriverError
from virtdriver.drivers.identity import is_derived_child
from virtdriver.filelock import DEFAULT_TIMEOUT, exclusive_lock
from virtdriver.provider_config import AppliedRecord
from virtdriver.resource_tracker.claims_file import ClaimsFile
from virtdriver.resource_tracker.instance_claims import (
    all_claims, check_rebuild_claim, claim_instance, provider_usages,
    release_instance)
from virtdriver.resource_tracker.ledger import Ledger, LedgerFile
from virtdriver.providers.record import ProviderData
from virtdriver.resource_tracker.provider_config_step import (
    ProviderConfigStep)
from virtdriver.resource_tracker import fast_path
from virtdriver.resource_tracker.fast_path import Marks, NodeMark
from virtdriver.resource_tracker.provider_tree import ProviderTree, Savepoint
from virtdriver.resource_tracker.reconcile import NO_DRIFT, Drift, settle
from virtdriver.resource_tracker.results import (
    Records, UpdateAllError, UpdateResult, log_settlement, records)
from virtdriver.resource_tracker.tree_diff import TreeDiff, diff

LOG = logging.getLogger(__name__)

__all__ = ["Drift", "ResourceTracker", "UpdateAllError", "UpdateResult"]


_NOTHING = Ownership(frozenset())
#: The lock file in a state directory: one per directory, every state file
#: in it (ledger, and later claims and sync state) is read and written
#: under it.
LOCK_FILE = "virtdriver.lock"


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

    Raises:
        LedgerError: the ledger file exists but cannot be read.
        LockTimeout, LockError: the state directory's lock.
    """

    def __init__(self, driver: ComputeDriver, *, state_dir: pathlib.Path,
                 tree: ProviderTree | None = None,
                 driver_name: str | None = None,
                 lock_timeout: float = DEFAULT_TIMEOUT,
                 provider_config: pathlib.Path | str | None = None) -> None:
        self.driver = driver
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
        with self._state_lock():
            self._ledger_file.read()

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
            start = self.tree.snapshot()
            token = self.driver.begin_update()
            changes: dict[str, frozenset[str] | None] = {}
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
        with self._state_lock(), self.tree.lock:
            ledger = self._ledger_file.read()
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
                results.update(self._remove_gone(
                    set(nodes), ledger, managed, changes))
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
        if errors:
            raise UpdateAllError(results, errors)
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

    # -- instance claims ------------------------------------------------------

    def instance_claim(self, instance: Instance, nodename: str, *,
                       allocations: Mapping[str, Mapping[str, int]]
                       | None = None,
                       aliases: Mapping[str, Any] | None = None
                       ) -> InstanceFit:
        """Fit ``instance`` onto ``nodename``'s NUMA cells and record it.

        With ``allocations`` (the scheduler's, ``{provider uuid: {resource
        class: amount}}``) it is pinned within exactly the cells they name,
        or refused (:class:`~virtdriver.claims.allocation.
        AllocationRefused`) changing nothing.

        Serialised with every other claim, release and update on the state
        directory (threads and processes alike), so claims never
        overcommit; persisted before it returns.  See ``docs/claims.md``.

        Raises:
            InvalidRequest: the flavor and image make no valid request.
            DoesNotFit: nothing fits; which cell lacked what.
            ClaimError: already claimed, no NUMA host, bad claims file.
            LockTimeout: another process held the state directory.
        """
        with self._state_lock(), self.tree.lock:
            return claim_instance(self.driver, self._claims_file, instance,
                                  nodename, allocations=allocations,
                                  tree=self.tree, aliases=aliases)

    def release(self, instance_uuid: str) -> str:
        """Free exactly what ``instance_uuid`` claimed; return its node.

        Raises:
            UnknownClaim: it holds no claim here.
        """
        with self._state_lock(), self.tree.lock:
            return release_instance(self.driver, self._claims_file,
                                    instance_uuid)

    def claims(self) -> dict[str, HostUsage]:
        """nodename → the claims held on it (as persisted)."""
        with self._state_lock():
            return all_claims(self.driver, self._claims_file)

    def usages(self) -> dict[str, Mapping[str, int]]:
        """Provider uuid → resource class → amount claims use."""
        with self._state_lock(), self.tree.lock:
            return provider_usages(self.driver, self._claims_file,
                                   self.tree)

    def rebuild_claim(self, instance: Instance,
                      new_image_properties: Mapping[str, object], *,
                      sharing: Mapping[str, ProviderInfo] | None = None,
                      disk_format: str | None = None) -> None:
        """The no-op rebuild claim: consumes and changes nothing.

        Returns when ``instance`` may be rebuilt with the new image; else
        raises :class:`~virtdriver.claims.rebuild.RebuildRefused` carrying
        every reason (NUMA constraints or consumption that would change,
        image traits its allocated providers lack or forbid — explicit
        ``trait:`` properties and those its properties and ``disk_format``
        imply, docs/claims.md).  Traits come from this tree for allocated
        providers in it, from ``sharing`` for providers outside it.
        """
        check_rebuild_claim(instance, new_image_properties,
                            self.tree.snapshot(), sharing,
                            disk_format=disk_format)

    # -- one node -------------------------------------------------------------

    def _state_lock(self):
        return exclusive_lock(
            self.lock_path, timeout=self._lock_timeout,
            purpose=f"the virtdriver state directory {self.state_dir}")

    def _update_node(self, nodename: str, ledger: Ledger,
                     changes: dict[str, frozenset[str] | None],
                     applied: list[AppliedRecord], savepoint: Savepoint
                     ) -> tuple[UpdateResult, set[str], str | None]:
        """Run the driver, settle the node, apply the provider config
        files; record ledger changes and the applied record
        (``applied[0]``, replaced).

        ``savepoint`` was taken just before: its ``before`` view is the
        tree as the update found it.  Returns the result, the uuids of the
        node's own providers, and the node's root uuid if the update was
        quiet — nothing logged: no settlement note, no drift, the provider
        config files changed nothing — else ``None``.  The caller holds
        the locks and undoes everything on error.
        """
        start = savepoint.before
        owned = self.driver.ownership_for(nodename)
        self.driver.update_provider_tree(self.tree, nodename)
        root = self._root_name(nodename)
        # Per node, never the union over nodes: a trait one node manages
        # is foreign on the others.
        again = self.driver.ownership_for(nodename)
        if again is not owned:
            owned = owned.union(again)
        report = self.driver.node_capabilities(nodename).traits
        answered = frozenset(report.results) if report is not None else None
        before = records(start, root)
        after_uuids = self.tree.get_provider_uuids_in_tree(root)
        root_uuid = after_uuids[0]
        removed_by, added_by = {}, {}
        ours: set[str] = set()
        quiet = True
        for uuid in after_uuids:
            record = self.tree.record(uuid)
            existed = start.exists(uuid)
            mine = (uuid == root_uuid or not existed or uuid in self._managed
                    or is_derived_child(uuid, record.name,
                                        record.parent_uuid,
                                        record.root_uuid))
            # A provider created now has no baseline: no drift for it.  A
            # foreign one is settled with no ownership: left as it was.
            done = settle(
                start.record(uuid).traits if existed else (), record.traits,
                ownership=owned if mine else _NOTHING,
                ledger=ledger.get(uuid) if existed and mine else None,
                answered=answered)
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
                # One set object for the ledger and the tree when equal.
                changes[uuid] = final if done.ledger == final else done.ledger
            elif uuid in ledger:
                changes[uuid] = None
        applied[0], config_quiet = self.provider_config.apply(
            self.tree, root_uuid, after_uuids, owned, applied[0])
        for record in before:
            if not self.tree.exists(record.uuid):
                changes[record.uuid] = None
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

    def _remove_gone(self, nodes: set[str], ledger: Ledger,
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
        for root in self.tree.roots:
            if (root.name in nodes or root.uuid in updated
                    or root.uuid not in ledger):
                continue
            gone = records(self.tree, root.uuid)
            reason = self._why_not_ours(root, gone)
            if reason is not None:
                LOG.warning("%s is not a node any more but %s; not removed "
                            "(remove it by hand if it is stale)",
                            root.label, reason)
                results[root.name] = UpdateResult(
                    root.name, TreeDiff(), Drift(), {root.label: reason})
                continue
            self.tree.remove(root.uuid)
            changes.update((record.uuid, None) for record in gone)
            LOG.info("node %s is gone: removed its %d provider(s)",
                     root.name, len(gone))
            results[root.name] = UpdateResult(
                root.name, diff(Records(gone), Records([])), Drift())
        return results

    def _why_not_ours(self, root: ProviderData,
                      tree: list[ProviderData]) -> str | None:
        """``None`` if ``root``'s tree is provably ours, else why not."""
        if not (root.uuid in self._managed
                or self.driver.recognizes_root(root.name, root.uuid)):
            return ("only the ledger lists it: this driver did not create "
                    "it in this process and its uuid is not the one the "
                    "driver derives for that name")
        foreign = [record.label for record in tree[1:]
                   if record.uuid not in self._managed
                   and not is_derived_child(record.uuid, record.name,
                                            record.parent_uuid,
                                            record.root_uuid)]
        if foreign:
            return ("providers under it are someone else's: "
                    + ", ".join(foreign))
        return None
