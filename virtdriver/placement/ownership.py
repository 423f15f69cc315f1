"""The sync's ``owned_for`` callable, from a resource tracker.

:class:`TrackerOwnership` answers, per provider uuid, what the provider's
node owns — the same proof the tracker uses (``docs/resource-tracker.md``):

* a provider the tracker saw its driver create or update as a node's in
  this process (:meth:`ResourceTracker.manages`: a root, or a child with
  any uuid) is that node's;
* so is a root whose name is one of the driver's nodes (or whose uuid the
  driver derives for its name, :meth:`ComputeDriver.recognizes_root`),
  owned by ``driver.ownership_for(node)``;
* and a child whose uuid is derived from its parent's and its name
  (:func:`~virtdriver.drivers.identity.is_derived_child`), if its parent
  is the node's;
* anything else in the tree is someone else's: ``None``, never written;
* a provider the tracker *removed* (its update results' diffs list it as
  deleted) stays vouched for until a sync has deleted it, so gone nodes
  leave Placement too — nothing else outside the tree is vouched for.

A node whose driver declares no ownership owns, on each provider, what
the tracker's ledger provably records it set (and, on the root, the
tracker's own ``COMPUTE_NODE`` and a ``COMPUTE_STATUS_DISABLED`` it set);
the traits the tracker took off as its own are owned until a sync
confirmed them gone (:meth:`ResourceTracker.released`).

Traits the tracker removed are owned until a sync confirmed them gone —
a driver may stop owning a name once it stopped setting it (the ironic
driver forgets an inspection trait the data no longer names), yet
Placement must still lose it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import os_traits

from virtdriver.capabilities.traits.ownership import Ownership
from virtdriver.drivers.base import DriverError
from virtdriver.drivers.identity import is_derived_child
from virtdriver.placement.result import SyncResult
from virtdriver.resource_tracker.tracker import ResourceTracker, UpdateResult


#: A node whose driver declares no ownership (a marker, never returned).
_UNDECLARED = Ownership(frozenset({"virtdriver:undeclared"}))


class TrackerOwnership:
    """``owned_for`` for :func:`~virtdriver.placement.sync.sync` over a
    tracker's tree.

    Call :meth:`note` with each update's results, pass :attr:`gone` as the
    sync's ``remove``, and :meth:`synced` with the sync's result.
    """

    def __init__(self, tracker: ResourceTracker) -> None:
        self.tracker = tracker
        self._removed: dict[str, set[str]] = {}
        self._gone: set[str] = set()
        self._cache: dict[str, Ownership | None] = {}
        self._nodes: frozenset[str] | None = None

    def note(self, results: UpdateResult | Mapping[str, UpdateResult]
             | Iterable[UpdateResult]) -> None:
        """Remember what the tracker's update removed (traits, providers)
        until a sync confirms it in Placement."""
        if isinstance(results, UpdateResult):
            results = [results]
        elif isinstance(results, Mapping):
            results = results.values()
        for result in results:
            for change in result.diff:
                if change.deleted:
                    self._gone.add(change.uuid)
                    self._removed.pop(change.uuid, None)
                elif change.traits_removed:
                    self._removed.setdefault(change.uuid, set()).update(
                        change.traits_removed)
        self._cache.clear()
        self._nodes = None

    @property
    def gone(self) -> tuple[str, ...]:
        """Providers the tracker removed that a sync has not deleted yet."""
        return tuple(sorted(self._gone))

    def synced(self, result: SyncResult) -> None:
        """Forget what ``result`` settled: traits of providers that synced
        without error, providers deleted or already gone."""
        if result.pending or result.reason is not None:
            return
        failed = {o.uuid for o in result.errors}
        for uuid in list(self._removed):
            if uuid not in failed:
                del self._removed[uuid]
        self.tracker.provider_config.forget_released(exclude=failed)
        if not result.dry_run:
            self.tracker.synced(failed)
        kept = {o.uuid for o in result.kept}
        self._gone &= kept
        self._cache.clear()
        self._nodes = None

    def __call__(self, uuid: str) -> Ownership | None:
        if uuid not in self._cache:
            owned = self._node_ownership(uuid)
            if owned is _UNDECLARED:   # what the ledger proves it set
                owned = Ownership(self.tracker.ledger.proven(uuid)
                                  or frozenset())
            if owned is not None:
                owned = self._with_tracker_traits(uuid, owned)
            removed = set(self._removed.get(uuid, ()))
            removed |= self.tracker.released(uuid)
            # The operators' provider config traits the tracker applied
            # are the tracker's to write (and, once deleted from the
            # files, to remove: the diff's removals above).
            removed |= self.tracker.provider_config.applied_traits(uuid)
            removed |= self.tracker.provider_config.released_traits(uuid)
            if owned is not None and removed:
                owned = owned.union(Ownership(frozenset(removed)))
            self._cache[uuid] = owned
        return self._cache[uuid]

    def _with_tracker_traits(self, uuid: str, owned: Ownership
                             ) -> Ownership:
        """On a node's root, the tracker's own traits: ``COMPUTE_NODE``,
        and ``COMPUTE_STATUS_DISABLED`` where the ledger proves the
        tracker set it."""
        tree = self.tracker.tree
        if not tree.exists(uuid) or tree.record(uuid).parent_uuid is not None:
            return owned
        extra = {os_traits.COMPUTE_NODE}
        if os_traits.COMPUTE_STATUS_DISABLED in (
                self.tracker.ledger.proven(uuid) or ()):
            extra.add(os_traits.COMPUTE_STATUS_DISABLED)
        return owned.union(Ownership(frozenset(extra)))

    def vouches_for_gone(self, uuid: str, name: str,
                         parent_uuid: str | None,
                         root_uuid: str | None = None) -> bool:
        """Whether a provider gone from the tree, as Placement lists it
        (``name``, ``parent_uuid``), is provably the driver's: a child
        whose uuid is derived from its parent's and its name, or a root
        the driver recognises (its derived uuid) and no longer has as a
        node.  Given ``root_uuid``, a child derived from its root and
        name (a device provider under a NUMA cell) is provably ours too.
        The sync asks only for providers Placement lists, so no state
        file supplies these facts."""
        if parent_uuid is not None:
            return is_derived_child(uuid, name, parent_uuid, root_uuid)
        driver = self.tracker.driver
        try:
            nodes = frozenset(driver.get_available_nodes())
        except DriverError:
            return False
        return name not in nodes and driver.recognizes_root(name, uuid)

    def _node_ownership(self, uuid: str) -> Ownership | None:
        """The ownership of the node ``uuid`` belongs to, or ``None``."""
        tree, driver = self.tracker.tree, self.tracker.driver
        if not tree.exists(uuid):
            if uuid not in self._gone:
                return None
            return driver.ownership or Ownership()
        record = tree.record(uuid)
        managed = self.tracker.manages(uuid)
        if record.parent_uuid is not None:
            if not (managed or is_derived_child(uuid, record.name,
                                                record.parent_uuid,
                                                record.root_uuid)):
                return None
            return self._node_ownership(record.parent_uuid)
        try:
            if self._nodes is None:
                self._nodes = frozenset(driver.get_available_nodes())
            if not managed and record.name not in self._nodes and not \
                    driver.recognizes_root(record.name, uuid):
                return None
            owned = driver.ownership_for(record.name)
        except DriverError:
            return None
        return _UNDECLARED if owned is None else owned
