"""The options several ``virtdriver`` commands share: the global ones, the
host and guest-configuration options, the driver choice and its options.

:mod:`.parser` builds each command from these; the values that stand for
config options are parsed as text here and checked by the option's own
type in :mod:`virtdriver.conf.overrides`.
"""

from __future__ import annotations

import argparse
import sys

from virtdriver.capabilities.traits.config import CPU_MODES
from virtdriver.conf.defaults import VIRT_TYPES
from virtdriver.conf.guest import parse_machine_types
from virtdriver.drivers.libvirt.cpu_map_loader import DEFAULT_CPU_MAP_DIR

DEBUG_HELP = "on an error, show the traceback too"
QUIET_HELP = ("no warnings and no progress bar on stderr (errors still "
              "print)")
LOG_FILE_HELP = ("append the log here, through oslo.log in its format "
                 "([DEFAULT] log_file; the agent's cycle lines too; "
                 "default: none, warnings and the agent's lines to stderr)")
LOG_DIR_HELP = ("write the log to DIR/virtdriver.log (or DIR/--log-file); "
                "[DEFAULT] log_dir")
JOURNAL_HELP = "log to the systemd journal too ([DEFAULT] use_journal)"
SYSLOG_HELP = "log to syslog too ([DEFAULT] use_syslog)"


def csv_list(text: str) -> tuple[str, ...]:
    return tuple(part.strip() for part in text.split(",") if part.strip())


#: The highest TCP port.
MAX_PORT = 65535


def port_number(text: str) -> int:
    """A TCP port for ``placement serve --port``: 0 (any free one) to
    65535."""
    try:
        port = int(text)
    except ValueError:
        port = None
    if port is None or not 0 <= port <= MAX_PORT:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a port; give 1 to {MAX_PORT}, or 0 for any "
            "free one")
    return port


def machine_types(text: str) -> tuple[tuple[str, str], ...]:
    try:
        return parse_machine_types(csv_list(text))
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


#: The global options: flag -> add_argument keywords.
GLOBAL_OPTIONS = {
    "--debug": {"action": "store_true", "help": DEBUG_HELP},
    "--quiet": {"action": "store_true", "help": QUIET_HELP},
    "--log-file": {"metavar": "FILE", "help": LOG_FILE_HELP},
    "--log-dir": {"metavar": "DIR", "help": LOG_DIR_HELP},
    "--use-journal": {"action": "store_true", "help": JOURNAL_HELP},
    "--use-syslog": {"action": "store_true", "help": SYSLOG_HELP},
}


def add_debug(parser: argparse.ArgumentParser) -> None:
    """The global options, accepted after the command too."""
    # SUPPRESS: given after the command it sets args.debug; not given, it
    # leaves the top-level parser's value alone.
    for option, keywords in GLOBAL_OPTIONS.items():
        parser.add_argument(option, default=argparse.SUPPRESS, **keywords)


def add_text_or_json(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--format", choices=("text", "json"),
                        default="text", help="output format (default: text)")


def version_text() -> str:
    """``virtdriver X.Y.Z`` from the installed distribution's metadata
    (``virtdriver (version unknown)`` when it is not installed)."""
    from importlib import metadata
    try:
        return f"virtdriver {metadata.version('virtdriver')}"
    except metadata.PackageNotFoundError:
        return "virtdriver (version unknown)"


class VersionAction(argparse.Action):
    """``--version``: print the version and exit 0 (read only when asked,
    so parsing stays free of package metadata)."""

    def __init__(self, option_strings, dest=argparse.SUPPRESS, **kwargs):
        super().__init__(option_strings, dest, nargs=0,
                         default=argparse.SUPPRESS, **kwargs)

    def __call__(self, parser, namespace, values, option_string=None):
        sys.stdout.write(version_text() + "\n")
        parser.exit()


def add_globals(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--version", action=VersionAction,
                        help="print virtdriver's version and exit")
    for option, keywords in GLOBAL_OPTIONS.items():
        parser.add_argument(option, **keywords)


