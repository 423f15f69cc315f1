"""``virtdriver drivers``: every installed driver and whether it can be
built here."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping
from typing import TextIO

from virtdriver.cli.command_conf import command_conf
from virtdriver.cli.loading import driver_arguments
from virtdriver.drivers.loader import available_drivers
from virtdriver.render.drivers import render_drivers


def run_drivers(fmt: str, out: TextIO | None = None) -> int:
    """List every installed driver, those that fail to load included;
    each that loads is also built as ``virtdriver report --driver NAME``
    with no options would build it (constructors do no I/O)."""
    (out or sys.stdout).write(render_drivers(
        available_drivers(offer=offered_with_no_options), fmt))
    return 0


def offered_with_no_options(name: str) -> Mapping[str, object]:
    """What ``virtdriver report --driver NAME`` offers the driver ``name``
    when given no options and no config file."""
    args = argparse.Namespace(command="report", driver=name, uri=None,
                              host_spec=None, inventory=None, flat=False,
                              config_file=[])
    return driver_arguments(args, command_conf(args))
