"""One provider of a node after its driver's update: the driver's part
settled, then the tracker's own traits on the root.

The driver's part follows its declared ownership
(:func:`~.reconcile.settle`) or, when it declares none, what it provably
set itself (:func:`~.reconcile.settle_self_set`); the root then gets
``COMPUTE_NODE`` and, for a disabled node, ``COMPUTE_STATUS_DISABLED``
(:mod:`.node_root`).  Traits the tracker takes off as its own are added
to ``released`` (Placement must lose them too).
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
                    is_root: bool, released: dict[str, set[str]]
                    ) -> tuple[Settlement, frozenset[str]]:
    """Settle provider ``uuid`` (``record`` as the driver left it;
    ``start`` the tree before the update, ``None`` if it lacked the
    provider).  Returns the settlement and the tracker's traits to record
    in the ledger."""
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
        if done.stale:
            released.setdefault(uuid, set()).update(done.stale)
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
    if gone:
        released.setdefault(uuid, set()).update(gone)
    if traits != done.traits:
        done = dataclasses.replace(done, traits=traits)
    return done, tracker_part
