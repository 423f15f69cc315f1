"""The compute-node root, as Nova's resource tracker keeps it.

Before the driver's ``update_provider_tree`` the tracker creates the
node's root when the tree lacks it — named after the node, with the
driver's stable uuid (:meth:`ComputeDriver.root_uuid_for`) — so a driver
written as Nova's are (which never creates its root) runs unchanged, and
while the driver runs a ``new_root(name)`` without a uuid gets the same
stable uuid, never a random one (a second sync then finds its own root).
A node whose root an earlier sync made with another uuid (a driver that
gave a random one, before) keeps that root: the caller passes the sync
state's roots (``known_roots``), adopted only if the ledger lists them too
(the tracker managed them), so a second sync never refuses its own root
as "not ours".

After the driver, the tracker's own traits go on the root: always
``COMPUTE_NODE`` (every compute node has it, as in Nova), and
``COMPUTE_STATUS_DISABLED`` while an operator disabled the node
(:mod:`.node_status`).  It takes ``COMPUTE_STATUS_DISABLED`` off only if
its ledger proves it put it there: Nova or an operator may have set it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator

import os_traits

from virtdriver.drivers.base import ComputeDriver
from virtdriver.resource_tracker.provider_tree import ProviderTree

#: The traits the tracker itself sets on a node's root.
TRACKER_TRAITS = frozenset({os_traits.COMPUTE_NODE,
                            os_traits.COMPUTE_STATUS_DISABLED})


def root_uuid(driver: ComputeDriver, nodename: str,
              known: str | None = None) -> str | None:
    """The uuid ``nodename``'s root gets from the tracker: ``known`` (the
    root a sync already made for the node, which the caller proved is
    ours), else the driver's stable one; ``None`` when the driver
    creates its roots itself."""
    uuid = driver.root_uuid_for(nodename)
    return known if uuid is not None and known else uuid


def prepare_root(tree: ProviderTree, driver: ComputeDriver,
                 nodename: str, known: str | None = None) -> bool:
    """Create ``nodename``'s root if the tree lacks it and the driver
    gives it a uuid; return whether it was created."""
    if tree.exists(nodename):
        return False
    uuid = root_uuid(driver, nodename, known)
    if uuid is None or tree.exists(uuid):
        return False
    tree.new_root(nodename, uuid)
    return True


@contextlib.contextmanager
def stable_roots(tree: ProviderTree, driver: ComputeDriver,
                 known: Callable[[str], str | None]) -> Iterator[None]:
    """While the driver runs, ``tree.new_root(name)`` without a uuid gets
    :func:`root_uuid` (random only if the driver has none)."""
    previous = tree.root_uuids
    tree.root_uuids = lambda name: root_uuid(driver, name, known(name))
    try:
        yield
    finally:
        tree.root_uuids = previous


def root_traits(current: frozenset[str], *, disabled: bool,
                proven: frozenset[str] | None
                ) -> tuple[frozenset[str], frozenset[str], frozenset[str]]:
    """The root's traits with the tracker's applied, the tracker's traits
    to record in the ledger (those it set and that are present), and
    those it takes off (Placement must lose them too, even if this tree,
    new in this process, never had them).

    Args:
        current: the root's traits after the driver and the settlement.
        disabled: whether the node is disabled now.
        proven: the root's ledger entry if proven (``None``: nothing
            proven, so nothing of the tracker's is removed).
    """
    traits = set(current)
    traits.add(os_traits.COMPUTE_NODE)
    status = os_traits.COMPUTE_STATUS_DISABLED
    released = _NONE
    if disabled:
        traits.add(status)
    elif proven is not None and status in proven:
        traits.discard(status)
        released = _DISABLED
    # Enabled, a COMPUTE_STATUS_DISABLED still there is someone else's.
    ours = _DISABLED_OURS if disabled else _NODE_ONLY
    return frozenset(traits), ours, released


_NONE: frozenset[str] = frozenset()
_DISABLED = frozenset({os_traits.COMPUTE_STATUS_DISABLED})
_NODE_ONLY = frozenset({os_traits.COMPUTE_NODE})
_DISABLED_OURS = TRACKER_TRAITS
