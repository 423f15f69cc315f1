"""Render a rebuild check's answer (``virtdriver rebuild-check``)."""

from __future__ import annotations

import json
from typing import Any


def render_rebuild(instance_uuid: str, conflicts: list[Any], fmt: str,
                   answer: Any = None) -> str:
    """A rebuild check's answer: ``{allowed, conflicts}`` (and, checked
    against Placement, ``placement``: its own answer) or a text form."""
    if fmt == "json":
        document = {"instance": instance_uuid, "allowed": not conflicts,
                    "conflicts": [c.as_dict() for c in conflicts]}
        if answer is not None:
            document["placement"] = answer.as_dict()
        return json.dumps(document, indent=2) + "\n"
    if not conflicts:
        lines = [f"instance {instance_uuid}: rebuild allowed (NUMA "
                 "constraints, consumption and traits unchanged or "
                 "satisfied)"]
    else:
        lines = [f"instance {instance_uuid}: rebuild refused, "
                 f"{len(conflicts)} reason(s):"]
        lines.extend(f"  - [{c.kind}] {c.message}" for c in conflicts)
    if answer is not None and not answer.asked:
        lines.append("Placement was not asked: the new image requires or "
                     "forbids no trait the current one did not, so there "
                     "is no trait question for it")
    elif answer is not None:
        lines.append("Placement's own answer agrees" if answer.agrees
                     else "Placement's own answer differs:")
        lines.extend(f"  - {line}" for line in answer.differences)
    return "\n".join(lines) + "\n"
