"""Render ``placement-request``: the query string, or JSON, and the
candidates Placement returned for it.

No I/O: the command gathers the request and the answer and prints what
this module returns.
"""

from __future__ import annotations

import json
from typing import Any

from virtdriver.claims.placement_request import PlacementRequest


def candidate_rows(request: PlacementRequest, body: dict[str, Any]
                   ) -> list[dict[str, Any]]:
    """Each candidate as ``{"groups": {guest node|device suffix:
    provider}, "allocations": {provider: {rc: n}}}``."""
    rows = []
    for candidate in body.get("allocation_requests", []):
        mappings = candidate.get("mappings") or {}
        groups = {}
        for group in request.groups:
            if group.suffix and mappings.get(group.suffix):
                key = (group.suffix if group.guest_node is None
                       else str(group.guest_node))
                groups[key] = mappings[group.suffix][0]
        rows.append({"groups": groups, "allocations": {
            rp: dict(entry.get("resources", {}))
            for rp, entry in sorted(candidate["allocations"].items())}})
    return rows


def device_lines(request: PlacementRequest) -> list[str]:
    """``# device _DEV1 (alias gpu #1): …`` per device group: what
    Placement decides and what the claim checks, by policy."""
    lines = []
    numa = request.numa is not None
    for group in request.groups:
        device = group.device
        if device is None:
            continue
        what = ",".join(f"{rc}:{n}" for rc, n in group.resources.items())
        if not numa:
            says = "floats (no NUMA topology): any provider, no affinity"
        else:
            says = {
                "required": "Placement: a provider under guest node 0's "
                            "cell (same_subtree), exact",
                "legacy": "Placement: any provider; the claim: guest node "
                          "0's cell or no cell",
                "preferred": "Placement: any provider; the claim: any",
                "socket": "Placement: any provider; the claim: a cell on "
                          "guest node 0's socket",
            }[device.policy]
        lines.append(f"# device {group.suffix} ({device.source}): {what}, "
                     f"policy {device.policy}: {says}")
    return lines


def render_placement_request(request: PlacementRequest,
                             body: dict[str, Any] | None, fmt: str,
                             host: tuple[str, list[Any]] | None = None
                             ) -> str:
    """Text: the query string, the unexpressed cases (``# ...``), with a
    host (``(node, shortfalls)``) what its providers can never hold, and
    with an answer one line per candidate; JSON: the request document
    plus ``"host"`` and ``"candidates"`` when asked."""
    if fmt == "json":
        document = request.to_json()
        if host is not None:
            document["host"] = {"node": host[0], "shortfalls": [
                s.to_json() for s in host[1]]}
        if body is not None:
            document["candidates"] = candidate_rows(request, body)
        return json.dumps(document, indent=2, sort_keys=True) + "\n"
    lines = [request.query_string()]
    lines += [f"# not expressed: {u.case}: {u.message}"
              for u in request.unexpressed]
    lines += device_lines(request)
    lines.append(f"# microversion {request.microversion}")
    if host is not None:
        node, short = host
        lines += [f"# node {node}: {s.message}" for s in short] or [
            f"# node {node}: its providers can hold every class asked"]
    if body is not None:
        rows = candidate_rows(request, body)
        lines.append(f"{len(rows)} candidate(s)")
        for number, row in enumerate(rows, 1):
            nodes = ", ".join(
                f"device {n} -> {rp}" if n.startswith("_") else
                f"guest node {n} -> {rp}" for n, rp in row["groups"].items())
            taken = "; ".join(
                f"{rp}: " + ",".join(f"{rc}:{n}" for rc, n in
                                     sorted(res.items()))
                for rp, res in row["allocations"].items())
            lines.append(f"{number}. {nodes or 'floating'} ({taken})")
    return "\n".join(lines) + "\n"
