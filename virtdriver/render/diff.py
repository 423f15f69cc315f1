"""Render a :class:`~virtdriver.host_diff.HostDiff` for people (text) and
programs (JSON).  No I/O: input is the diff, output a string."""

from __future__ import annotations

import json
from typing import Any

from virtdriver.capabilities.traits.derive import evidence_json
from virtdriver.capabilities.traits.explain import Explanation
from virtdriver.host_diff import (
    ADDED, CHANGED, DROPPED, HostDiff, ProviderChange, TraitFlip)

_TITLES = ((ADDED, "traits B adds"), (DROPPED, "traits B drops"),
           (CHANGED, "traits whose status changes (asserted on neither)"))


def render_host_diff(result: HostDiff, fmt: str) -> str:
    """The diff as text (``text``) or a JSON document (``json``)."""
    if fmt == "json":
        return json.dumps(diff_json(result), indent=2) + "\n"
    lines = [f"A: {result.old_label}", f"B: {result.new_label}"]
    if not result:
        return "\n".join(lines + ["no differences"]) + "\n"
    if result.providers:
        lines += ["", f"providers ({len(result.providers)} changed):"]
        for change in result.providers:
            lines += _provider_lines(change)
    for direction, title in _TITLES:
        flips = [f for f in result.flips if f.direction == direction]
        if not flips:
            continue
        lines += ["", f"{title} ({len(flips)}):"]
        for flip in flips:
            lines += [f"  {flip.trait} on {flip.provider_name}: "
                      f"{flip.old.status} -> {flip.new.status}",
                      f"    A: {flip.old_summary}",
                      f"    B: {flip.new_summary}"]
    return "\n".join(lines) + "\n"


def _provider_lines(change: ProviderChange) -> list[str]:
    what = ("added" if change.added else "removed" if change.removed
            else f"renamed from {change.renamed_from}" if change.renamed_from
            else "changed")
    lines = [f"  {change.name} ({change.uuid}): {what}"]
    for rc, (old, new) in sorted(change.inventory.items()):
        lines.append(f"    {rc}: {_inventory(old)} -> {_inventory(new)}")
    if change.traits_added:
        lines.append("    traits added: " + ", ".join(change.traits_added))
    if change.traits_removed:
        lines.append("    traits removed: "
                     + ", ".join(change.traits_removed))
    return lines


def _inventory(record) -> str:
    if record is None:
        return "none"
    text = f"total {record.total}"
    if record.reserved:
        text += f" reserved {record.reserved}"
    if record.allocation_ratio != 1:
        text += f" x{record.allocation_ratio:g}"
    return text


def diff_json(result: HostDiff) -> dict[str, Any]:
    """``{a, b, differences, providers: [...], traits: [...]}``."""
    return {
        "a": result.old_label, "b": result.new_label,
        "differences": bool(result),
        "providers": [_provider_json(c) for c in result.providers],
        "traits": [_flip_json(f) for f in result.flips],
    }


def _provider_json(change: ProviderChange) -> dict[str, Any]:
    return {
        "uuid": change.uuid, "name": change.name,
        "parent_provider_uuid": change.parent_uuid,
        "added": change.added, "removed": change.removed,
        "renamed_from": change.renamed_from,
        "inventories": {
            rc: {"old": None if old is None else old.as_dict(),
                 "new": None if new is None else new.as_dict()}
            for rc, (old, new) in sorted(change.inventory.items())},
        "traits_added": list(change.traits_added),
        "traits_removed": list(change.traits_removed),
    }


def _flip_json(flip: TraitFlip) -> dict[str, Any]:
    return {
        "trait": flip.trait, "provider_uuid": flip.provider_uuid,
        "provider_name": flip.provider_name, "direction": flip.direction,
        "family": flip.new.family or flip.old.family,
        "a": _side_json(flip.old, flip.old_summary),
        "b": _side_json(flip.new, flip.new_summary),
    }


def _side_json(explanation: Explanation, summary: str) -> dict[str, Any]:
    return {"status": explanation.status, "family": explanation.family,
            "summary": summary, "sentence": explanation.sentence,
            "evidence": [evidence_json(e) for e in explanation.evidence]}
