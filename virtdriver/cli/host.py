"""``virtdriver host``, and ``explain`` for libvirt: read the host, derive
traits."""

from __future__ import annotations

import argparse
import pathlib
import sys
from collections.abc import Callable
from typing import TextIO, TypeVar

import libvirt

from virtdriver.capabilities import CapabilityXMLError
from virtdriver.capabilities.cpu_map import INDEX, CPUModelCatalog
from virtdriver.capabilities.devices.model import DevicesReading
from virtdriver.capabilities.devices.rules import DeviceRules
from virtdriver.capabilities.host import HostCapabilities
from virtdriver.capabilities.traits.config import TraitConfig
from virtdriver.capabilities.traits.derive import TraitReport
from virtdriver.capabilities.traits.registry import LIBVIRT_FAMILIES
from virtdriver.cli.errors import CommandError
from virtdriver.cli.explain import (
    NodeTraits, Provider, explain_filters, node_traits, run_explain)
from virtdriver.conf.device_rules import device_rules
from virtdriver.conf.host import host_name
from virtdriver.drivers.libvirt.connection import URIChoice
from virtdriver.drivers.libvirt.cpu_map_loader import (
    DEFAULT_CPU_MAP_DIR, load_cpu_map)
from virtdriver.drivers.host_tree import provider_reports
from virtdriver.drivers.identity import child_uuid
from virtdriver.drivers.libvirt.device_providers import DeviceProviders
from virtdriver.drivers.libvirt.devices import read_devices
from virtdriver.drivers.libvirt.driver import node_uuid
from virtdriver.drivers.libvirt.host import CapabilitySource, read_host
from virtdriver.drivers.libvirt.traits import trait_report
from virtdriver.render.host import render_json, render_text

T = TypeVar("T")
Opener = Callable[[str | None], tuple[CapabilitySource, URIChoice]]
#: The libvirt driver's trait families, by name (``explain --family``).
FAMILY_NAMES = tuple(family.name for family in LIBVIRT_FAMILIES)


def run_command(args: argparse.Namespace, config: TraitConfig, *,
                opener: Opener, out: TextIO | None = None,
                conf=None) -> int:
    """Read the host (via ``opener``), derive traits, print the answer.

    ``conf`` (the options) gives ``explain`` the provider config files.
    """
    out = out or sys.stdout
    if args.command == "explain":  # bad filters fail before libvirt opens
        explain_filters(args, FAMILY_NAMES)
    cpu_map = cpu_map_from(args.cpu_map)
    nodedev_uri = conf.libvirt.nodedev_uri or None if conf else None
    reading, choice = read_with(args.uri, opener, lambda conn, uri: read_host(
        conn, uri, config, devices=lambda c, u: read_devices(
            c, u, nodedev_uri=nodedev_uri)))
    report = trait_report(reading, cpu_map)
    if args.command == "explain":
        return run_explain(args, host_traits(conf, reading.host, report,
                                             choice, args,
                                             devices=reading.devices),
                           FAMILY_NAMES, out)
    renderer = render_json if args.format == "json" else render_text
    out.write(renderer(reading, choice.reason, report))
    return 0


def host_traits(conf, host: HostCapabilities, report: TraitReport,
                choice: URIChoice, args: argparse.Namespace | None = None,
                *, devices: DevicesReading | None = None) -> NodeTraits:
    """This host's libvirt trait report split over its providers as the
    driver publishes them (the nested tree: the root, one provider per
    NUMA cell, one per device the ``[pci]``/``[devices]`` rules list in
    ``devices``), with the provider config traits for each.  The root is
    named by a replayed snapshot's recorded host, else ``[DEFAULT]
    host``, else the machine's name."""
    name = host_name(conf, getattr(args, "recorded_host", None))
    reports = provider_reports(name, host, report)
    owned = None
    if devices is not None:
        chosen = DeviceProviders(device_rules(conf) if conf is not None
                                 else DeviceRules())
        reports.update(chosen.provider_reports(name, devices))
        owned = chosen.ownership
    root = node_uuid(name)
    providers = [Provider(provider, root if provider == name
                          else child_uuid(root, provider), provider == name)
                 for provider in reports]
    return node_traits(f"this host ({choice.uri})", report, reports,
                       providers, conf, owned)


def cpu_map_from(directory: str | None) -> CPUModelCatalog:
    """libvirt's CPU map from ``--cpu-map``, which must be one; the
    default directory may be missing (every CPU model is then unknown)."""
    if directory is None:
        directory = DEFAULT_CPU_MAP_DIR
    elif not (pathlib.Path(directory) / INDEX).is_file():
        what = ("it does not exist" if not pathlib.Path(directory).exists()
                else f"it has no {INDEX}")
        raise CommandError(
            f"--cpu-map {directory} is not a libvirt CPU map directory "
            f"({what}); give the directory holding libvirt's cpu_map "
            f"{INDEX} (usually {DEFAULT_CPU_MAP_DIR}) or leave --cpu-map out")
    try:
        return load_cpu_map(directory)
    except CapabilityXMLError as exc:
        raise CommandError(f"libvirt's CPU map is not usable: {exc}") from exc


def read_with(uri: str | None, opener: Opener,
              read: Callable[[CapabilitySource, str], T]
              ) -> tuple[T, URIChoice]:
    """Open ``uri`` and ``read(conn, uri)``; the connection is closed after.

    Raises:
        LibvirtConnectionError: ``uri`` did not open.
        CommandError: what was read is unusable, or libvirt refused it.
    """
    conn, choice = opener(uri)
    try:
        return read(conn, choice.uri), choice
    except CapabilityXMLError as exc:
        raise CommandError(
            f"libvirt capability XML not usable: {exc}") from exc
    except libvirt.libvirtError as exc:
        raise CommandError(
            f"cannot read capabilities from {choice.uri}: "
            f"{exc.get_error_message() or exc}; check that libvirt at "
            f"{choice.uri} works (`virsh -c {choice.uri} capabilities`)"
            ) from exc
    finally:
        close = getattr(conn, "close", None)
        if close is not None:
            close()
