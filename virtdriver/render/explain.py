"""Render explanations: paragraphs or an aligned table, or JSON.

No I/O: the caller gives the width (the terminal's, or 100 in a pipe).
"""

from __future__ import annotations

import json
import textwrap
from collections.abc import Sequence

from virtdriver.capabilities.traits.explain import Explanation

#: The table's width when the caller knows none (not a terminal).
DEFAULT_WIDTH = 100
#: The evidence column never gets narrower than this, however long the
#: trait names: a wide table wraps in the terminal rather than the words.
MIN_EVIDENCE = 30
HEADINGS = ("PROVIDER", "TRAIT", "STATUS", "FAMILY", "EVIDENCE")
#: The columns before the evidence.
_LEADING = len(HEADINGS) - 1
#: The evidence's indent when it goes under its row.
STACKED_INDENT = 4
NO_MATCH = "no trait matches the filters\n"


def render_explanations(answers: Sequence[Explanation], fmt: str) -> str:
    """Explanations as text (a paragraph each) or as a JSON list."""
    if fmt == "json":
        return json.dumps([a.to_json() for a in answers], indent=2) + "\n"
    return "\n".join(a.text() for a in answers) + "\n"


def render_explanation_table(answers: Sequence[Explanation], fmt: str, *,
                             width: int = DEFAULT_WIDTH) -> str:
    """Every answer as one row — provider, trait, status, family, one-line
    evidence wrapped to ``width`` columns — or, for ``json``, a list of
    objects.

    When the leading columns leave the evidence fewer than
    :data:`MIN_EVIDENCE` columns, the evidence goes under each row,
    indented, instead of beside it.
    """
    if fmt == "json":
        return render_explanations(answers, fmt)
    if not answers:
        return NO_MATCH
    rows = [(a.provider or "-", a.trait, a.status, a.family or "-",
             a.summary) for a in answers]
    widths = [max(len(row[i]) for row in [HEADINGS, *rows])
              for i in range(_LEADING)]
    indent = sum(widths) + 2 * len(widths)
    beside = width - indent >= MIN_EVIDENCE
    if not beside:
        indent = STACKED_INDENT
    lines = []
    for row in [HEADINGS, *rows]:
        start = "".join(cell.ljust(w + 2) for cell, w in
                        zip(row[:_LEADING], widths, strict=True))
        # Whole words: a long name overflows rather than splitting.
        wrapped = textwrap.wrap(row[_LEADING],
                                max(width - indent, MIN_EVIDENCE),
                                break_long_words=False,
                                break_on_hyphens=False) or [""]
        if beside:
            lines.append((start + wrapped[0]).rstrip())
            wrapped = wrapped[1:]
        else:
            lines.append(start.rstrip())
        lines += [" " * indent + more for more in wrapped]
    return "\n".join(lines) + "\n"
