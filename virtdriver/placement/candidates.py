"""Ask Placement ``GET /allocation_candidates`` for a
:class:`~virtdriver.claims.placement_request.PlacementRequest`.

One read; the answer is returned as Placement gives it
(``allocation_requests`` with their group ``mappings``, and
``provider_summaries``), checked only for the fields callers use.
"""

from __future__ import annotations

from typing import Any

from virtdriver.claims.placement_request import PlacementRequest
from virtdriver.placement.client import (
    PlacementClient, parse_version, version_text)
from virtdriver.placement.errors import (
    MicroversionUnsupported, PlacementRequestError)

PATH = "/allocation_candidates"


def allocation_candidates(client: PlacementClient,
                          request: PlacementRequest) -> dict[str, Any]:
    """Placement's candidates for ``request``: ``{"allocation_requests":
    [{"allocations": {rp: {"resources": {rc: n}}}, "mappings": {suffix:
    [rp]}}], "provider_summaries": {...}}``.

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
            f"{version_text(needed)} (root_required); upgrade Placement",
            method="GET", path=PATH)
    body = client.request("GET", PATH, params=dict(request.params()))
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
