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
from virtdriver.claims.constraints import numa_constraints
from virtdriver.claims.model import Instance, InvalidRequest
from virtdriver.claims.rebuild import (
    providers_from_tree_json, rebuild_conflicts)
from virtdriver.cli.checks import placement_url
from virtdriver.cli.errors import (
    EXIT_FAILURE, EXIT_REFUSED, EXIT_UNREACHABLE, CommandError)
from virtdriver.cli.image import image_document
from virtdriver.cli.loading import chosen_node, host_tree, started_driver
from virtdriver.drivers.base import ComputeDriver
from virtdriver.drivers.data_files import load_data_file
from virtdriver.render.claims import render_claims, render_fit
from virtdriver.conf.pci_alias import pci_aliases
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
        read = _placement_read(args, instance)
        scheduled = _scheduled(args, instance, read)
        found = tracker.instance_claim(instance, nodename,
                                       allocations=scheduled,
                                       aliases=pci_aliases(conf))
        if read is not None:
            _write_back(args, tracker, nodename, read, found)
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
    try:
        # What claim refuses, a rebuild check cannot allow: the instance
        # as it stands must be a valid request.
        numa_constraints(instance.flavor, instance.image_properties)
    except InvalidRequest as exc:
        raise CommandError(
            f"{args.instance}: the instance's flavor and current image make "
            f"no valid request ({exc}); fix INSTANCE.json (a rebuild "
            "cannot make it valid)") from None
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


def _placement_read(args: argparse.Namespace, instance: Instance):
    """With ``--placement-url``: the instance's allocation as Placement
    holds it (one read, whose consumer generation guards the write-back)."""
    if not getattr(args, "placement_url", None):
        return None
    from virtdriver.placement.client import PlacementClient
    from virtdriver.placement.consumer import read_consumer
    client = PlacementClient.from_url(placement_url(args.placement_url))
    read = read_consumer(client, instance.uuid)
    if not read.allocations:
        raise CommandError(
            f"Placement at {args.placement_url} holds no allocation for "
            f"instance {instance.uuid}; schedule it first, or claim "
            "without --placement-url")
    return read


def _scheduled(args: argparse.Namespace, instance: Instance, read
               ) -> dict[str, dict[str, int]] | None:
    """The scheduler's allocation for ``claim``: ``--allocations``,
    Placement's (``read``) or the instance document's ``allocations``;
    an instance document whose allocations differ from the one given
    beside it is refused (which is the instance's?)."""
    given, source = None, None
    if getattr(args, "allocations", None):
        given = allocations_from_document(load_data_file(
            args.allocations, "allocations", CommandError), args.allocations)
        source = args.allocations
    elif read is not None:
        given, source = read.plain(), f"Placement at {args.placement_url}"
    own = {rp: dict(res) for rp, res in instance.allocations.items()}
    if given is None:
        return own or None
    if own and _nonzero(own) != _nonzero(given):
        raise CommandError(
            f"{args.instance}: its allocations ({_shown(own)}) differ from "
            f"those of {source} ({_shown(given)}); drop \"allocations\" "
            "from the instance document or make the two agree")
    return given


def _nonzero(allocations) -> dict[str, dict[str, int]]:
    return {rp: {rc: n for rc, n in res.items() if n}
            for rp, res in allocations.items() if any(res.values())}


def _shown(allocations) -> str:
    return "; ".join(
        f"{rp}: " + ",".join(f"{rc}={n}" for rc, n in sorted(res.items()))
        for rp, res in sorted(_nonzero(allocations).items())) or "none"


def _write_back(args: argparse.Namespace, tracker: ResourceTracker,
                nodename: str, read, found) -> None:
    """Correct the instance's allocation in Placement to what the claim
    consumes, through the generation of the read the claim used; if
    Placement refuses, another writer changed it meanwhile, or cannot be
    reached, release the claim (Placement keeps what it holds)."""
    from virtdriver.placement.client import PlacementClient
    from virtdriver.placement.consumer import write_corrected
    from virtdriver.resource_tracker.instance_claims import (
        allocation_correction)
    corrected = allocation_correction(tracker.driver, tracker.tree, nodename,
                                      read.plain(), found)
    if corrected is None:
        return
    from virtdriver.placement.errors import (
        PlacementError, PlacementUnavailable)
    try:
        write_corrected(
            PlacementClient.from_url(placement_url(args.placement_url)),
            read, corrected)
    except PlacementError as exc:
        tracker.release(read.uuid)
        unreachable = isinstance(exc, PlacementUnavailable)
        raise CommandError(
            f"{exc}; the claim of instance {read.uuid} was released "
            + ("(Placement holds the scheduler's allocation or the "
               "corrected one); claim again once Placement answers"
               if unreachable else "(Placement keeps what it holds)"),
            EXIT_UNREACHABLE if unreachable else EXIT_FAILURE) from exc
    except BaseException:
        tracker.release(read.uuid)
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
