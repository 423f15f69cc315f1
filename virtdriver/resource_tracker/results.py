"""What an update returns, and how the tracker logs what it did.

:class:`UpdateResult` per node, :class:`UpdateAllError` when some nodes
failed; the small helpers the tracker uses to diff one node's providers
and to log its settlements.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from virtdriver.drivers.base import DriverError
from virtdriver.providers.record import ProviderData
from virtdriver.resource_tracker.reconcile import Drift, Settlement
from virtdriver.resource_tracker.snapshot import TreeReader, TreeSnapshot
from virtdriver.resource_tracker.tree_diff import TreeDiff

LOG = logging.getLogger("virtdriver.resource_tracker.tracker")


#: The ``kept`` of a result that kept nothing (shared: it is read only).
NOTHING_KEPT: Mapping[str, str] = MappingProxyType({})


@dataclass(frozen=True)
class UpdateResult:
    """What one node's update changed.

    Attributes:
        nodename: the node.
        diff: the changes to the node's providers (what sync must send).
        drift: owned traits others changed since the last update.
        kept: why providers that looked gone were not removed (provider
            label → reason); see ``docs/resource-tracker.md``.
    """

    nodename: str
    diff: TreeDiff
    drift: Drift
    kept: Mapping[str, str] = field(default_factory=lambda: NOTHING_KEPT)


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


class Records:
    """A list of records posing as a tree for :func:`diff` (which reads
    only ``snapshot().providers()``), so a node's diff costs its own
    providers, not the whole tree's."""

    def __init__(self, records: Iterable[ProviderData]) -> None:
        self._records = list(records)

    def snapshot(self) -> Records:
        return self

    def providers(self) -> list[ProviderData]:
        return self._records


def records(reader: TreeReader | TreeSnapshot, root: str
             ) -> list[ProviderData]:
    """The records of the tree ``root`` names in ``reader`` (parents
    first), or none if it has no such provider."""
    if not reader.exists(root):
        return []
    return [reader.record(uuid)
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
     "driver does not own on this node; ignored (tampered or stale ledger) "
     "and dropped from it"),
)


def log_settlement(record: ProviderData, done: Settlement) -> bool:
    """Log each of :data:`_NOTES` that applies to ``done``; return
    whether any did."""
    logged = False
    for name, level, message in _NOTES:
        traits = getattr(done, name)
        if traits:
            LOG.log(level, message, record.label, ", ".join(sorted(traits)))
            logged = True
    return logged
