"""Refuse command-line options that would be silently ignored.

A ``report`` option that the chosen driver does not read (``--inventory``
with the fake driver, ``--uri`` with ironic), or a combination that cannot
both apply (``--snapshot`` with ``--uri``), is an error rather than a no-op.
Config *files* are not checked this way: one file may serve many drivers.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping

from virtdriver.cli.errors import CommandError
from virtdriver.conf.overrides import COMMAND_LINE_OPTIONS, flag
from virtdriver.conf.reader import option_name

#: ``report`` options only some drivers read: dest -> those drivers.
#: Any other driver (an out-of-tree one) is given the options only.
DRIVER_OPTIONS: Mapping[str, tuple[str, ...]] = {
    "uri": ("libvirt",),
    "snapshot": ("libvirt",),
    "flat": ("libvirt", "fake"),
    "host_spec": ("fake",),
    "inventory": ("ironic",),
}

#: Config options an in-tree driver never reads, by driver: the ironic
#: driver reads ``[compute] image_type_exclude_list`` only.
UNREAD_OPTIONS: Mapping[str, tuple[str, ...]] = {
    "ironic": tuple(dest for dest in COMMAND_LINE_OPTIONS
                    if dest != "image_type_exclude_list"),
}


def check_options(args: argparse.Namespace) -> None:
    """Raise :class:`CommandError` for an option that would not apply."""
    if getattr(args, "snapshot", None) and args.uri:
        raise CommandError(
            "--snapshot replays a recorded host instead of opening libvirt, "
            "so --uri would not apply; give one or the other")
    if hasattr(args, "driver"):       # report and the claims commands
        _check_report(args)


def _check_report(args: argparse.Namespace) -> None:
    for dest, drivers in DRIVER_OPTIONS.items():
        if getattr(args, dest) in (None, False) or args.driver in drivers:
            continue
        raise CommandError(
            f"{flag(dest)} applies only to --driver {' or '.join(drivers)}, "
            f"not to --driver {args.driver}; drop {flag(dest)} or use "
            f"--driver {drivers[0]}")
    for dest in UNREAD_OPTIONS.get(args.driver, ()):
        if getattr(args, dest, None) is not None:
            raise CommandError(
                f"{flag(dest)} does not apply to --driver {args.driver}: it "
                f"does not read {option_name(*COMMAND_LINE_OPTIONS[dest])}; "
                f"drop {flag(dest)}")
