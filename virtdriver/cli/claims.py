"""``virtdriver claims``, ``claim``, ``release`` and ``rebuild-check``.

Claims live in the state directory (``claims-<driver>.json``) beside the
trait ledger, read and written under its lock; the provider tree shown
with them is built afresh from the host, as ``report`` builds it.
"""

from __future__ import annotations

import argparse
import pathlib
import sys
import tempfile
import uuid as uuidlib
from typing import TextIO

from virtdriver import render
from virtdriver.claims.documents import instance_from_document
from virtdriver.claims.model import Instance
from virtdriver.claims.rebuild import (
    providers_from_tree_json, rebuild_conflicts)
from virtdriver.cli.checks import placement_url
from virtdriver.cli.errors import EXIT_REFUSED, CommandError
from virtdriver.cli.image import image_document
from virtdriver.cli.report import (
    driver_arguments, node_name, provider_config)
from virtdriver.drivers.base import ComputeDriver
from virtdriver.drivers.data_files import load_data_file
from virtdriver.drivers.loader import load_driver
from virtdriver.resource_tracker.provider_tree import ProviderTree
from virtdriver.resource_tracker.tracker import ResourceTracker
from virtdriver.state_dir import state_dir

COMMANDS = ("claims", "claim", "release", "rebuild-check")


def run_claims_command(args: argparse.Namespace, conf,
                       out: TextIO | None = None) -> int:
    """Run one of :data:`COMMANDS`; return the exit status."""
    out = out or sys.stdout
    driver = load_driver(args.driver, **driver_arguments(args, conf))
    driver.init_host(node_name(args, conf))
    if args.command == "rebuild-check":
        return _rebuild_check(args, driver, conf, out)
    tracker = ResourceTracker(driver, state_dir=state_dir(),
                              driver_name=args.driver,
                              tree=_host_tree(driver, args.driver, conf))
    if args.command == "claim":
        instance = _instance(args.instance)
        nodename = _node(driver, args.node)
        found = tracker.instance_claim(instance, nodename)
        out.write(render.render_fit(nodename, found, args.format))
        return 0
    if args.command == "release":
        nodename = tracker.release(_instance_uuid(args.instance))
        out.write(f"released the claim of instance "
                  f"{_instance_uuid(args.instance)} on node {nodename}\n")
        return 0
    out.write(render.render_claims(tracker.claims(), tracker.usages(),
                                   tracker.tree, args.format))
    return 0


def _rebuild_check(args: argparse.Namespace, driver: ComputeDriver, conf,
                   out: TextIO) -> int:
    instance = _instance(args.instance)
    image = image_document(
        load_data_file(args.image, "image", CommandError), args.image)
    new_image = dict(image.properties)
    answer = None
    if args.placement_url:
        # Imported here: the Placement client pulls in keystoneauth1.
        from virtdriver.placement.client import PlacementClient
        from virtdriver.placement.rebuild_source import (
            rebuild_check_with_placement)
        client = PlacementClient.from_url(placement_url(args.placement_url))
        conflicts, answer = rebuild_check_with_placement(
            client, instance, new_image, disk_format=image.disk_format)
    else:
        if args.providers:
            providers = providers_from_tree_json(load_data_file(
                args.providers, "provider tree", CommandError))
        else:
            providers = providers_from_tree_json(
                _host_tree(driver, args.driver, conf).to_json())
        conflicts = rebuild_conflicts(instance, new_image, providers,
                                      disk_format=image.disk_format)
    out.write(render.render_rebuild(instance.uuid, conflicts, args.format,
                                    answer))
    return EXIT_REFUSED if conflicts else 0


def _host_tree(driver: ComputeDriver, name: str, conf) -> ProviderTree:
    """The host's provider tree, built as ``report`` builds it (a scratch
    ledger: showing the tree must not change the real one)."""
    with tempfile.TemporaryDirectory() as scratch:
        tracker = ResourceTracker(driver, state_dir=pathlib.Path(scratch),
                                  driver_name=name,
                                  provider_config=provider_config(conf))
        tracker.update_all()
    return tracker.tree


def _instance(path: str) -> Instance:
    return instance_from_document(
        load_data_file(path, "instance", CommandError), path)


def _instance_uuid(value: str) -> str:
    try:
        return str(uuidlib.UUID(value))
    except ValueError:
        return _instance(value).uuid


def _node(driver: ComputeDriver, nodename: str | None) -> str:
    nodes = driver.get_available_nodes()
    if nodename is not None:
        return nodename
    if len(nodes) != 1:
        raise CommandError(f"the driver has {len(nodes)} nodes; say which "
                           f"with --node ({', '.join(nodes[:10])})")
    return nodes[0]
