"""``virtdriver report``: the provider tree the tracker builds."""

from __future__ import annotations

import argparse
import pathlib
import socket
import sys
import tempfile
from typing import TextIO

from virtdriver import render
from virtdriver.drivers.loader import load_driver
from virtdriver.resource_tracker.tracker import ResourceTracker

#: The fake driver's host when ``--host-spec`` is not given.
DEFAULT_HOST_SPEC = "small"


def run_report(args: argparse.Namespace, conf, out: TextIO | None = None, *,
               uri_reason: str | None = None) -> int:
    """Build and show the provider tree of every node of the driver.

    ``uri_reason`` replaces the driver's own account of why it opened its
    libvirt URI (a replay knows better: the driver only sees a URI).
    """
    out = out or sys.stdout
    driver = load_driver(args.driver, **driver_arguments(args, conf))
    driver.init_host(socket.gethostname())
    # A report starts from an empty tree: no ledger worth keeping.
    with tempfile.TemporaryDirectory() as scratch:
        tracker = ResourceTracker(driver, state_dir=pathlib.Path(scratch),
                                  driver_name=args.driver,
                                  provider_config=provider_config(conf))
        tracker.update_all()
    if args.format == "text":
        for node in driver.get_available_nodes():
            out.write(render.render_node_source(
                driver.node_capabilities(node).facts, uri_reason))
    out.write(render.render_tree(tracker.tree, args.format))
    return 0


def provider_config(conf) -> str | None:
    """``[compute] provider_config_location`` (``None`` when emptied)."""
    return conf.compute.provider_config_location or None


def driver_arguments(args: argparse.Namespace, conf) -> dict[str, object]:
    """The keyword arguments ``args.driver`` takes: the in-tree drivers'
    own, ``conf`` only for any other (see :mod:`.checks`)."""
    kwargs: dict[str, object] = {"conf": conf}
    if args.driver in ("libvirt", "fake"):
        kwargs["nested"] = not args.flat
    if args.driver == "libvirt":
        kwargs["uri"] = args.uri
    elif args.driver == "fake":
        kwargs["host"] = args.host_spec or DEFAULT_HOST_SPEC
    elif args.driver == "ironic":
        kwargs["inventory_path"] = args.inventory
    return kwargs
