"""``virtdriver report``: the provider tree the tracker builds."""

from __future__ import annotations

import argparse
import pathlib
import socket
import sys
import tempfile
from typing import TextIO

from virtdriver import render
from virtdriver.cli.errors import EXIT_FAILURE
from virtdriver.drivers.base import DriverError
from virtdriver.drivers.loader import load_driver
from virtdriver.resource_tracker.tracker import ResourceTracker


def run_report(args: argparse.Namespace, conf, out: TextIO | None = None,
             err: TextIO | None = None) -> int:
    """Build and show the provider tree of every node of the driver."""
    out = out or sys.stdout
    err = err or sys.stderr
    kwargs: dict[str, object] = {"conf": conf}
    # The in-tree drivers' own arguments; other drivers get conf only.
    if args.driver in ("libvirt", "fake"):
        kwargs["nested"] = not args.flat
    if args.driver == "libvirt":
        kwargs["uri"] = args.uri
    elif args.driver == "fake":
        kwargs["host"] = args.host_spec
    elif args.driver == "ironic":
        kwargs["inventory_path"] = args.inventory
    try:
        driver = load_driver(args.driver, **kwargs)
        driver.init_host(socket.gethostname())
        # A report starts from an empty tree: no ledger worth keeping.
        with tempfile.TemporaryDirectory() as scratch:
            tracker = ResourceTracker(driver, state_dir=pathlib.Path(scratch),
                                      driver_name=args.driver)
            tracker.update_all()
        tree = tracker.tree
    except DriverError as exc:
        print(f"virtdriver: {exc}", file=err)
        return EXIT_FAILURE
    if args.format == "text":
        for node in driver.get_available_nodes():
            facts = driver.node_capabilities(node).facts
            if "uri" in facts:
                out.write(f"libvirt URI: {facts['uri']}\n"
                          f"  why: {facts.get('uri_reason', '')}\n\n")
    out.write(render.render_tree(tree, args.format))
    return 0
