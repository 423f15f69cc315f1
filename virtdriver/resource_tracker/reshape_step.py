"""Nova's reshape round trip, in the tracker's update of one node.

The tracker calls ``driver.update_provider_tree(tree, nodename)``.  If the
driver raises :class:`~virtdriver.drivers.base.ReshapeNeeded`, the tracker
reads the allocations of every consumer of the node's providers through
its :data:`AllocationSource` (Placement's, or the claims file's when
Placement is embedded; no HTTP here) and calls the driver again with them
(``allocations=``), in Nova's shape::

    {consumer: {"allocations": {provider: {"resources": {class: n}}},
                "consumer_generation": g, "project_id": p, "user_id": u}}

The driver moves inventory in the tree and, in that mapping, the
allocations on it.  What it changed becomes the update's
:class:`ReshapeMoves`: the sync sends the tree's inventories and these
allocations in one ``POST /reshaper`` (:mod:`virtdriver.placement.reshape`).
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from virtdriver.drivers.base import ComputeDriver, DriverError, ReshapeNeeded
from virtdriver.resource_tracker.provider_tree import ProviderTree

#: ``source(nodename, provider uuids)`` → every consumer with an
#: allocation on one of those providers, in Nova's shape (module doc).
AllocationSource = Callable[[str, Sequence[str]], Mapping[str, Any]]
#: consumer → provider uuid → class → amount.
Moved = Mapping[str, Mapping[str, Mapping[str, int]]]


@dataclass(frozen=True)
class ReshapeMoves:
    """What a driver's reshape moved on one node.

    Attributes:
        nodename: the node.
        root_uuid: its root provider.
        moved: the consumers whose allocations the driver changed, each
            with its complete new allocations (provider → class → amount).
        read: how many consumers the tracker gave the driver.
    """

    nodename: str
    root_uuid: str
    moved: Moved
    read: int


@dataclass
class Pending:
    """What updates leave for the sync, until a sync confirms it:
    root uuid → reshape moves; provider uuid → traits the tracker took off
    as its own (Placement must lose them too)."""

    moves: dict[str, ReshapeMoves] = field(default_factory=dict)
    released: dict[str, set[str]] = field(default_factory=dict)

    def merge(self, other: Pending) -> None:
        self.moves.update(other.moves)
        for uuid, traits in other.released.items():
            self.released.setdefault(uuid, set()).update(traits)



def run_driver(driver: ComputeDriver, tree: ProviderTree, nodename: str,
               providers: Callable[[], Sequence[str]],
               source: AllocationSource | None
               ) -> tuple[Mapping[str, Any], Mapping[str, Any]] | None:
    """Run ``update_provider_tree``, with the round trip on
    ``ReshapeNeeded``; return ``(allocations as read, as the driver left
    them)`` after a round trip, else ``None``.

    ``providers()`` gives the node's provider uuids (read only when
    needed).

    Raises:
        DriverError: a reshape is needed but there is no source of
            allocations, or the driver raised ``ReshapeNeeded`` again.
    """
    try:
        driver.update_provider_tree(tree, nodename)
        return None
    except ReshapeNeeded:
        if source is None:
            raise DriverError(
                f"node {nodename!r}: the driver needs a reshape (it raised "
                "ReshapeNeeded) but this command has no allocations to give "
                "it; run `virtdriver sync` or the agent, which read them "
                "from Placement or the claims") from None
    read = source(nodename, providers())
    given = copy.deepcopy(dict(read))
    try:
        driver.update_provider_tree(tree, nodename, allocations=given)
    except ReshapeNeeded:
        raise DriverError(
            f"node {nodename!r}: the driver raised ReshapeNeeded again when "
            "given the allocations; it must reshape when allocations are "
            "passed (a bug in the driver)") from None
    return read, given


def moves(nodename: str, root_uuid: str, read: Mapping[str, Any],
          after: Mapping[str, Any]) -> ReshapeMoves:
    """The consumers whose allocations the driver changed.

    Raises:
        DriverError: the driver left an allocation in a shape Placement
            cannot take (named: consumer, provider, class).
    """
    moved = {}
    for consumer, record in after.items():
        new = _resources(nodename, consumer, record)
        old = (_resources(nodename, consumer, read[consumer])
               if consumer in read else None)
        if new != old:
            moved[consumer] = MappingProxyType(
                {rp: MappingProxyType(res) for rp, res in new.items()})
    return ReshapeMoves(nodename, root_uuid, MappingProxyType(moved),
                        len(read))


def _resources(nodename: str, consumer: str, record: Any
               ) -> dict[str, dict[str, int]]:
    def bad(what: str) -> DriverError:
        return DriverError(
            f"node {nodename!r}: after the reshape, consumer {consumer}'s "
            f"allocations {what}; give {{provider uuid: {{\"resources\": "
            "{class: amount}}}} (a bug in the driver)")

    if not isinstance(record, Mapping) or not isinstance(
            record.get("allocations"), Mapping):
        raise bad("have no \"allocations\" mapping")
    found: dict[str, dict[str, int]] = {}
    for rp, entry in record["allocations"].items():
        resources = entry.get("resources") if isinstance(entry, Mapping) \
            else None
        if not isinstance(rp, str) or not isinstance(resources, Mapping):
            raise bad(f"on {rp!r} have no \"resources\" mapping")
        for rc, amount in resources.items():
            if (not isinstance(amount, int) or isinstance(amount, bool)
                    or amount < 0):
                raise bad(f"on {rp} give {rc} {amount!r}, not a count")
            if amount:
                found.setdefault(rp, {})[rc] = amount
    return found
