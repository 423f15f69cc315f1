"""One provider of a node after its driver's update: the driver's part
settled, then the tracker's own traits on the root.

The driver's part follows its declared ownership
(:func:`~.reconcile.settle`) or, when it declares none, what it provably
set itself (:func:`~.reconcile.settle_self_set`); the root then gets
``COMPUTE_NODE`` and, for a disabled node, ``COMPUTE_STATUS_DISABLED``
(:mod:`.node_root`).  Traits the tracker takes off as its own are added
to ``released`` (Placement must lose them too) and stay recorded in the
ledger as the tracker's until a sync confirms them gone
(:meth:`~.tracker.ResourceTracker.synced`): a failed sync, or a process
that ends first, cannot make them someone else's.
"""

from __future__ import annotations

import dataclasses

from virtdriver.capabilities.traits.ownership import Ownership
from virtdriver.providers.record import ProviderData
from virtdriver.resource_tracker.ledger import Ledger
from virtdriver.resource_tracker.node_root import TRACKER_TRAITS, root_traits
from virtdriver.resource_tracker.reconcile import (
    Settlement, settle, settle_self_set)
from virtdriver.resource_tracker.snapshot import TreeReader

_NOTHING = Ownership(frozenset())
_EMPTY: frozenset[str] = frozenset()


def settle_provider(uuid: str, record: ProviderData,
                    start: TreeReader | None, *, mine: bool,
                    owned: Ownership | None, ledger: Ledger,
                    answered: frozenset[str] | None, disabled: bool,
                    is_root: bool, released: dict[str, set[str]],
                    unconfirmed: frozenset[str] = _EMPTY
                    ) -> tuple[Settlement, frozenset[str]]:
    """Settle provider ``uuid`` (``record`` as the driver left it;
    ``start`` the tree before the update, ``None`` if it lacked the
    provider); ``unconfirmed``: traits released by an earlier update no
    sync has confirmed yet.  Returns the settlement and the traits to
    record in the ledger beside it (the tracker's own, and released ones
    not yet confirmed)."""
    if not mine:   # someone else's provider: left as it was
        return settle(start.record(uuid).traits if start else (),
                      record.traits, ownership=_NOTHING, ledger=None,
                      answered=answered), _EMPTY
    proven = ledger.proven(uuid)
    if owned is None:
        entry = proven - TRACKER_TRAITS if proven is not None else None
        # A provider new to this tree (a new process) starts from what
        # the driver provably set: what it sets no more is released.
        baseline = (start.record(uuid).traits if start is not None
                    else entry or ())
        done = settle_self_set(baseline, record.traits, ledger=entry)
        waiting = (entry or _EMPTY) & unconfirmed - done.traits
        if done.stale or waiting:
            released.setdefault(uuid, set()).update(done.stale | waiting)
            # Still the driver's until a sync confirmed them gone.
            done = dataclasses.replace(
                done, ledger=done.ledger | done.stale | waiting,
                removed_by_others=done.removed_by_others - waiting)
    else:
        entry = ledger.get(uuid) if start is not None else None
        if is_root and entry:   # the tracker's, unless the driver's
            entry = entry - {t for t in TRACKER_TRAITS
                             if not owned.owns(t)}
        done = settle(start.record(uuid).traits if start else (),
                      record.traits, ownership=owned, ledger=entry,
                      answered=answered)
    if not is_root:
        return done, _EMPTY
    traits, tracker_part, gone = root_traits(
        done.traits, disabled=disabled, proven=proven)
    if gone:   # recorded until a sync confirms it gone
        released.setdefault(uuid, set()).update(gone)
        tracker_part = tracker_part | gone
    if traits != done.traits:
        done = dataclasses.replace(done, traits=traits)
    return done, tracker_part
