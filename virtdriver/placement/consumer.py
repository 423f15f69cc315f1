"""One consumer's allocation in Placement: read it, and write it back
corrected without losing another writer's change.

:func:`read_consumer` is ``GET /allocations/{consumer}`` as a
:class:`ConsumerAllocation` (its resources, project, user, type and the
consumer generation of that read).  :func:`write_corrected` replaces the
allocation guarded by **that** generation: a change another writer made
since the read is a 409, never overwritten.  A 409 is read once more,
because it is also what the transport's own retry gets when Placement
saved the first ``PUT`` and its answer was lost (a 500 or a cut
connection after the write): when Placement already holds exactly the
corrected allocation the write is done; anything else is
:class:`AllocationChanged`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from virtdriver.placement.client import PlacementClient
from virtdriver.placement.errors import (
    GenerationConflict, PlacementRequestError)

#: What Placement (1.38+) shows for a consumer written below 1.38; its
#: ``PUT`` schema accepts only ``[A-Z0-9_]+``, so it is never written back.
UNKNOWN_CONSUMER_TYPE = "unknown"
#: The type of a consumer an instance claim corrects.
INSTANCE_CONSUMER_TYPE = "INSTANCE"


class AllocationChanged(PlacementRequestError):
    """The consumer's allocation changed in Placement after it was read
    (another writer), so the correction was not written."""


@dataclass(frozen=True)
class ConsumerAllocation:
    """A consumer's allocation as one ``GET /allocations/{uuid}`` gave it.

    Attributes:
        uuid: the consumer.
        allocations: ``{provider uuid: {resource class: amount}}`` (empty:
            Placement holds none).
        project_id, user_id: the consumer's owners (``None`` if absent).
        generation: the consumer generation of that read (``None`` for a
            consumer Placement does not have).
        consumer_type: as Placement shows it (``None`` below 1.38).
    """

    uuid: str
    allocations: Mapping[str, Mapping[str, int]] = field(
        default_factory=dict)
    project_id: str | None = None
    user_id: str | None = None
    generation: int | None = None
    consumer_type: str | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "allocations", MappingProxyType(
            {rp: MappingProxyType(dict(res))
             for rp, res in dict(self.allocations).items()}))

    def plain(self) -> dict[str, dict[str, int]]:
        """The allocations as plain dicts."""
        return {rp: dict(res) for rp, res in self.allocations.items()}


def read_consumer(client: PlacementClient, consumer_uuid: str
                  ) -> ConsumerAllocation:
    """``GET /allocations/{consumer_uuid}``, checked.

    Raises:
        PlacementRequestError: the answer is not Placement's allocations.
        PlacementError: the request failed.
    """
    path = f"/allocations/{consumer_uuid}"
    body = client.request("GET", path)
    entries = body.get("allocations") if isinstance(body, dict) else None
    if not isinstance(entries, dict):
        raise _bad_answer(path, "no allocations object")
    allocations = {}
    for provider, entry in entries.items():
        resources = entry.get("resources") if isinstance(entry, dict) \
            else None
        if not isinstance(resources, dict) or not all(
                isinstance(n, int) and not isinstance(n, bool)
                for n in resources.values()):
            raise _bad_answer(path, f"allocation on {provider} without "
                              "resources")
        allocations[provider] = dict(resources)
    generation = body.get("consumer_generation")
    if generation is not None and (isinstance(generation, bool)
                                   or not isinstance(generation, int)):
        raise _bad_answer(path, "a consumer_generation that is no number")
    return ConsumerAllocation(
        consumer_uuid, allocations, _text(body.get("project_id")),
        _text(body.get("user_id")), generation,
        _text(body.get("consumer_type")))


def write_corrected(client: PlacementClient, read: ConsumerAllocation,
                    corrected: Mapping[str, Mapping[str, int]]) -> None:
    """Replace ``read``'s allocation with ``corrected`` (``{rp: {rc: n}}``),
    keeping its project and user, guarded by ``read.generation``.

    A consumer written below microversion 1.38 has no type
    (:data:`UNKNOWN_CONSUMER_TYPE`); the claim that corrects it is an
    instance's, so it is written as :data:`INSTANCE_CONSUMER_TYPE`.

    Raises:
        PlacementRequestError: ``read`` holds no allocation to correct, or
            Placement refuses the new one (e.g. over capacity).
        AllocationChanged: another writer changed the allocation since
            ``read`` (Placement keeps theirs).
        PlacementError: a request failed (``PlacementUnavailable``: the
            outcome of the write is not known).
    """
    path = f"/allocations/{read.uuid}"
    if not read.allocations:
        raise PlacementRequestError(
            f"GET {path}: Placement holds no allocation for consumer "
            f"{read.uuid} to correct; schedule it first",
            method="GET", path=path)
    wanted = {rp: {rc: n for rc, n in res.items() if n}
              for rp, res in corrected.items()}
    document: dict[str, Any] = {
        "allocations": {rp: {"resources": dict(res)}
                        for rp, res in sorted(wanted.items()) if res},
        "project_id": read.project_id, "user_id": read.user_id,
        "consumer_generation": read.generation}
    if client.has("consumer_types"):
        kind = read.consumer_type
        document["consumer_type"] = (
            kind if kind and kind != UNKNOWN_CONSUMER_TYPE
            else INSTANCE_CONSUMER_TYPE)
    try:
        client.request("PUT", path, body=document)
    except GenerationConflict:
        now = read_consumer(client, read.uuid)
        if _amounts(now.allocations) == _amounts(wanted):
            return      # our own write, whose answer was lost
        raise AllocationChanged(
            f"PUT {path}: the allocation of consumer {read.uuid} changed "
            f"in Placement after it was read (consumer generation "
            f"{read.generation} -> {now.generation}), so the corrected "
            "one was not written and Placement keeps the other writer's; "
            "claim again to read the new allocation",
            method="PUT", path=path) from None


def _amounts(allocations: Mapping[str, Mapping[str, int]]
             ) -> dict[str, dict[str, int]]:
    return {rp: {rc: n for rc, n in res.items() if n}
            for rp, res in allocations.items()
            if any(res.values())}


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _bad_answer(path: str, what: str) -> PlacementRequestError:
    return PlacementRequestError(
        f"GET {path}: Placement's answer has {what}; check that the URL is "
        "Placement's", method="GET", path=path)
