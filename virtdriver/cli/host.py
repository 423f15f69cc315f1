"""``virtdriver host`` and ``explain``: read the host, derive traits."""

from __future__ import annotations

import argparse
import logging
import pathlib
import shutil
import sys
from collections.abc import Callable
from typing import TextIO, TypeVar

import libvirt

from virtdriver import render
from virtdriver.capabilities import CapabilityXMLError
from virtdriver.capabilities.cpu_map import INDEX, CPUModelCatalog
from virtdriver.capabilities.traits.config import TraitConfig
from virtdriver.capabilities.traits.explain import (
    ConfigSource, Explanation, explain, explain_all, parse_statuses, select)
from virtdriver.capabilities.traits.ownership import Ownership
from virtdriver.capabilities.traits.registry import LIBVIRT_FAMILIES
from virtdriver.cli.errors import CommandError
from virtdriver.conf.host import host_name
from virtdriver.drivers.libvirt.connection import URIChoice
from virtdriver.drivers.libvirt.cpu_map_loader import (
    DEFAULT_CPU_MAP_DIR, load_cpu_map)
from virtdriver.drivers.libvirt.driver import node_uuid
from virtdriver.drivers.libvirt.host import CapabilitySource, read_host
from virtdriver.drivers.libvirt.traits import trait_report
from virtdriver.provider_config import (
    EVERY_COMPUTE_NODE, ProviderConfigError, check_ownership, load_directory)
from virtdriver.render.explain import DEFAULT_WIDTH

T = TypeVar("T")
Opener = Callable[[str | None], tuple[CapabilitySource, URIChoice]]

LOG = logging.getLogger(__name__)


def run_command(args: argparse.Namespace, config: TraitConfig, *,
                opener: Opener, out: TextIO | None = None,
                conf=None) -> int:
    """Read the host (via ``opener``), derive traits, print the answer.

    ``conf`` (the options) gives ``explain`` the provider config files.
    """
    out = out or sys.stdout
    if args.command == "explain":
        statuses, families = explain_filters(args)
    cpu_map = cpu_map_from(args.cpu_map)
    reading, choice = read_with(args.uri, opener,
                                lambda conn, uri: read_host(conn, uri, config))
    report = trait_report(reading, cpu_map)
    if args.command == "explain":
        configured = configured_traits(
            conf, report.ownership,
            host_name(conf, getattr(args, "recorded_host", None)))
        if args.traits:
            answers = [explain(t, report, configured) for t in args.traits]
        else:
            answers = explain_all(report, configured)
        answers = select(answers, statuses=statuses, families=families)
        out.write(explanations(answers, args, out))
    else:
        renderer = (render.render_json if args.format == "json"
                    else render.render_text)
        out.write(renderer(reading, choice.reason, report))
    return 0


def explain_filters(args: argparse.Namespace
                    ) -> tuple[frozenset[str], frozenset[str]]:
    """``--status`` and ``--family`` of ``explain``, checked.

    Raises:
        CommandError: a status or family that does not exist.
    """
    try:
        statuses = parse_statuses(args.status or ())
    except ValueError as exc:
        raise CommandError(str(exc)) from None
    known = {family.name.lower(): family.name for family in LIBVIRT_FAMILIES}
    families = set()
    for value in args.family or ():
        for name in filter(None, (p.strip() for p in value.split(","))):
            if name.lower() not in known:
                raise CommandError(
                    f"--family {name!r} is not a trait family of the "
                    "libvirt driver; use one of: "
                    + ", ".join(sorted(known.values(), key=str.lower)))
            families.add(name)
    return statuses, frozenset(families)


def explanations(answers: list[Explanation], args: argparse.Namespace,
                 out: TextIO) -> str:
    """Paragraphs for the traits named, else the table (as wide as the
    terminal, 100 columns in a pipe)."""
    if args.traits:
        return render.render_explanations(answers, args.format)
    width = DEFAULT_WIDTH
    isatty = getattr(out, "isatty", None)
    if isatty is not None and isatty():
        width = shutil.get_terminal_size((width, 24)).columns
    return render.render_explanation_table(answers, args.format, width=width)


def configured_traits(conf, ownership: Ownership, name: str | None = None
                      ) -> dict[str, ConfigSource]:
    """The traits ``[compute] provider_config_location`` names for this
    host's compute node (``name``, default ``[DEFAULT] host``), each with
    the line naming it.

    The directory is read as the next update would read it, so explain
    says what the files say now.  A refused directory is a warning: the
    update would apply and remove nothing from it.
    """
    location = conf.compute.provider_config_location if conf else None
    if not location:
        return {}
    try:
        found = load_directory(location)
        check_ownership(found, ownership)
    except (ProviderConfigError, OSError) as exc:
        LOG.warning("provider config files not used by explain: %s; until "
                    "this is fixed an update applies and removes nothing "
                    "from them", exc)
        return {}
    name = name or host_name(conf)
    uuid = node_uuid(name)
    entry, how = found.by_uuid.get(uuid), "by uuid"
    if entry is None:
        entry, how = found.by_name.get(name), "by name"
    if entry is None:
        entry, how = found.compute_node, EVERY_COMPUTE_NODE
    if entry is None:
        return {}
    provider = f"compute node {name!r} ({how})"
    return {trait: ConfigSource(source.path, source.line, source.entry,
                                provider)
            for trait, source in entry.traits.items()}


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
