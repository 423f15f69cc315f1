"""Render instance claims: one claim's fit, or every claim on the host
with what it uses of the tree."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from virtdriver.cpuset import format_cpuset
from virtdriver.render.tree import render_tree


def render_fit(nodename: str, fit: Any, fmt: str) -> str:
    """One instance's claim: where each guest cell went, what it pinned."""
    if fmt == "json":
        from virtdriver.claims.usage_json import fit_to_json
        return json.dumps({"node": nodename, "claim": fit_to_json(fit)},
                          indent=2) + "\n"
    lines = [f"claimed instance {fit.uuid} on node {nodename}"]
    lines.extend(_fit_lines(fit, "  "))
    return "\n".join(lines) + "\n"


def render_claims(claims: Mapping[str, Any],
                  usages: Mapping[str, Mapping[str, int]], tree: Any,
                  fmt: str) -> str:
    """Every node's claims, per instance and cell, then the tree with what
    the claims use of each inventory."""
    if fmt == "json":
        from virtdriver.claims.usage_json import usage_to_json
        return json.dumps({
            "nodes": {node: usage_to_json(usage)["instances"]
                      for node, usage in sorted(claims.items())},
            "usages": {uuid: dict(row) for uuid, row in
                       sorted(usages.items())}}, indent=2) + "\n"
    lines = []
    for node, usage in sorted(claims.items()):
        lines.append(f"node {node}: {len(usage.instances)} claim(s)")
        for fit in sorted(usage.instances.values(), key=lambda f: f.uuid):
            lines.append(f"  instance {fit.uuid}")
            lines.extend(_fit_lines(fit, "    "))
    if not lines:
        lines.append("no claims held")
    return "\n".join(lines) + "\n\n" + render_tree(tree, "text", usages)


def _fit_lines(fit: Any, pad: str) -> list[str]:
    lines = []
    if fit.floating_vcpus or fit.floating_memory_mb:
        lines.append(f"{pad}no NUMA topology: {fit.floating_vcpus} shared "
                     f"vCPU(s), {fit.floating_memory_mb} MiB on the host")
    for cell in fit.cells:
        parts = []
        if cell.pinning:
            parts.append("pinned " + ", ".join(
                f"vCPU {v}->CPU {p}" for v, p in sorted(cell.pinning.items())))
        if cell.shared_vcpus:
            parts.append(f"shared vCPUs {format_cpuset(cell.shared_vcpus)}")
        if cell.emulator_cpus:
            parts.append("emulator threads on CPU "
                         f"{format_cpuset(cell.emulator_cpus)}")
        if cell.reserved_cpus:
            parts.append("siblings kept free "
                         f"{format_cpuset(cell.reserved_cpus)}")
        pages = (f" in {cell.page_size_kib} KiB pages"
                 if cell.page_size_kib else "")
        parts.append(f"{cell.memory_mb} MiB{pages}")
        lines.append(f"{pad}guest cell {cell.guest_cell} -> host cell "
                     f"{cell.host_cell}: " + "; ".join(parts))
    for device in getattr(fit, "devices", ()):
        where = ("no NUMA cell" if device.cell is None
                 else f"cell {device.cell}")
        lines.append(f"{pad}device {device.source}: {device.provider} "
                     f"({where}) {device.resource_class}: "
                     + ", ".join(device.units))
    return lines
