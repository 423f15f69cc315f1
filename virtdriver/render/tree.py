"""Render a provider tree: Placement-shaped JSON, or an indented outline."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from virtdriver.render.text import wrapped


def render_tree(tree: Any, fmt: str,
                usages: Mapping[str, Mapping[str, int]] | None = None) -> str:
    """A provider tree: Placement-shaped JSON, or an indented outline
    (with ``usages``, provider uuid → class → used, beside each total)."""
    document = tree.to_json()
    usages = usages or {}
    if fmt == "json":
        return json.dumps(document, indent=2) + "\n"
    children: dict[str | None, list[dict[str, Any]]] = {}
    for provider in document["providers"]:
        children.setdefault(provider["parent_provider_uuid"], []).append(
            provider)
    lines: list[str] = []

    def walk(provider: dict[str, Any], depth: int) -> None:
        pad = "  " * depth
        lines.append(f"{pad}{provider['name']} ({provider['uuid']})")
        used = usages.get(provider["uuid"], {})
        inventory = ", ".join(
            f"{rc} {inv['total']}"
            + (f" (used {used[rc]})" if used.get(rc) else "")
            + (f" (reserved {inv['reserved']})" if inv["reserved"] else "")
            + (f" x{inv['allocation_ratio']:g}"
               if inv["allocation_ratio"] != 1 else "")
            for rc, inv in sorted(provider["inventories"].items()))
        lines.append(f"{pad}  inventory: {inventory or 'none'}")
        lines.append(f"{pad}  traits ({len(provider['traits'])}):")
        lines.extend(wrapped(provider["traits"], indent=len(pad) + 4))
        for child in children.get(provider["uuid"], []):
            walk(child, depth + 1)

    for root in children.get(None, []):
        walk(root, 0)
    return "\n".join(lines) + "\n"
