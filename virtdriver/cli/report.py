"""``virtdriver report``: the provider tree the tracker builds."""

from __future__ import annotations

import argparse
import os
import pathlib
import sys
import tempfile
from typing import TextIO

from virtdriver import render
from virtdriver.cli.errors import CommandError
from virtdriver.drivers.loader import load_driver
from virtdriver.resource_tracker.tracker import ResourceTracker

#: The fake driver's host when ``--host-spec`` is not given.
DEFAULT_HOST_SPEC = "small"
#: Where the report's throw-away tracker state goes when it can: memory
#: (tmpfs), where the ledger's fsyncs cost nothing; else the temp dir.
SCRATCH_PARENT = "/dev/shm"


def run_report(args: argparse.Namespace, conf, out: TextIO | None = None, *,
               uri_reason: str | None = None) -> int:
    """Build and show the provider tree of every node of the driver.

    ``uri_reason`` replaces the driver's own account of why it opened its
    libvirt URI (a replay knows better: the driver only sees a URI).
    """
    out = out or sys.stdout
    output = getattr(args, "output", None)
    if output:
        from virtdriver.render.picture import picture_format
        _picture_checked(picture_format, output)
    driver = load_driver(args.driver, **driver_arguments(args, conf))
    driver.init_host(node_name(args, conf))
    # A report starts from an empty tree: no ledger worth keeping.
    with tempfile.TemporaryDirectory(dir=scratch_parent()) as scratch:
        tracker = ResourceTracker(driver, state_dir=pathlib.Path(scratch),
                                  driver_name=args.driver,
                                  provider_config=provider_config(conf))
        tracker.update_all()
    if output or args.format == "dot":
        from virtdriver.render.dot import render_dot
        from virtdriver.render.picture import write_picture
        text = render_dot(tracker.tree.to_json(), trait_families(driver))
        if not output:
            out.write(text)
            return 0
        _picture_checked(write_picture, text, output)
        out.write(f"wrote {output} ({len(tracker.tree)} providers)\n")
        return 0
    if args.format == "text":
        for node in driver.get_available_nodes():
            out.write(render.render_node_source(
                driver.node_capabilities(node).facts, uri_reason))
    out.write(render.render_tree(tracker.tree, args.format))
    return 0


def trait_families(driver) -> dict[str, str]:
    """Trait name → the family that answered for it, over every node."""
    families: dict[str, str] = {}
    for node in driver.get_available_nodes():
        report = driver.node_capabilities(node).traits
        families.update((trait, result.family)
                        for trait, result in report.results.items())
    return families


def _picture_checked(call, *args):
    """``call(*args)``, a :class:`PictureError` becoming exit 2."""
    from virtdriver.render.picture import PictureError
    try:
        return call(*args)
    except PictureError as exc:
        raise CommandError(str(exc)) from exc


def scratch_parent() -> str | None:
    """:data:`SCRATCH_PARENT` if this process may make a directory there,
    else ``None`` (the temp dir)."""
    if os.path.isdir(SCRATCH_PARENT) and os.access(SCRATCH_PARENT,
                                                   os.W_OK | os.X_OK):
        return SCRATCH_PARENT
    return None


def provider_config(conf) -> str | None:
    """``[compute] provider_config_location`` (``None`` when emptied)."""
    return conf.compute.provider_config_location or None


def node_name(args: argparse.Namespace, conf) -> str:
    """The host name ``init_host`` is given: a replayed snapshot's
    recorded host, else ``[DEFAULT] host``, else the machine's name."""
    from virtdriver.conf.host import host_name
    return host_name(conf, getattr(args, "recorded_host", None))


def driver_arguments(args: argparse.Namespace, conf) -> dict[str, object]:
    """The keyword arguments ``args.driver`` takes: the in-tree drivers'
    own, ``conf`` only for any other (see :mod:`.checks`)."""
    kwargs: dict[str, object] = {"conf": conf}
    if args.driver in ("libvirt", "fake"):
        kwargs["nested"] = not args.flat
    if args.driver == "libvirt":
        kwargs["uri"] = args.uri
        if hasattr(args, "recorded_disk_gb"):  # a replay: the recorded disk
            kwargs["disk_gb"] = args.recorded_disk_gb
    elif args.driver == "fake":
        kwargs["host"] = args.host_spec or DEFAULT_HOST_SPEC
    elif args.driver == "ironic":
        kwargs["inventory_path"] = args.inventory
    return kwargs