def add_host_options(parser: argparse.ArgumentParser, *,
                      replay: bool = True, output: bool = True) -> None:
    add_debug(parser)
    parser.add_argument("--uri", help="libvirt URI to open (default: "
                        "[libvirt] connection_uri, else qemu:///system if "
                        "a daemon answers, else qemu:///embed if the QEMU "
                        "driver is installed, else test:///default)")
    if output:
        add_text_or_json(parser)
    if replay:
        parser.add_argument("--snapshot", metavar="DIR",
                            help="replay a host snapshot (`virtdriver "
                            "snapshot -o DIR`, or a hand-written directory) "
                            "through fakelibvirt instead of reading libvirt")
    parser.add_argument("--config-file", action="append", default=[],
                        metavar="FILE", help="oslo.config file to read "
                        "(repeatable; later files win; default: the first "
                        "virtdriver.conf in ~/.virtdriver, ~, "
                        "/etc/virtdriver, /etc); the options below "
                        "override it")
    parser.add_argument("--config-dir", action="append", default=[],
                        metavar="DIR", help="read DIR's *.conf files too, "
                        "in name order, after the files (repeatable; "
                        "default: the first virtdriver.conf.d found where "
                        "virtdriver.conf is searched)")
    group = parser.add_argument_group(
        "guest configuration", "OpenStack-shaped options that decide which "
        "traits the host offers")
    group.add_argument("--virt-type", metavar="TYPE",
                       help=f"[libvirt] virt_type: {', '.join(VIRT_TYPES)} "
                       "(default: kvm when libvirt offers it for the host "
                       "arch, else qemu)")
    group.add_argument("--cpu-mode", choices=CPU_MODES,
                       help="[libvirt] cpu_mode (default: host-model for "
                       "kvm and qemu)")
    group.add_argument("--cpu-models", type=csv_list, default=None, metavar="A,B",
                       help="[libvirt] cpu_models, for --cpu-mode custom")
    group.add_argument("--cpu-model-extra-flags", type=csv_list, default=None,
                       metavar="+F,-G", help="[libvirt] cpu_model_extra_flags;"
                       " write --cpu-model-extra-flags=-flag for a removal")
    group.add_argument("--hw-machine-type", type=machine_types, default=None,
                       metavar="ARCH=MACHINE,...",
                       help="[libvirt] hw_machine_type")
    group.add_argument("--image-type-exclude-list", type=csv_list, default=None,
                       metavar="raw,...",
                       help="[compute] image_type_exclude_list")


def add_cpu_map(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--cpu-map", metavar="DIR",
                        help="libvirt's CPU map directory, the one holding "
                        f"index.xml (default: {DEFAULT_CPU_MAP_DIR}, or no "
                        "map when that is missing)")


def add_pinning_options(parser: argparse.ArgumentParser) -> None:
    pinning = parser.add_argument_group(
        "host resources", "[compute] options for CPU pinning and "
        "reservations (override the config file)")
    pinning.add_argument("--cpu-dedicated-set", metavar="SPEC",
                         help="[compute] cpu_dedicated_set, e.g. 4-15,^8")
    pinning.add_argument("--cpu-shared-set", metavar="SPEC",
                         help="[compute] cpu_shared_set, e.g. 0-3")
    pinning.add_argument("--reserved-host-memory-mb", metavar="MIB",
                         help="[compute] reserved_host_memory_mb")
    pinning.add_argument("--reserved-huge-pages", action="append",
                         metavar="node:N,size:KIB,count:C",
                         help="[compute] reserved_huge_pages (repeatable)")


def add_driver_choice(parser: argparse.ArgumentParser) -> None:
    """--driver and the in-tree drivers' options that choose the host."""
    parser.add_argument("--driver", default="libvirt",
                        help="driver name (default: libvirt; see "
                             "`virtdriver drivers`)")
    parser.add_argument("--host-spec", metavar="SPEC",
                        help="fake driver: a preset (small, numa2-ht, "
                             "numa4-large) or a YAML/JSON file "
                             "(default: small)")
    parser.add_argument("--inventory", metavar="FILE",
                        help="ironic driver: the node inventory file")


def add_driver_selection(parser: argparse.ArgumentParser, *,
                          output: bool = True) -> None:
    """--driver and the in-tree drivers' own options (``report``,
    ``sync``, ``agent`` and the claims commands); ``output``: --format
    too (the agent writes log lines only, so it has none)."""
    add_driver_choice(parser)
    parser.add_argument("--flat", action="store_true",
                        help="libvirt and fake drivers: everything on "
                             "the root provider instead of one child "
                             "per NUMA cell")
    parser.add_argument("--profile", choices=("numa", "nova"),
                        help="libvirt driver: the tree's shape: numa "
                             "(default; NUMA cells as children) or nova "
                             "(Nova's flat root, no page-size inventory; "
                             "virtdriver help nova)")
    add_host_options(parser, output=output)
    add_pinning_options(parser)


def add_traits_driver(parser: argparse.ArgumentParser) -> None:
    """``explain`` and ``image-check``: the driver whose trait report
    answers, and which of its nodes."""
    add_driver_choice(parser)
    parser.add_argument("--node", metavar="NAME",
                        help="the node whose traits answer, for a driver "
                             "other than libvirt (default: the driver's "
                             "only node)")
