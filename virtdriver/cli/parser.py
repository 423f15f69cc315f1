"""The argument parser of the ``virtdriver`` command."""

from __future__ import annotations

import argparse

from virtdriver.capabilities.traits.config import CPU_MODES
from virtdriver.conf import parse_machine_types
from virtdriver.drivers.libvirt.cpu_map_loader import DEFAULT_CPU_MAP_DIR


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
