"""Render the installed drivers (``virtdriver drivers``)."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from virtdriver.drivers.loader import DriverInfo


def render_drivers(drivers: list[DriverInfo], fmt: str) -> str:
    """The installed drivers: a table (``text``) or a JSON list (``json``).

    Text columns: name, target, the distribution and version providing
    it, and ``ok``, ``ok (with no options: <the driver's refusal>)`` or
    ``load error: <why>``.
    """
    if fmt == "json":
        return json.dumps([info.to_json() for info in drivers], indent=2) + "\n"
    if not drivers:
        return ("no virt drivers installed (entry-point namespace "
                "virtdriver.drivers is empty)\n")
    header = ("NAME", "TARGET", "PROVIDED BY", "STATUS")
    rows = [(info.name, info.target, info.provider or "unknown",
             _status(info)) for info in drivers]
    widths = [max(len(row[col]) for row in [header, *rows])
              for col in range(3)]
    return "".join(
        "  ".join(cell.ljust(width)
                  for cell, width in zip(row[:3], widths, strict=True))
        + "  " + row[3] + "\n" for row in [header, *rows])


def _status(info: DriverInfo) -> str:
    if not info.ok:
        return f"load error: {info.error}"
    return f"ok (with no options: {info.note})" if info.note else "ok"
