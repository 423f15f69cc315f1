"""``virtdriver diff A B``: what changes from one host reading to another.

Each side is a snapshot directory (replayed through fakelibvirt with the
real driver, as ``--snapshot`` is) or ``live`` (libvirt on this host, as
``report`` reads it).  Exit 0 no differences, 1 differences, 2 bad input.
"""

from __future__ import annotations

import argparse
import pathlib
import sys
from typing import TextIO

from virtdriver.cli.errors import CommandError
from virtdriver.cli.loading import host_tree, new_driver
from virtdriver.cli.replay import replaying
from virtdriver.conf.host import host_name
from virtdriver.drivers.libvirt.driver import node_uuid
from virtdriver.host_diff import HostSide, diff_hosts
from virtdriver.render.diff import render_host_diff

#: The side that reads this host's libvirt.
LIVE = "live"
#: Exit status when the sides differ (a finding, not an error).
EXIT_DIFFERENT = 1


def run_diff(args: argparse.Namespace, conf, out: TextIO | None = None
             ) -> int:
    """Build both sides, show what changes from A to B; 1 if anything."""
    out = out or sys.stdout
    for side in (args.a, args.b):
        _check_side(side)
    # run() filled args.uri from the config file: only --uri is refused.
    given_uri = args.uri and args.uri != (conf.libvirt.connection_uri or None)
    if given_uri and LIVE not in (args.a, args.b):
        raise CommandError(
            "--uri applies to a `live` side, and neither A nor B is live; "
            "drop --uri or name `live` as A or B")
    old = build_side(args.a, args, conf)
    new = build_side(args.b, args, conf)
    result = diff_hosts(old, new)
    out.write(render_host_diff(result, args.format))
    return EXIT_DIFFERENT if result else 0


def _check_side(side: str) -> None:
    if side == LIVE:
        return
    path = pathlib.Path(side)
    if not path.is_dir():
        what = "it does not exist" if not path.exists() else \
            "it is not a directory"
        raise CommandError(
            f"diff side {side!r} is neither `live` nor a snapshot directory "
            f"({what}); give a directory `virtdriver snapshot -o DIR` wrote "
            "(or a hand-written one, `virtdriver help snapshots`) or `live`")


def build_side(side: str, args: argparse.Namespace, conf) -> HostSide:
    """The provider tree and trait reports of one side (see module)."""
    if side == LIVE:
        return _read_host(LIVE, args.uri, args, conf)
    with replaying(side) as (uri, _reason, _fake):
        return _read_host(f"snapshot {side}", uri, args, conf)


def _read_host(label: str, uri: str | None, args: argparse.Namespace,
               conf) -> HostSide:
    # The libvirt driver on this side's URI, built as report builds it.
    side = argparse.Namespace(**{**vars(args), "driver": "libvirt",
                                 "uri": uri})
    driver = new_driver(side, conf)
    host = host_name(conf)
    driver.init_host(host)
    try:
        tree = host_tree(driver, "libvirt", conf)
        nodes = [driver.node_capabilities(node)
                 for node in driver.get_available_nodes()]
    finally:
        driver.cleanup_host(host)
    if label == LIVE:  # the URI the driver chose
        label = f"{LIVE} ({nodes[0].facts['uri']})"
    reports = {node_uuid(node.nodename): node.traits for node in nodes}
    return HostSide(label, tree.snapshot(), reports)
