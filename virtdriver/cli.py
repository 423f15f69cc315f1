"""The ``virtdriver`` command: parse arguments, call the library, render."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from typing import TextIO

import libvirt

from virtdriver import render
from virtdriver.capabilities import CapabilityXMLError
from virtdriver.drivers.libvirt.connection import (
    LibvirtConnectionError,
    URIChoice,
    open_connection,
)
from virtdriver.drivers.libvirt.host import CapabilitySource, read_host

#: Exit status for input the user or the host got wrong (bad XML, no libvirt).
EXIT_FAILURE = 2

Opener = Callable[[str | None], tuple[CapabilitySource, URIChoice]]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="virtdriver",
        description="Virt-driver plugin framework tools.")
    commands = parser.add_subparsers(dest="command", required=True,
                                     metavar="COMMAND")
    report = commands.add_parser(
        "report", help="show what libvirt says this host is",
        description="Read libvirt's host and domain capabilities and show "
                    "the parsed model.  Without --uri: qemu:///system if a "
                    "daemon answers, else qemu:///embed if the QEMU driver "
                    "is installed, else test:///default.")
    report.add_argument("--uri", help="libvirt URI to open (default: chosen "
                                      "as above)")
    report.add_argument("--format", choices=("text", "json"), default="text",
                        help="output format (default: text)")
    return parser


def main(argv: Sequence[str] | None = None, *,
         opener: Opener = open_connection) -> int:
    """Run the command line ``argv``; return the exit status."""
    args = build_parser().parse_args(argv)
    if args.command == "report":
        return report_command(args.uri, args.format, opener=opener)
    raise AssertionError(f"unhandled command {args.command!r}")


def report_command(uri: str | None, fmt: str, *, opener: Opener,
                   out: TextIO | None = None,
                   err: TextIO | None = None) -> int:
    """Open libvirt (via ``opener``), read the host, print the report."""
    out = out or sys.stdout
    err = err or sys.stderr
    try:
        conn, choice = opener(uri)
    except LibvirtConnectionError as exc:
        print(f"virtdriver: {exc}", file=err)
        return EXIT_FAILURE
    try:
        reading = read_host(conn, choice.uri)
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
    renderer = render.render_json if fmt == "json" else render.render_text
    out.write(renderer(reading, choice.reason))
    if fmt == "json":
        out.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
