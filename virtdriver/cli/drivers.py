"""``virtdriver drivers``: every installed driver and whether it loads."""

from __future__ import annotations

import sys
from typing import TextIO

from virtdriver import render
from virtdriver.drivers.loader import available_drivers


def run_drivers(fmt: str, out: TextIO | None = None) -> int:
    """List every installed driver, those that fail to load included."""
    (out or sys.stdout).write(render.render_drivers(available_drivers(), fmt))
    return 0
