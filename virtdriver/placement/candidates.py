"""Ask Placement ``GET /allocation_candidates`` for a
:class:`~virtdriver.claims.placement_request.PlacementRequest`.

One read per request; the candidates are returned as Placement gives
them (``allocation_requests`` with their group ``mappings``, and
``provider_summaries``), checked only for the fields callers use.
"""

from __future__ import annotations

from typing import Any

from virtdriver.claims.placement_request import PlacementRequest
from virtdriver.placement.client import (
    PlacementClient, parse_version, version_text)
from virtdriver.placement.errors import (
    MicroversionUnsupported, PlacementRequestError, UnknownName)

PATH = "/allocation_candidates"


def allocation_candidates(client: PlacementClient,
                          request: PlacementRequest) -> dict[str, Any]:
    """Placement's candidates for ``request``: ``{"allocation_requests":
    [{"allocations": {rp: {"resources": {rc: n}}}, "mappings": {suffix:
    [rp]}}], "provider_summaries": {...}}``.

    A request for a ``CUSTOM_`` class Placement does not know (a page
    size no host offers) has no candidate: Placement's 400 for it is that
    empty answer.

    Raises:
        MicroversionUnsupported: Placement is older than the request needs.
        PlacementRequestError: the answer is not Placement's candidates.
        PlacementError: the request failed.
    """
    needed = parse_version(request.microversion)
    if parse_version(client.microversion) < needed:
        raise MicroversionUnsupported(
            f"Placement at {client.endpoint} speaks microversion "
            f"{client.microversion}; this request needs "
            f"{version_text(needed)} (root_required, same_subtree for a "
            "device on its guest node's cell); upgrade Placement",
            method="GET", path=PATH)
    try:
        # A list of pairs: same_subtree may repeat.
        body = client.request("GET", PATH, params=request.params())
    except UnknownName:
        # A CUSTOM_ class (a page size) no provider has ever offered is
        # unknown to Placement: no provider can hold it, so no candidate.
        if not any(rc.startswith("CUSTOM_") for g in request.groups
                   for rc in g.resources):
            raise
        return {"allocation_requests": [], "provider_summaries": {}}
    requests = body.get("allocation_requests") if isinstance(body, dict) \
        else None
    if not isinstance(requests, list) or not all(
            isinstance(r, dict) and isinstance(r.get("allocations"), dict)
            for r in requests):
        raise PlacementRequestError(
            f"GET {PATH}: Placement's answer has no allocation_requests "
            "list; check that the URL is Placement's", method="GET",
            path=PATH)
    return body
