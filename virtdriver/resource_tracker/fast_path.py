"""The tracker's fast path: a node whose inputs are as it left them.

After updating a node the tracker may leave a :class:`NodeMark`: every
input of that node's update, as they were when the update ended.  In
the next cycle, if each input still compares equal, running the update
again would change nothing and log nothing, so the tracker skips it and
returns the mark's empty :class:`~.results.UpdateResult`.  The inputs:

* ``driver.node_stamp(nodename)`` — the driver's own promise about what
  it would write and report for the node (``None``: no promise, no mark);
* ``tree.subtree_stamp(root)`` — the node's providers exactly as the
  tracker left them, generations included (any write by anyone, a
  provider added or removed under the root, changes it);
* the ledger's entry for each of the node's providers (a ledger another
  process saved is compared entry by entry, not trusted);
* the provider config: the loaded files (the same object until the
  directory changes) and the applied record's entry for each provider.

A mark is left only after an update that ended in a fixed point: the
driver's stamp was the same before and after it, no settlement note or
drift was logged, and the provider config files changed nothing (tree or
record).  ``docs/resource-tracker.md`` ("The fast path") argues why the
next update would then be a no-op.  Marks are made per cycle and kept
only when the cycle commits.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from virtdriver.drivers.base import ComputeDriver
from virtdriver.provider_config import AppliedRecord
from virtdriver.provider_config.record import ProviderRecord
from virtdriver.resource_tracker.ledger import Ledger
from virtdriver.resource_tracker.provider_tree import ProviderTree
from virtdriver.resource_tracker.reconcile import NO_DRIFT
from virtdriver.resource_tracker.results import NOTHING_KEPT, UpdateResult
from virtdriver.resource_tracker.tree_diff import TreeDiff

_NO_DIFF = TreeDiff()


@dataclass(frozen=True, slots=True)
class NodeMark:
    """A node's update inputs as the tracker left them.

    Attributes:
        driver: ``driver.node_stamp(nodename)`` (never ``None``).
        root: the node's root provider uuid.
        tree: ``tree.subtree_stamp(root)``.
        uuids: the node's providers, root first.
        ledger: the ledger entry of each of ``uuids`` (``None``: none).
        applied: the applied record's entry of each of ``uuids``, or
            ``None`` when no provider config directory is configured.
        config: the provider config token (:meth:`ProviderConfigStep.
            token`) the update ran with.
        ours: the node's own providers (what ``_update_node`` returned;
            ``uuids`` itself when they are all its own).
        result: the empty result a skipped update returns.
    """

    driver: object
    root: str
    tree: int
    uuids: tuple[str, ...]
    ledger: tuple[frozenset[str] | None, ...]
    applied: tuple[ProviderRecord, ...] | None
    config: object
    ours: tuple[str, ...] | frozenset[str]
    result: UpdateResult


def mark(nodename: str, stamp: object, tree: ProviderTree, root: str,
         ours: Iterable[str], ledger: Ledger,
         changes: dict[str, frozenset[str] | None],
         applied: AppliedRecord | None, config: object) -> NodeMark:
    """The mark of a node just updated: ``changes`` are its ledger
    changes, not yet in ``ledger``; ``applied`` the record after it."""
    uuids = tuple(tree.get_provider_uuids(root))
    ours = frozenset(ours)
    return NodeMark(
        driver=stamp, root=root, tree=tree.subtree_stamp(root), uuids=uuids,
        ledger=tuple(changes[uuid] if uuid in changes else ledger.entry(uuid)
                     for uuid in uuids),
        applied=(None if applied is None
                 else tuple(applied.provider(uuid) for uuid in uuids)),
        config=config, ours=uuids if ours == frozenset(uuids) else ours,
        result=UpdateResult(nodename, _NO_DIFF, NO_DRIFT, NOTHING_KEPT))


def driver_stamp(driver: ComputeDriver, nodename: str) -> object | None:
    """``driver.node_stamp(nodename)``; ``None`` (do the full update,
    which reports what is wrong) if it raises."""
    try:
        return driver.node_stamp(nodename)
    except Exception:  # noqa: BLE001 - any doubt: no fast path
        return None


class Unchanged:
    """The fast path's test for one cycle: ``check(mark, nodename)`` says
    whether every input in ``mark`` is still what it was (cheapest
    comparisons first; any doubt answers ``False``).  The cycle's inputs
    are bound once, for the test runs for every node.

    Args:
        driver, tree, ledger: the tracker's, as the cycle read them.
        applied: the applied record (``None``: no provider config).
        config: :meth:`ProviderConfigStep.token` at the cycle's start.
    """

    def __init__(self, driver: ComputeDriver, tree: ProviderTree,
                 ledger: Ledger, applied: AppliedRecord | None,
                 config: object) -> None:
        self._node_stamp = driver.node_stamp
        self._tree_stamp = tree.subtree_stamp
        self._entry = ledger.entry
        self._applied = applied
        self._config = config

    def check(self, found: NodeMark, nodename: str) -> bool:
        """Whether the node ``found`` marks may be skipped."""
        if (found.config is not self._config or self._config is None
                or self._tree_stamp(found.root) != found.tree):
            return False
        try:
            stamp = self._node_stamp(nodename)
        except Exception:  # noqa: BLE001 - any doubt: no fast path
            return False
        if stamp is None or stamp != found.driver:
            return False
        uuids, entry = found.uuids, self._entry
        if len(uuids) == 1:
            if entry(uuids[0]) != found.ledger[0]:
                return False
        elif any(entry(uuid) != recorded
                 for uuid, recorded in zip(uuids, found.ledger, strict=True)):
            return False
        applied = self._applied
        if applied is None or found.applied is None:
            return applied is None and found.applied is None
        return all(applied.provider(uuid) == recorded
                   for uuid, recorded in zip(uuids, found.applied,
                                             strict=True))


class Marks:
    """The marks of one tracker: nodename → :class:`NodeMark`, for one
    tree object (stamps mean nothing in another tree)."""

    def __init__(self) -> None:
        self._tree: ProviderTree | None = None
        self._marks: dict[str, NodeMark] = {}

    def current(self, tree: ProviderTree) -> dict[str, NodeMark]:
        """The marks (read only), none if ``tree`` is not the tree they
        were made in."""
        return self._marks if tree is self._tree else {}

    def replace(self, tree: ProviderTree, marks: dict[str, NodeMark]
                ) -> None:
        """Keep ``marks`` (a committed cycle's) instead."""
        self._tree, self._marks = tree, marks

