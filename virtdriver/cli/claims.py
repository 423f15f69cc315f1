"""``virtdriver claims``, ``claim``, ``release`` and ``rebuild-check``.

Claims live in the state directory (``claims-<driver>.json``) beside the
trait ledger, read and written under its lock; the provider tree shown
with them is built afresh from the host, as ``report`` builds it.
"""

from __future__ import annotations

import argparse
import logging
import sys
import uuid as uuidlib
from typing import TextIO

from virtdriver.claims.documents import (
    allocations_from_document, instance_from_document)
from virtdriver.claims.model import Instance
from virtdriver.claims.rebuild import (
    providers_from_tree_json, rebuild_conflicts)
from virtdriver.cli.checks import placement_url
from virtdriver.cli.errors import EXIT_REFUSED, CommandError
from virtdriver.cli.image import image_document
from virtdriver.cli.loading import chosen_node, host_tree, started_driver
from virtdriver.drivers.base import ComputeDriver
from virtdriver.drivers.data_files import load_data_file
from virtdriver.render.claims import render_claims, render_fit
from virtdriver.render.rebuild import render_rebuild
from virtdriver.resource_tracker.tracker import ResourceTracker
from virtdriver.state_dir import state_dir

COMMANDS = ("claims", "claim", "release", "rebuild-check")
_LOG = logging.getLogger(__name__)


def run_claims_command(args: argparse.Namespace, conf,
                       out: TextIO | None = None) -> int:
    """Run one of :data:`COMMANDS`; return the exit status."""
    out = out or sys.stdout
    driver = started_driver(args, conf)
    if args.command == "rebuild-check":
        return _rebuild_check(args, driver, conf, out)
    tracker = ResourceTracker(driver, state_dir=state_dir(),
                              driver_name=args.driver,
                              tree=host_tree(driver, args.driver, conf))
    _warn_foreign_nodes(tracker, driver)
    if args.command == "claim":
        instance = _instance(args.instance)
        nodename = chosen_node(driver, args)
        scheduled = _scheduled(args, instance)
        found = tracker.instance_claim(instance, nodename,
                                       allocations=scheduled)
        if args.placement_url:
            _write_back(args, tracker, nodename, instance, scheduled, found)
        out.write(render_fit(nodename, found, args.format))
        return 0
    if args.command == "release":
        nodename = tracker.release(_instance_uuid(args.instance))
        out.write(f"released the claim of instance "
                  f"{_instance_uuid(args.instance)} on node {nodename}\n")
        return 0
    out.write(render_claims(tracker.claims(), tracker.usages(),
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
                host_tree(driver, args.driver, conf).to_json())
        conflicts = rebuild_conflicts(instance, new_image, providers,
                                      disk_format=image.disk_format)
    out.write(render_rebuild(instance.uuid, conflicts, args.format,
                                    answer))
    return EXIT_REFUSED if conflicts else 0


def _scheduled(args: argparse.Namespace, instance: Instance
               ) -> dict[str, dict[str, int]] | None:
    """The scheduler's allocation for ``claim``, if one was given."""
    if getattr(args, "allocations", None):
        return allocations_from_document(load_data_file(
            args.allocations, "allocations", CommandError), args.allocations)
    if getattr(args, "placement_url", None):
        from virtdriver.placement.client import PlacementClient
        from virtdriver.placement.rebuild_source import placement_allocations
        client = PlacementClient.from_url(placement_url(args.placement_url))
        found = placement_allocations(client, instance.uuid)
        if not found:
            raise CommandError(
                f"Placement at {args.placement_url} holds no allocation for "
                f"instance {instance.uuid}; schedule it first, or claim "
                "without --placement-url")
        return found
    return None


def _write_back(args: argparse.Namespace, tracker: ResourceTracker,
                nodename: str, instance: Instance, scheduled, found) -> None:
    """Correct the instance's allocation in Placement to what the claim
    consumes; if Placement refuses, release the claim (nothing changed)."""
    from virtdriver.placement.candidates import correct_allocation
    from virtdriver.placement.client import PlacementClient
    from virtdriver.resource_tracker.instance_claims import (
        allocation_correction)
    corrected = allocation_correction(tracker.driver, tracker.tree, nodename,
                                      scheduled, found)
    if corrected is None:
        return
    try:
        correct_allocation(
            PlacementClient.from_url(placement_url(args.placement_url)),
            instance.uuid, corrected)
    except Exception:
        tracker.release(instance.uuid)
        raise


def _instance(path: str) -> Instance:
    return instance_from_document(
        load_data_file(path, "instance", CommandError), path)


def _warn_foreign_nodes(tracker: ResourceTracker,
                        driver: ComputeDriver) -> None:
    """Warn of claims the file holds for nodes this host does not have
    (a renamed host): they count on no node, so say which file and how
    to move or drop them."""
    nodes = driver.get_available_nodes()
    for nodename, usage in tracker.claims().items():
        if nodename in nodes or not usage.instances:
            continue
        move = (f"rename the key {nodename!r} under \"nodes\" to "
                f"{nodes[0]!r}" if len(nodes) == 1 else
                f"rename the key {nodename!r} under \"nodes\" to one of "
                f"{', '.join(map(repr, nodes[:10]))}")
        _LOG.warning(
            "instance claims %s: node %r holds %d claim(s) but is not a node "
            "of this host (%s), so they count on no node; if the host was "
            "renamed, %s (no virtdriver command running), else delete that "
            "entry to drop them", tracker.claims_path, nodename,
            len(usage.instances), ", ".join(nodes) or "no nodes", move)


def _instance_uuid(value: str) -> str:
    if not value.strip():
        raise CommandError("--instance '' names nothing; give the instance's "
                           "uuid or the path of its INSTANCE.json")
    try:
        return str(uuidlib.UUID(value))
    except ValueError:
        return _instance(value).uuid
