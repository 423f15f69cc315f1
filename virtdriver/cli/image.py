"""``virtdriver image-traits`` and ``image-check``: an image's traits, and
whether a host has them.

IMAGE.json is rebuild-check's image document plus an optional
``disk_format``: ``{"disk_format": "qcow2", "properties": {...}}``.  An
image asking for what no trait expresses (a typo, a model no driver
reports) is bad input: exit 2, one line per property naming the valid
values.

``image-check`` answers for this host (libvirt, or ``--snapshot DIR``
replayed; the same guest options as ``explain``), whose evidence is
explain's; for a provider tree (``--providers TREE.json``, the output of
``report --format json``); or for a provider in Placement
(``--placement-url URL --provider UUID``).  As Nova's prefilters, it
checks the traits on the tree's root (the compute node).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, TextIO

from virtdriver.capabilities.traits.config import TraitConfig
from virtdriver.capabilities.traits.explain import PROVIDER_CONFIG
from virtdriver.capabilities.traits.model import TraitState
from virtdriver.claims.documents import InvalidDocument, image_properties
from virtdriver.claims.image_traits import DISK_FORMAT, ImageTraits, image_traits
from virtdriver.claims.rebuild import ProviderInfo, providers_from_tree_json
from virtdriver.cli.errors import EXIT_REFUSED, CommandError
from virtdriver.drivers.data_files import load_data_file
from virtdriver.render.image import (
    CheckRow, render_image_check, render_image_traits)

COMMANDS = ("image-traits", "image-check")
#: Explain's statuses that put a trait on the compute node.
HAS_STATUSES = frozenset({TraitState.ASSERTED.value, PROVIDER_CONFIG})

#: trait → (host has it, status, one line of evidence).
Lookup = Callable[[str], tuple[bool, str, str]]


@dataclass(frozen=True)
class ImageDocument:
    """IMAGE.json read: ``{"disk_format": "qcow2", "properties": {}}``.

    Attributes:
        properties: the image properties.
        disk_format: the disk format, ``None`` when not given.
    """

    properties: Mapping[str, Any]
    disk_format: str | None = None


def image_document(document: Any, source: str) -> ImageDocument:
    """An IMAGE.json document: ``properties`` as rebuild-check reads them
    (:func:`~virtdriver.claims.documents.image_properties`), plus an
    optional string ``disk_format``.

    Raises:
        InvalidDocument: naming ``source`` and the field at fault.
    """
    properties = image_properties(document, source, also=(DISK_FORMAT,))
    disk_format = document.get(DISK_FORMAT)
    if DISK_FORMAT in document and not isinstance(disk_format, str):
        raise InvalidDocument(
            f"{source}: disk_format: {disk_format!r} is not a string; "
            "give Glance's disk format, e.g. \"qcow2\"")
    return ImageDocument(properties, disk_format)


def read_image(path: str) -> tuple[ImageDocument, ImageTraits]:
    """IMAGE.json and its traits.

    Raises:
        CommandError: a property asks for what no trait expresses (exit 2).
        InvalidDocument: the document is unusable (exit 2).
    """
    image = image_document(load_data_file(path, "image", CommandError), path)
    found = image_traits(image.properties, image.disk_format)
    if found.problems:
        raise CommandError("\n".join(f"{path}: {p.message}"
                                     for p in found.problems))
    return image, found


def run_image_traits(args: argparse.Namespace,
                     out: TextIO | None = None) -> int:
    """Print the image's required and forbidden traits (no host read)."""
    out = out or sys.stdout
    _, found = read_image(args.image)
    out.write(render_image_traits(found, args.format))
    return 0


def run_image_check(args: argparse.Namespace, conf, config: TraitConfig, *,
                    opener, out: TextIO | None = None) -> int:
    """Check the image's traits against the host; 0 fits, 1 does not."""
    out = out or sys.stdout
    _check_sources(args)
    _, found = read_image(args.image)
    if args.providers:
        host, lookup = _tree_host(args)
    elif args.placement_url:
        host, lookup = _placement_host(args)
    elif args.driver == "libvirt":
        host, lookup = _libvirt_host(args, config, conf, opener)
    else:
        host, lookup = _driver_host(args, conf)
    rows = [CheckRow(t.trait, t.requirement, t.implied_by, *lookup(t.trait))
            for t in found.traits]
    out.write(render_image_check(args.image, host, rows, found,
                                 args.format))
    return 0 if all(row.ok for row in rows) else EXIT_REFUSED


