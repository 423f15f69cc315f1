"""The ``virtdriver`` command: parse arguments, call the library, render."""

from __future__ import annotations

import argparse
import socket
import pathlib
import sys
import tempfile
from collections.abc import Callable, Sequence
from typing import TextIO, TypeVar

import libvirt

from virtdriver import render
from virtdriver.capabilities import CapabilityXMLError
from virtdriver.capabilities.traits.config import CPU_MODES, TraitConfig
from virtdriver.capabilities.traits.explain import explain
from virtdriver.conf.overrides import (
    override_guest_options, override_pinning_options)
from virtdriver.drivers.base import DriverError
from virtdriver.conf import (
    ConfigError, make_conf, parse_machine_types, trait_config)
from virtdriver.drivers.libvirt.connection import (
    LibvirtConnectionError,
    URIChoice,
    open_connection,
)
from virtdriver.drivers.libvirt.cpu_map_loader import (
    DEFAULT_CPU_MAP_DIR, load_cpu_map)
from virtdriver.drivers.libvirt.host import (
    CapabilitySource, read_host)
from virtdriver.drivers.libvirt.recorder import record_host
from virtdriver.drivers.libvirt.traits import trait_report
from virtdriver import fakelibvirt
from virtdriver.fakelibvirt.snapshot import (
    SnapshotError, read_snapshot, write_snapshot)
from virtdriver.fakelibvirt.swap import use_fakelibvirt
from virtdriver.resource_tracker.tracker import ResourceTracker
from virtdriver.drivers.loader import available_drivers, load_driver

#: Exit status for input the user or the host got wrong (bad XML, no libvirt).
EXIT_FAILURE = 2

T = TypeVar("T")
Opener = Callable[[str | None], tuple[CapabilitySource, URIChoice]]


def _csv(text: str) -> tuple[str, ...]:
    return tuple(part.strip() for part in text.split(",") if part.strip())


