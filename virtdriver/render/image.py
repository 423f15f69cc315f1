"""Render ``image-traits`` and ``image-check``: text tables or JSON.

No I/O: the commands gather the facts (:class:`CheckRow`) and print what
this module returns.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from virtdriver.claims.image_traits import REQUIRED, ImageTraits

NO_TRAITS = "the image asks for no traits"
#: The indent of a row's host evidence, under the row.
EVIDENCE_INDENT = 4


@dataclass(frozen=True)
class CheckRow:
    """One implied trait against the host.

    Attributes:
        trait: the trait.
        requirement: ``required`` or ``forbidden``.
        implied_by: the image property (and value) behind it.
        host_has: whether the host has the trait.
        status: how the host side knows (explain's status, or
            ``listed``/``not listed`` for a provider document).
        evidence: the host side's evidence, one line.
    """

    trait: str
    requirement: str
    implied_by: str
    host_has: bool
    status: str
    evidence: str

    @property
    def ok(self) -> bool:
        """Whether the host meets this requirement."""
        return self.host_has == (self.requirement == REQUIRED)

    def to_json(self) -> dict[str, Any]:
        """The row as a JSON-ready dict."""
        return {"trait": self.trait, "requirement": self.requirement,
                "implied_by": self.implied_by, "host_has": self.host_has,
                "ok": self.ok, "status": self.status,
                "evidence": self.evidence}


def render_image_traits(found: ImageTraits, fmt: str) -> str:
    """The required and forbidden traits, each with what implied it, and
    Placement's query form (``required=A,B,!C``); or JSON."""
    if fmt == "json":
        return json.dumps(found.to_json(), indent=2) + "\n"
    if not found.traits:
        return NO_TRAITS + "\n"
    width = max(len(t.trait) for t in found.traits)
    lines = [f"{t.requirement:<9}  {t.trait:<{width}}  {t.implied_by}"
             for t in found.traits]
    lines += ["", f"Placement query: {found.query()}"]
    return "\n".join(lines) + "\n"


def render_image_check(image: str, host: str, rows: Sequence[CheckRow],
                       found: ImageTraits, fmt: str) -> str:
    """Each implied trait, whether the host has it and why, then the
    verdict; or, for ``json``, ``{"image", "host", "fits", "query",
    "traits": [...]}``."""
    fits = all(row.ok for row in rows)
    if fmt == "json":
        return json.dumps({"image": image, "host": host, "fits": fits,
                           "query": found.query(),
                           "traits": [row.to_json() for row in rows]},
                          indent=2) + "\n"
    if not rows:
        return f"{NO_TRAITS}: it fits {host} as far as traits go\n"
    headings = ("TRAIT", "WANTS", "HOST", "ASKED BY")
    cells = [(r.trait, r.requirement, "yes" if r.host_has else "no",
              r.implied_by) for r in rows]
    widths = [max(len(c[i]) for c in [headings, *cells]) for i in range(3)]
    lines = []
    for index, row in enumerate([headings, *cells]):
        lines.append("  ".join([*(cell.ljust(w) for cell, w in
                                  zip(row[:3], widths, strict=True)),
                                row[3]]).rstrip())
        if index:
            found_row = rows[index - 1]
            lines.append(" " * EVIDENCE_INDENT
                         + f"{found_row.status} — {found_row.evidence}")
    lines.append("")
    if fits:
        lines.append(f"yes: an instance of {image} can boot on {host} "
                     "as far as traits go")
    else:
        unmet = "; ".join(
            f"{r.trait} ({r.implied_by}) "
            + ("missing" if r.requirement == REQUIRED else "present")
            for r in rows if not r.ok)
        lines.append(f"no: an instance of {image} cannot boot on {host}: "
                     f"{unmet}")
    return "\n".join(lines) + "\n"
