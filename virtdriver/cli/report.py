"""``virtdriver report``: the provider tree the tracker builds."""

from __future__ import annotations

import argparse
import sys
from typing import TextIO

from virtdriver.render.host import render_node_source
from virtdriver.render.tree import render_tree
from virtdriver.cli.disable import status_lines
from virtdriver.cli.errors import CommandError
from virtdriver.cli.loading import (
    check_provider_config, host_tracker, started_driver)


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
    driver = started_driver(args, conf)
    # A report starts from an empty tree: no ledger worth keeping.
    tracker = host_tracker(driver, args.driver, conf)
    tree = tracker.tree
    if output or args.format == "dot":
        from virtdriver.render.dot import render_dot
        from virtdriver.render.picture import write_picture
        text = render_dot(tree.to_json(), trait_families(driver))
        if not output:
            out.write(text)
        else:
            _picture_checked(write_picture, text, output)
            out.write(f"wrote {output} ({len(tree)} providers)\n")
        check_provider_config(tracker)
        return 0
    if args.format == "text":
        for node in driver.get_available_nodes():
            out.write(render_node_source(
                driver.node_capabilities(node).facts, uri_reason))
        out.write(status_lines(args.driver, driver.get_available_nodes()))
    out.write(render_tree(tree, args.format))
    check_provider_config(tracker)
    return 0


def trait_families(driver) -> dict[str, str]:
    """Trait name → the family that answered for it, over every node."""
    families: dict[str, str] = {}
    for node in driver.get_available_nodes():
        report = driver.node_capabilities(node).traits
        if report is None:  # a driver that derives no traits
            continue
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
