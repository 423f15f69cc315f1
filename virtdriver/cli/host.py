"""``virtdriver host`` and ``explain``: read the host, derive traits."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import TextIO, TypeVar

import libvirt

from virtdriver import render
from virtdriver.capabilities import CapabilityXMLError
from virtdriver.capabilities.traits.config import TraitConfig
from virtdriver.capabilities.traits.explain import explain
from virtdriver.cli.errors import EXIT_FAILURE
from virtdriver.drivers.libvirt.connection import (
    LibvirtConnectionError, URIChoice)
from virtdriver.drivers.libvirt.cpu_map_loader import load_cpu_map
from virtdriver.drivers.libvirt.host import CapabilitySource, read_host
from virtdriver.drivers.libvirt.traits import trait_report

T = TypeVar("T")
Opener = Callable[[str | None], tuple[CapabilitySource, URIChoice]]


def run_command(args: argparse.Namespace, config: TraitConfig, *,
                opener: Opener, out: TextIO | None = None,
                err: TextIO | None = None) -> int:
    """Read the host (via ``opener``), derive traits, print the answer."""
    out = out or sys.stdout
    err = err or sys.stderr
    reading = read_with(args.uri, opener, err,
                    lambda conn, uri: read_host(conn, uri, config))
    if isinstance(reading, int):
        return reading
    reading, choice = reading
    try:
        cpu_map = load_cpu_map(args.cpu_map)
    except CapabilityXMLError as exc:
        print(f"virtdriver: libvirt's CPU map is not usable: {exc}", file=err)
        return EXIT_FAILURE
    report = trait_report(reading, cpu_map)
    if args.command == "explain":
        answers = [explain(trait, report) for trait in args.traits]
        out.write(render.render_explanations(answers, args.format))
    else:
        renderer = (render.render_json if args.format == "json"
                    else render.render_text)
        out.write(renderer(reading, choice.reason, report))
    return 0


def read_with(uri: str | None, opener: Opener, err: TextIO,
          read: Callable[[CapabilitySource, str], T]
          ) -> tuple[T, URIChoice] | int:
    """Open ``uri`` and ``read(conn, uri)``; an exit status on failure
    (the message on ``err`` says what went wrong and what to do)."""
    try:
        conn, choice = opener(uri)
    except LibvirtConnectionError as exc:
        print(f"virtdriver: {exc}", file=err)
        return EXIT_FAILURE
    try:
        return read(conn, choice.uri), choice
    except CapabilityXMLError as exc:
        print(f"virtdriver: libvirt capability XML not usable: {exc}",
              file=err)
        return EXIT_FAILURE
    except libvirt.libvirtError as exc:
        print(f"virtdriver: cannot read capabilities from {choice.uri}: "
              f"{exc.get_error_message() or exc}", file=err)
        return EXIT_FAILURE
    finally:
        close = getattr(conn, "close", None)
        if close is not None:
            close()
