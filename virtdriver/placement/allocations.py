"""Where a driver's reshape reads its node's allocations.

The tracker asks an :data:`~virtdriver.resource_tracker.reshape_step.
AllocationSource` for every consumer of a node's providers when its driver
raises ``ReshapeNeeded`` (:mod:`~virtdriver.resource_tracker.
reshape_step`); the answer is in Nova's shape.  Two sources:

* :class:`PlacementAllocations` — Placement's: ``GET
  /resource_providers/{uuid}/allocations`` per provider of the node, then
  ``GET /allocations/{consumer}`` per consumer found (its complete
  allocations, generation, project and user), as Nova's report client
  reads them;
* :class:`ClaimsAllocations` — the tracker's claims file, for Placement
  embedded in the process (``virtdriver sync`` with no Placement named):
  each claimed instance's CPUs, memory and pages on the providers of its
  claim (:func:`~.reshape.fit_placement`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from virtdriver.placement.errors import PlacementRequestError
from virtdriver.placement.reshape import fit_placement

if TYPE_CHECKING:
    from virtdriver.placement.client import PlacementClient


class PlacementAllocations:
    """The allocations Placement holds on a node's providers.

    Args:
        connect: gives the client (called once, on first use: a sync that
            needs no reshape never connects early).
    """

    def __init__(self, connect: Callable[[], PlacementClient]) -> None:
        self._connect = connect
        self._client: PlacementClient | None = None
        #: Requests made (GETs), for the curious.
        self.requests = 0

    @property
    def client(self) -> PlacementClient:
        if self._client is None:
            self._client = self._connect()
        return self._client

    def __call__(self, nodename: str, providers: Sequence[str]
                 ) -> dict[str, Any]:
        consumers: list[str] = []
        for uuid in providers:
            path = f"/resource_providers/{uuid}/allocations"
            body = self._get(path)
            if body is None:
                continue   # not in Placement yet: nothing allocated there
            found = body.get("allocations") if isinstance(body, dict) \
                else None
            if not isinstance(found, dict):
                raise _malformed(path)
            consumers.extend(c for c in found if c not in consumers)
        allocations = {}
        for consumer in consumers:
            path = f"/allocations/{consumer}"
            body = self._get(path)
            if not isinstance(body, dict) or not isinstance(
                    body.get("allocations"), dict):
                raise _malformed(path)
            if not body["allocations"]:
                continue   # gone since the providers were read
            record = {
                "allocations": {
                    rp: {"resources": dict(entry.get("resources") or {})}
                    for rp, entry in body["allocations"].items()},
                "consumer_generation": body.get("consumer_generation"),
                "project_id": body.get("project_id"),
                "user_id": body.get("user_id")}
            if body.get("consumer_type") is not None:
                record["consumer_type"] = body["consumer_type"]
            allocations[consumer] = record
        return allocations

    def _get(self, path: str) -> Any:
        from virtdriver.placement.errors import ProviderNotFound

        self.requests += 1
        try:
            return self.client.request("GET", path)
        except ProviderNotFound:
            return None


class ClaimsAllocations:
    """The allocations a tracker's claims imply on a node's providers.

    Args:
        tracker: the :class:`~virtdriver.resource_tracker.tracker.
            ResourceTracker` (its claims are read afresh on each call).
    """

    def __init__(self, tracker: Any) -> None:
        self.tracker = tracker

    def __call__(self, nodename: str, providers: Sequence[str]
                 ) -> dict[str, Any]:
        wanted = set(providers)
        usage = self.tracker.claims().get(nodename)
        if usage is None:
            return {}
        tree = self.tracker.tree
        allocations = {}
        for consumer, fit in usage.instances.items():
            placed = fit_placement(fit, nodename, tree)
            if not placed or not set(placed) <= wanted:
                continue
            allocations[consumer] = {
                "allocations": {rp: {"resources": dict(res)}
                                for rp, res in placed.items()},
                "consumer_generation": None, "project_id": None,
                "user_id": None}
        return allocations


def _malformed(path: str) -> PlacementRequestError:
    return PlacementRequestError(
        f"GET {path}: Placement's answer is malformed; check that the URL "
        "is Placement's", method="GET", path=path)