def _check_sources(args: argparse.Namespace) -> None:
    # Not --uri: by now it may be [libvirt] connection_uri's (or the
    # snapshot's own), which the other sources simply do not read.
    chosen = [flag for flag, value in (
        ("--snapshot", args.snapshot), ("--providers", args.providers),
        ("--placement-url", args.placement_url)) if value]
    if len(chosen) > 1:
        raise CommandError(f"{' and '.join(chosen)} name two hosts to "
                           "check; give one of them")
    if args.provider and not (args.providers or args.placement_url):
        raise CommandError("--provider picks a provider of --providers or "
                           "--placement-url; give one of them, or drop "
                           "--provider to check this host")
    if chosen and args.driver != "libvirt":
        raise CommandError(f"--driver {args.driver} names this host's driver"
                           f", and {chosen[0]} another host to check; give "
                           "one of them")
    if args.placement_url and not args.provider:
        raise CommandError("--placement-url needs --provider UUID (the "
                           "compute node to check); give it")


# -- where the host's traits come from ---------------------------------------

def _libvirt_host(args, config: TraitConfig, conf, opener
                  ) -> tuple[str, Lookup]:
    """This host (or the snapshot replayed), answered by explain."""
    # Imported here: libvirt and the derivation are needed only here.
    from virtdriver.cli.host import cpu_map_from, host_traits, read_with
    from virtdriver.drivers.libvirt.connection import open_connection
    from virtdriver.drivers.libvirt.host import read_host
    from virtdriver.drivers.libvirt.traits import trait_report
    cpu_map = cpu_map_from(args.cpu_map)
    reading, choice = read_with(args.uri, opener or open_connection,
                                lambda conn, uri: read_host(conn, uri,
                                                            config))
    return _explained(host_traits(conf, reading.host,
                                  trait_report(reading, cpu_map), choice,
                                  args))


def _driver_host(args, conf) -> tuple[str, Lookup]:
    """A node of ``--driver`` (built as ``report`` builds it), answered by
    explain from the driver's trait report."""
    from virtdriver.cli.explain import driver_node
    return _explained(driver_node(args, conf))


def _explained(node) -> tuple[str, Lookup]:
    """``node``'s label (a :class:`~virtdriver.cli.explain.NodeTraits`),
    and a lookup answering as ``explain`` does."""
    from virtdriver.capabilities.traits.explain import explain

    def lookup(trait: str) -> tuple[bool, str, str]:
        answer = explain(trait, node.report, node.configured)
        return answer.status in HAS_STATUSES, answer.status, answer.summary
    return node.label, lookup


def _tree_host(args) -> tuple[str, Lookup]:
    """The root of a provider tree document."""
    providers = providers_from_tree_json(load_data_file(
        args.providers, "provider tree", CommandError))
    uuid = _root(providers, args.provider, args.providers)
    return _listing(providers[uuid], uuid, f"in {args.providers}")


def _root(providers: Mapping[str, ProviderInfo], wanted: str | None,
          where: str) -> str:
    if wanted is not None:
        if wanted not in providers:
            raise CommandError(f"--provider {wanted}: {where} has no such "
                               "provider; give a uuid from it")
        return providers[wanted].root_uuid or wanted
    roots = [u for u, info in providers.items() if not info.root_uuid]
    if len(roots) != 1:
        named = ", ".join(f"{providers[u].name or '?'} ({u})"
                          for u in roots[:10])
        raise CommandError(f"{where} has {len(roots)} root providers"
                           + (f" ({named})" if roots else "")
                           + "; say which compute node with --provider")
    return roots[0]


def _placement_host(args) -> tuple[str, Lookup]:
    """A provider in Placement (its root, as Nova's prefilters ask)."""
    # Imported here: the Placement client pulls in keystoneauth1.
    from virtdriver.cli.checks import placement_url
    from virtdriver.placement.client import PlacementClient
    from virtdriver.placement.rebuild_source import placement_providers
    url = placement_url(args.placement_url)
    client = PlacementClient.from_url(url)
    found = placement_providers(client, [args.provider])
    info = found.get(args.provider)
    if info is None:
        raise CommandError(f"--provider {args.provider}: Placement at {url} "
                           "has no such provider; give a compute node's "
                           "uuid (`openstack resource provider list`)")
    uuid, root = args.provider, info
    if info.root_uuid and found.get(info.root_uuid) is not None:
        uuid, root = info.root_uuid, found[info.root_uuid]
    return _listing(root, uuid, f"in Placement at {url}")


def _listing(info: ProviderInfo, uuid: str, where: str
             ) -> tuple[str, Lookup]:
    label = f"provider {info.name!r} ({uuid})" if info.name \
        else f"provider {uuid}"

    def lookup(trait: str) -> tuple[bool, str, str]:
        if trait in info.traits:
            return True, "listed", f"{label} {where} lists it"
        return False, "not listed", (f"not among the {len(info.traits)} "
                                     f"traits of {label} {where}")
    return f"{label} {where}", lookup