def _machine_types(text: str) -> tuple[tuple[str, str], ...]:
    try:
        return parse_machine_types(_csv(text))
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _add_host_options(parser: argparse.ArgumentParser, *,
                      replay: bool = True) -> None:
    parser.add_argument("--uri", help="libvirt URI to open (default: "
                        "qemu:///system if a daemon answers, else "
                        "qemu:///embed if the QEMU driver is installed, "
                        "else test:///default)")
    parser.add_argument("--format", choices=("text", "json"), default="text",
                        help="output format (default: text)")
    if replay:
        parser.add_argument("--snapshot", metavar="DIR",
                            help="replay a host snapshot (`virtdriver "
                            "snapshot -o DIR`, or a hand-written directory) "
                            "through fakelibvirt instead of reading libvirt")
    parser.add_argument("--config-file", action="append", default=[],
                        metavar="FILE", help="oslo.config file to read "
                        "(repeatable; later files win); the options below "
                        "override it")
    group = parser.add_argument_group(
        "guest configuration", "OpenStack-shaped options that decide which "
        "traits the host offers")
    group.add_argument("--virt-type", metavar="TYPE",
                       help="[libvirt] virt_type (default: kvm when libvirt "
                       "offers it for the host arch, else qemu)")
    group.add_argument("--cpu-mode", choices=CPU_MODES,
                       help="[libvirt] cpu_mode (default: host-model for "
                       "kvm and qemu)")
    group.add_argument("--cpu-models", type=_csv, default=None, metavar="A,B",
                       help="[libvirt] cpu_models, for --cpu-mode custom")
    group.add_argument("--cpu-model-extra-flags", type=_csv, default=None,
                       metavar="+F,-G", help="[libvirt] cpu_model_extra_flags;"
                       " write --cpu-model-extra-flags=-flag for a removal")
    group.add_argument("--hw-machine-type", type=_machine_types, default=None,
                       metavar="ARCH=MACHINE,...",
                       help="[libvirt] hw_machine_type")
    group.add_argument("--image-type-exclude-list", type=_csv, default=None,
                       metavar="raw,...",
                       help="[compute] image_type_exclude_list")
    pinning = parser.add_argument_group(
        "host resources", "[compute] options for CPU pinning and "
        "reservations (override the config file; used by `report`)")
    pinning.add_argument("--cpu-dedicated-set", metavar="SPEC",
                         help="[compute] cpu_dedicated_set, e.g. 4-15,^8")
    pinning.add_argument("--cpu-shared-set", metavar="SPEC",
                         help="[compute] cpu_shared_set, e.g. 0-3")
    pinning.add_argument("--reserved-host-memory-mb", type=int,
                         metavar="MIB",
                         help="[compute] reserved_host_memory_mb")
    pinning.add_argument("--reserved-huge-pages", action="append",
                         metavar="node:N,size:KIB,count:C",
                         help="[compute] reserved_huge_pages (repeatable)")
    group.add_argument("--cpu-map", default=str(DEFAULT_CPU_MAP_DIR),
                       metavar="DIR", help="libvirt's CPU map (default: "
                       "%(default)s)")


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the ``virtdriver`` command."""
    parser = argparse.ArgumentParser(
        prog="virtdriver",
        description="Virt-driver plugin framework tools.")
    commands = parser.add_subparsers(dest="command", required=True,
                                     metavar="COMMAND")
    host_cmd = commands.add_parser(
        "host", help="what libvirt says this host is, and its traits",
        description="Read libvirt's host and domain capabilities, show the "
                    "parsed model and the traits derived from it.")
    _add_host_options(host_cmd)
    explain_cmd = commands.add_parser(
        "explain", help="explain why traits are or are not on this host",
        description="For each TRAIT: asserted, unasserted, unknown, not "
                    "ours or invalid, in one sentence, with the evidence.")
    explain_cmd.add_argument("traits", nargs="+", metavar="TRAIT")
    _add_host_options(explain_cmd)
    drivers_cmd = commands.add_parser(
        "drivers", help="list installed virt drivers and whether they load",
        description="Every driver registered in the virtdriver.drivers "
                    "entry-point namespace: its target, the distribution "
                    "and version providing it, and ok or why it does not "
                    "load.  Exit status 0 even when some do not load.")
    drivers_cmd.add_argument("--format", choices=("text", "json"),
                             default="text",
                             help="output format (default: text)")
    snapshot_cmd = commands.add_parser(
        "snapshot", help="record what the driver reads from this host",
        description="Record host capabilities, every domain capabilities "
                    "document the driver would read (the guest options "
                    "decide which), the CPU map, versions and node devices "
                    "into a directory that --snapshot replays; format in "
                    "docs/snapshots.md.")
    snapshot_cmd.add_argument("-o", "--output", required=True, metavar="DIR",
                              help="directory to write (created)")
    _add_host_options(snapshot_cmd, replay=False)
    report_cmd = commands.add_parser(
        "report", help="the provider tree this host offers schedulers",
        description="Load a driver by name (virtdriver.drivers entry "
                    "point; libvirt by default), initialise it, and show "
                    "the provider tree the resource tracker builds for "
                    "every node: inventories and traits.  --format json "
                    "gives Placement's shapes.")
    report_cmd.add_argument("--driver", default="libvirt",
                          help="driver name (default: libvirt; see "
                               "`virtdriver drivers`)")
    report_cmd.add_argument("--host-spec", default="small", metavar="SPEC",
                          help="fake driver: a preset (small, numa2-ht, "
                               "numa4-large) or a YAML/JSON file")
    report_cmd.add_argument("--inventory", metavar="FILE",
                          help="ironic driver: the node inventory file")
    report_cmd.add_argument("--flat", action="store_true",
                          help="everything on the root provider instead of "
                               "one child per NUMA cell")
    _add_host_options(report_cmd)
    return parser


def main(argv: Sequence[str] | None = None, *,
         opener: Opener = open_connection) -> int:
    """Run the command line ``argv``; return the exit status."""
    args = build_parser().parse_args(argv)
    if args.command == "drivers":
        return run_drivers(args.format)
    try:
        conf = make_conf(config_files=args.config_file)
        config = trait_config(
            conf, virt_type=args.virt_type, cpu_mode=args.cpu_mode,
            cpu_models=args.cpu_models,
            cpu_model_extra_flags=args.cpu_model_extra_flags,
            machine_types=args.hw_machine_type,
            image_type_exclude_list=args.image_type_exclude_list)
    except ConfigError as exc:
        print(f"virtdriver: {exc}", file=sys.stderr)
        return EXIT_FAILURE
    args.uri = args.uri or conf.libvirt.connection_uri or None
    if getattr(args, "snapshot", None):
        return replay_snapshot(args, conf, config)
    return run_host_command(args, conf, config, opener)


def replay_snapshot(args: argparse.Namespace, conf, config: TraitConfig
                    ) -> int:
    """Run the command against a snapshot, through fakelibvirt, with the
    real driver code."""
    try:
        documents = read_snapshot(args.snapshot)
    except SnapshotError as exc:
        print(f"virtdriver: {exc}", file=sys.stderr)
        return EXIT_FAILURE
    # The URI names the directory, so evidence says where facts came from.
    name = f"snapshot{pathlib.Path(args.snapshot).resolve()}"
    fakelibvirt.register_host(name, documents)
    uri = f"fake:///{name}"
    reason = f"replaying snapshot {args.snapshot}"
    try:
        with use_fakelibvirt() as fake:
            args.uri = uri
            return run_host_command(
                args, conf, config,
                lambda _uri: (fake.open(uri), URIChoice(uri, reason)))
    finally:
        fakelibvirt.unregister_host(name)


def run_host_command(args: argparse.Namespace, conf, config: TraitConfig,
                     opener: Opener) -> int:
    """``report``, ``explain``, ``tree`` or ``snapshot`` on one host."""
    if args.command == "report":
        override_guest_options(conf, config)
        override_pinning_options(conf, vars(args))
        return run_report(args, conf)
    if args.command == "snapshot":
        return run_snapshot(args, config, opener=opener)
    return run_command(args, config, opener=opener)


def run_snapshot(args: argparse.Namespace, config: TraitConfig, *,
                 opener: Opener, out: TextIO | None = None,
                 err: TextIO | None = None) -> int:
    """Record the host into ``args.output``."""
    out = out or sys.stdout
    err = err or sys.stderr
    recorded = _read(args.uri, opener, err,
                     lambda conn, uri: record_host(conn, uri, config))
    if isinstance(recorded, int):
        return recorded
    documents, choice = recorded
    manifest = write_snapshot(args.output, documents, choice.uri)
    out.write(f"recorded {choice.uri} ({choice.reason}) into {manifest.parent}:"
              f" host capabilities, {len(documents.domain_capabilities)} "
              f"domain capabilities document(s), "
              f"{len(documents.domain_capabilities_errors)} refused, "
              f"{len(documents.node_devices)} node device(s)\n")
    return 0


def run_report(args: argparse.Namespace, conf, out: TextIO | None = None,
             err: TextIO | None = None) -> int:
    """Build and show the provider tree of every node of the driver."""
    out = out or sys.stdout
    err = err or sys.stderr
    kwargs: dict[str, object] = {"conf": conf}
    # The in-tree drivers' own arguments; other drivers get conf only.
    if args.driver in ("libvirt", "fake"):
        kwargs["nested"] = not args.flat
    if args.driver == "libvirt":
        kwargs["uri"] = args.uri
    elif args.driver == "fake":
        kwargs["host"] = args.host_spec
    elif args.driver == "ironic":
        kwargs["inventory_path"] = args.inventory
    try:
        driver = load_driver(args.driver, **kwargs)
        driver.init_host(socket.gethostname())
        # A report starts from an empty tree: no ledger worth keeping.
        with tempfile.TemporaryDirectory() as scratch:
            tracker = ResourceTracker(driver, state_dir=pathlib.Path(scratch),
                                      driver_name=args.driver)
            tracker.update_all()
        tree = tracker.tree
    except DriverError as exc:
        print(f"virtdriver: {exc}", file=err)
        return EXIT_FAILURE
    if args.format == "text":
        for node in driver.get_available_nodes():
            facts = driver.node_capabilities(node).facts
            if "uri" in facts:
                out.write(f"libvirt URI: {facts['uri']}\n"
                          f"  why: {facts.get('uri_reason', '')}\n\n")
    out.write(render.render_tree(tree, args.format))
    return 0


def run_drivers(fmt: str, out: TextIO | None = None) -> int:
    """List every installed driver, those that fail to load included."""
    (out or sys.stdout).write(render.render_drivers(available_drivers(), fmt))
    return 0


def run_command(args: argparse.Namespace, config: TraitConfig, *,
                opener: Opener, out: TextIO | None = None,
                err: TextIO | None = None) -> int:
    """Read the host (via ``opener``), derive traits, print the answer."""
    out = out or sys.stdout
    err = err or sys.stderr
    reading = _read(args.uri, opener, err,
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


def _read(uri: str | None, opener: Opener, err: TextIO,
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


if __name__ == "__main__":
    sys.exit(main())
