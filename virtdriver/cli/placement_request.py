"""``virtdriver placement-request``: the granular ``GET
/allocation_candidates`` request for a flavor and an image on this tree's
shape (``docs/claims.md``), and with ``--placement-url`` Placement's
candidates for it.  No host is read unless a driver is named: then each
class no provider of the chosen node can ever hold is shown (the reason
that host can offer no candidate).
"""

from __future__ import annotations

import argparse
import sys
from typing import TextIO

from virtdriver.claims.documents import flavor_from_document
from virtdriver.claims.image_traits import InvalidImage
from virtdriver.claims.model import InvalidRequest
from virtdriver.claims.placement_request import placement_request
from virtdriver.cli.checks import placement_url
from virtdriver.cli.errors import CommandError
from virtdriver.cli.image import image_document
from virtdriver.conf.pci_alias import pci_aliases
from virtdriver.drivers.data_files import load_data_file
from virtdriver.render.placement_request import render_placement_request

COMMANDS = ("placement-request",)


def run_placement_request(args: argparse.Namespace, conf=None,
                          out: TextIO | None = None) -> int:
    """Print the request (and the candidates, and with a driver what the
    node cannot hold); 0, 2 bad input, 3 Placement unreachable."""
    out = out or sys.stdout
    flavor = flavor_from_document(
        load_data_file(args.flavor, "flavor", CommandError), args.flavor)
    image = image_document(
        load_data_file(args.image, "image", CommandError), args.image)
    try:
        aliases = pci_aliases(conf)
    except InvalidRequest as exc:
        raise CommandError(str(exc)) from None
    try:
        request = placement_request(flavor, image.properties,
                                    image.disk_format, limit=args.limit,
                                    aliases=aliases)
    except (InvalidRequest, InvalidImage) as exc:
        raise CommandError(f"{args.flavor} with {args.image}: {exc}") \
            from None
    host = None
    if getattr(args, "driver", None):
        host = _node_shortfalls(args, conf, request)
    body = None
    if args.placement_url:
        # Imported here: the Placement client pulls in keystoneauth1.
        from virtdriver.placement.candidates import allocation_candidates
        from virtdriver.placement.client import PlacementClient
        client = PlacementClient.from_url(placement_url(args.placement_url))
        body = allocation_candidates(client, request)
    out.write(render_placement_request(request, body, args.format, host))
    return 0


def _node_shortfalls(args: argparse.Namespace, conf, request):
    """``(node, shortfalls)``: what the chosen node's tree cannot hold."""
    from virtdriver.claims.host_offer import shortfalls
    from virtdriver.cli.loading import chosen_node, host_tree, started_driver
    driver = started_driver(args, conf)
    nodename = chosen_node(driver, args)
    tree = host_tree(driver, args.driver, conf)
    inventories = {
        provider["name"]: provider["inventories"]
        for provider in tree.to_json()["providers"]
        if provider["root_provider_uuid"] == tree.data(nodename).uuid}
    return nodename, shortfalls(request, inventories)
