"""The argument parser of the ``virtdriver`` command.

Options that stand for config options are parsed as text here and checked
by the option's own type in :mod:`virtdriver.conf.overrides`, so the
command line accepts exactly what a config file does.  Each command gets
only the options it reads; which ``report`` options apply to which driver
is checked in :mod:`.checks`.
"""

from __future__ import annotations

import argparse

from virtdriver.cli.errors import EXIT_STATUSES
from virtdriver.cli.parser_options import (
    add_cpu_map, add_debug, add_driver_selection, add_globals,
    add_host_options, add_pinning_options, add_text_or_json,
    add_traits_driver, port_number)
from virtdriver.cli.usage import Parser



def _add_report(commands) -> None:
    report_cmd = commands.add_parser(
        "report", help="the provider tree this host offers schedulers",
        description="Load a driver by name (virtdriver.drivers entry "
                    "point; libvirt by default), initialise it, and show "
                    "the provider tree the resource tracker builds for "
                    "every node: inventories and traits.  --format json "
                    "gives Placement's shapes, --format dot a Graphviz "
                    "picture (--output tree.svg or tree.png renders it).  "
                    "Options that the chosen driver does not read are "
                    "refused.")
    add_driver_selection(report_cmd)
    # --format comes from the shared host options; only report draws.
    for action in report_cmd._actions:
        if action.dest == "format":
            action.choices = ("text", "json", "dot")
            action.help = ("output format (default: text); dot: the tree "
                           "as a Graphviz picture")
    report_cmd.add_argument(
        "--output", metavar="FILE",
        help="write the picture to FILE instead: *.svg or *.png rendered "
             "by Graphviz's dot (package graphviz), *.dot the DOT text")


def _add_sync(commands) -> None:
    sync_cmd = commands.add_parser(
        "sync", help="build this host's provider tree and sync it to "
                     "Placement",
        description="The main job: load the driver (as report does), "
                    "update every node with the state directory's ledger, "
                    "and make Placement equal the tree — --placement-url, "
                    "else the [placement] config section (keystone auth), "
                    "else Placement embedded in this process on SQLite in "
                    "the state directory.  Prints the tree, then per "
                    "provider what the sync changed and the request count "
                    "(a second run: \"no changes, 0 writes\"; embedded, "
                    "it does not start Placement: 0 requests).  Exit 0 "
                    "synced, 2 bad input or Placement refused a request, "
                    "3 Placement unreachable or failing (the sync is "
                    "pending; the next run catches up).")
    sync_cmd.add_argument(
        "--placement-url", metavar="URL",
        help="Placement's endpoint, e.g. http://placement:8778, with the "
             "admin token of Placement's noauth2 mode (default: the "
             "[placement] section, else embedded)")
    sync_cmd.add_argument(
        "--dry-run", action="store_true",
        help="read Placement and show what the sync would change; write "
             "nothing")
    add_driver_selection(sync_cmd)


def _add_claims(commands) -> None:
    listing = commands.add_parser(
        "claims", help="the instance claims held on this host, per cell",
        description="Every instance claim the state directory holds, per "
                    "node and NUMA cell (pinned CPUs, memory, pages), and "
                    "what they use of each provider's inventory.")
    add_driver_selection(listing)
    claim = commands.add_parser(
        "claim", help="claim NUMA resources for an instance",
        description="Fit INSTANCE.json's flavor and image onto a node's "
                    "NUMA cells and record the claim in the state "
                    "directory; with the scheduler's allocation, within "
                    "exactly the cells it names.  Exit 0 claimed, 1 "
                    "refused (the reason names the cell and what it "
                    "lacked), 2 unusable input, 3 Placement unreachable.")
    claim.add_argument("--instance", required=True, metavar="INSTANCE.json",
                       help="the instance: uuid, flavor, image, allocations "
                            "(`virtdriver help claims`)")
    claim.add_argument("--node", metavar="NAME",
                       help="the node to claim on (default: the driver's "
                            "only node)")
    scheduled = claim.add_mutually_exclusive_group()
    scheduled.add_argument(
        "--allocations", metavar="ALLOCATIONS.json",
        help="the scheduler's allocation (GET /allocations/{instance} "
             "output): pin within exactly the cells it names, or refuse")
    scheduled.add_argument(
        "--placement-url", metavar="URL",
        help="read the scheduler's allocation of the instance's uuid from "
             "this Placement (noauth2), as --allocations")
    add_driver_selection(claim)
    release = commands.add_parser(
        "release", help="release an instance's claim",
        description="Free exactly what an instance's claim took.  Exit 0 "
                    "released, 1 no such claim, 2 unusable input.")
    release.add_argument("--instance", required=True,
                         metavar="UUID|INSTANCE.json",
                         help="the instance's uuid, or its document")
    add_driver_selection(release)
    rebuild = commands.add_parser(
        "rebuild-check", help="may an instance be rebuilt with an image?",
        description="The no-op rebuild claim: would rebuilding "
                    "INSTANCE.json with IMAGE.json change its NUMA "
                    "constraints or consumption, or need traits its "
                    "allocated providers lack?  Prints {allowed, "
                    "conflicts}.  Exit 0 allowed, 1 refused, 2 unusable "
                    "input.")
    rebuild.add_argument("--instance", required=True, metavar="INSTANCE.json")
    rebuild.add_argument("--image", required=True, metavar="IMAGE.json",
                         help="the new image: {\"properties\": {...}} "
                              "(and \"disk_format\", optional)")
    source = rebuild.add_mutually_exclusive_group()
    source.add_argument("--providers", metavar="TREE.json",
                        help="the provider tree (`virtdriver report "
                             "--format json`); default: this host's")
    source.add_argument("--placement-url", metavar="URL",
                        help="read the allocations (when INSTANCE.json "
                             "has none) and the providers' traits from "
                             "this Placement (noauth2), and report whether "
                             "Placement's own in_tree+required answer "
                             "agrees")
    add_driver_selection(rebuild)
    rebuild.set_defaults(format="json")


def _add_image(commands) -> None:
    image_help = ("the image: {\"disk_format\": \"qcow2\", "
                  "\"properties\": {...}} (disk_format optional)")
    traits_cmd = commands.add_parser(
        "image-traits", help="the traits an image requires and forbids",
        description="The traits IMAGE.json's properties and disk format "
                    "imply (hw_disk_bus=scsi → COMPUTE_STORAGE_BUS_SCSI, "
                    "…; `virtdriver help claims`) and its trait: properties, each "
                    "with the property behind it, and the query Placement "
                    "accepts (required=A,B,!C).  Exit 0, 2 unusable "
                    "input (a value no trait expresses).")
    add_debug(traits_cmd)
    traits_cmd.add_argument("--image", required=True, metavar="IMAGE.json",
                            help=image_help)
    add_text_or_json(traits_cmd)
    check_cmd = commands.add_parser(
        "image-check", help="could an instance of this image boot here?",
        description="Each trait IMAGE.json implies (as image-traits), "
                    "whether the host has it and the host's evidence: "
                    "explain's for this host or --snapshot, the listing "
                    "for --providers or --placement-url (the compute "
                    "node, the tree's root).  Exit 0 yes, 1 no, 2 "
                    "unusable input, 3 libvirt or Placement unreachable.")
    check_cmd.add_argument("--image", required=True, metavar="IMAGE.json",
                           help=image_help)
    check_cmd.add_argument("--providers", metavar="TREE.json",
                           help="check the root of this provider tree "
                                "(`virtdriver report --format json`) "
                                "instead of this host")
    check_cmd.add_argument("--placement-url", metavar="URL",
                           help="check --provider in this Placement "
                                "(noauth2) instead of this host")
    check_cmd.add_argument("--provider", metavar="UUID",
                           help="the compute node of --providers (needed "
                                "when the tree has several roots) or of "
                                "--placement-url (its root is checked)")
    add_traits_driver(check_cmd)
    add_host_options(check_cmd)
    add_cpu_map(check_cmd)


def _add_action(commands, name: str, action: str, *, help: str,
                description: str, action_help: str
                ) -> argparse.ArgumentParser:
    """Command ``name`` whose one ``ACTION`` is ``action`` (``config
    sample``, ``placement serve``); returns the action's parser.  The
    chosen action is ``args.<name>_action``."""
    command = commands.add_parser(name, help=help, description=description)
    add_debug(command)
    actions = command.add_subparsers(dest=f"{name}_action", required=True,
                                     metavar="ACTION")
    parser = actions.add_parser(action, help=action_help)
    add_debug(parser)
    return parser


def _add_placement(commands) -> None:
    serve_cmd = _add_action(
        commands, "placement", "serve",
        help="the embedded Placement: serve it on loopback",
        description="`placement serve` serves the state directory's "
                    "embedded Placement (placement.sqlite, what `sync` "
                    "writes with no Placement named) on 127.0.0.1 to this "
                    "user only (every request needs the token of the run, "
                    "kept 0600 in the state directory), so `openstack "
                    "resource provider list` (osc-placement) inspects and "
                    "cleans it; it prints the commands.  sync and claim run "
                    "beside it; SIGINT or SIGTERM stops it (exit 0).  See "
                    "`virtdriver help placement`.",
        action_help="serve the embedded Placement on 127.0.0.1")
    serve_cmd.add_argument("--port", type=port_number, default=0, metavar="PORT",
                           help="port on 127.0.0.1 (default: any free one; "
                                "the URL is printed)")
    serve_cmd.add_argument("--config-file", action="append", default=[],
                           metavar="FILE", help="oslo.config file naming "
                           "[virtdriver] state_dir (repeatable)")
    serve_cmd.add_argument("--config-dir", action="append", default=[],
                           metavar="DIR", help="read DIR's *.conf files too")
    serve_cmd.set_defaults(uri=None)


def _add_placement_request(commands) -> None:
    cmd = commands.add_parser(
        "placement-request",
        help="the granular Placement request for a flavor and an image",
        description="The GET /allocation_candidates query for FLAVOR.json "
                    "and IMAGE.json on this tree's shape: a numbered group "
                    "per guest NUMA node, group_policy=isolate, traits on "
                    "the cells or the root, DISK_GB unnumbered, and what "
                    "the tree cannot express (`virtdriver help claims`).  "
                    "With "
                    "--placement-url, Placement's candidates; with "
                    "--driver (and its options, as report takes them), "
                    "also each class no provider of the node can ever "
                    "hold (why it can offer no candidate).  Exit 0, 2 "
                    "unusable input, 3 Placement unreachable.")
    cmd.add_argument("--flavor", required=True, metavar="FLAVOR.json",
                     help="{\"vcpus\", \"memory_mb\", \"extra_specs\", "
                          "\"root_gb\", \"ephemeral_gb\", \"swap\"}")
    cmd.add_argument("--image", required=True, metavar="IMAGE.json",
                     help="{\"disk_format\": \"qcow2\", \"properties\": "
                          "{...}} (disk_format optional)")
    cmd.add_argument("--placement-url", metavar="URL",
                     help="send the request to this Placement (noauth2) "
                          "and print its candidates")
    cmd.add_argument("--limit", type=int, metavar="N",
                     help="ask for at most N candidates")
    cmd.add_argument("--node", metavar="NAME",
                     help="with --driver: the node whose providers are "
                          "checked (default: the driver's only node)")
    add_driver_selection(cmd)
    # No host is read unless a driver is named (--driver, or an option
    # of one: then libvirt, as elsewhere).
    cmd.set_defaults(driver=None)


def _add_node_status(commands) -> None:
    """``disable NODE [--reason TEXT]`` and ``enable NODE``."""
    for name, help_text in (
            ("disable", "disable a node: COMPUTE_STATUS_DISABLED on its "
                        "root, kept until `enable`"),
            ("enable", "enable a node disabled with `disable`")):
        cmd = commands.add_parser(
            name, help=help_text,
            description=f"{help_text[0].upper()}{help_text[1:]}.  Recorded "
                        "in the state directory; the next `sync` or agent "
                        "cycle applies it.  Exit 0 done, 2 not a node of "
                        "the driver.")
        cmd.add_argument("node", metavar="NODE", help="the node's name")
        if name == "disable":
            cmd.add_argument("--reason", metavar="TEXT",
                             help="why (shown by report and explain)")
        add_driver_selection(cmd, output=False)


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the ``virtdriver`` command."""
    parser = Parser(
        prog="virtdriver",
        description="Virt-driver plugin framework tools.  Exit status: "
                    + ", ".join(f"{status} {meaning}"
                                for status, meaning in EXIT_STATUSES)
                    + "; `virtdriver help exit-codes`.")
    add_globals(parser)
    commands = parser.add_subparsers(dest="command", required=True,
                                     metavar="COMMAND")
    host_cmd = commands.add_parser(
        "host", help="what libvirt says this host is, and its traits",
        description="Read libvirt's host and domain capabilities, show the "
                    "parsed model and the traits derived from it.")
    add_host_options(host_cmd)
    add_cpu_map(host_cmd)
    explain_cmd = commands.add_parser(
        "explain", help="explain why traits are or are not on this host",
        description="For each TRAIT, on each provider of the node that "
                    "has it (the compute node, its NUMA cells): asserted, "
                    "unasserted, unknown, not ours, provider config, not "
                    "owned: dropped or invalid, in one sentence, with the "
                    "evidence.  With no TRAIT: a table of every trait the "
                    "driver owns or a provider config file names, one row "
                    "per provider and trait, one line of evidence each.")
    explain_cmd.add_argument("traits", nargs="*", metavar="TRAIT")
    explain_cmd.add_argument(
        "--provider", metavar="NAME",
        help="only this provider of the node (the compute node's name, or "
             "a NUMA cell's, e.g. HOST_NUMA0)")
    explain_cmd.add_argument(
        "--status", action="append", metavar="STATUS[,STATUS]",
        help="only these statuses (repeatable): asserted, unasserted, "
             "unknown, owned-not-derived, provider-config, "
             "not-owned-dropped, invalid, not-ours")
    explain_cmd.add_argument(
        "--family", action="append", metavar="FAMILY[,FAMILY]",
        help="only traits of these families (repeatable), e.g. "
             "'cpu features'")
    add_traits_driver(explain_cmd)
    add_host_options(explain_cmd)
    add_cpu_map(explain_cmd)
    drivers_cmd = commands.add_parser(
        "drivers", help="list installed virt drivers and whether they load",
        description="Every driver registered in the virtdriver.drivers "
                    "entry-point namespace: its target, the distribution "
                    "and version providing it, and ok (it was constructed "
                    "here, as `report --driver NAME` with no options "
                    "would construct it) or why it cannot be.  Exit status "
                    "0 even when some do not load.")
    add_debug(drivers_cmd)
    add_text_or_json(drivers_cmd)
    snapshot_cmd = commands.add_parser(
        "snapshot", help="record what the driver reads from this host",
        description="Record host capabilities, every domain capabilities "
                    "document the driver would read (the guest options "
                    "decide which), the online CPU map, versions and node "
                    "devices into a directory that --snapshot replays; "
                    "format in `virtdriver help snapshots`.")
    snapshot_cmd.add_argument("-o", "--output", required=True, metavar="DIR",
                              help="directory to write: a new one (created),"
                                   " an empty one, or an earlier snapshot "
                                   "to replace; written whole or not at all")
    add_host_options(snapshot_cmd, replay=False, output=False)
    _add_report(commands)
    _add_sync(commands)
    _add_claims(commands)
    _add_image(commands)
    _add_placement_request(commands)
    agent_cmd = commands.add_parser(
        "agent", help="sync every --interval seconds, as a compute service",
        description="Update and sync (as `virtdriver sync`) every "
                    "--interval seconds, with one driver, tracker and "
                    "Placement client kept between cycles; one log line per "
                    "cycle.  SIGHUP reloads the config files at the next "
                    "cycle; SIGTERM/SIGINT stop cleanly (exit 0).  --once: "
                    "one cycle, exit 0 ok, 2 bad input, 3 Placement or "
                    "libvirt unreachable.  See `virtdriver help agent`.")
    agent_cmd.add_argument(
        "--placement-url", metavar="URL",
        help="as for sync (default: the [placement] section, else embedded)")
    agent_cmd.add_argument("--interval", type=float, default=60.0,
                           metavar="SECONDS",
                           help="seconds between cycle starts (default: 60)")
    agent_cmd.add_argument("--once", action="store_true",
                           help="one cycle; exit with its status")
    add_driver_selection(agent_cmd, output=False)
    sample_cmd = _add_action(
        commands, "config", "sample",
        help="configuration tools: an annotated sample",
        description="`config sample` writes every option virtdriver reads, "
                    "commented out at its default with its help, through "
                    "oslo.config's sample generator (as "
                    "`oslo-config-generator --namespace virtdriver`).",
        action_help="write an annotated sample configuration file")
    sample_cmd.add_argument("-o", "--output", metavar="FILE",
                            help="write it to FILE (default: stdout)")
    _add_placement(commands)
    _add_node_status(commands)
    help_cmd = commands.add_parser(
        "help", help="print a document installed with virtdriver",
        description="With no TOPIC, list the documents; with one, print "
                    "it (the Markdown of the project's TOPIC.md).  "
                    "Messages that send you to a document name its topic.")
    add_debug(help_cmd)
    help_cmd.add_argument("topic", nargs="?", metavar="TOPIC",
                          help="e.g. configuration, exit-codes, claims")
    completion_cmd = commands.add_parser(
        "completion", help="print a shell completion script",
        description="Print a completion script for SHELL, generated from "
                    "this parser: commands, their options and the choices "
                    "of their values.  Load it with `source <(virtdriver "
                    "completion bash)`.")
    add_debug(completion_cmd)
    completion_cmd.add_argument("shell", choices=("bash",), metavar="SHELL",
                                help="the shell: bash")
    diff_cmd = commands.add_parser(
        "diff", help="what changes from host reading A to B (an upgrade)",
        description="Build the provider tree and traits of A and B — each "
                    "a snapshot directory (replayed as --snapshot is) or "
                    "`live` (this host's libvirt, as report reads it) — "
                    "and show what changes from A to B: providers added or "
                    "removed, inventories (old -> new), and traits flipped "
                    "with the evidence on both sides.  Exit 0 no "
                    "differences, 1 differences, 2 bad input.")
    diff_cmd.add_argument("a", metavar="A", help="snapshot DIR or `live`")
    diff_cmd.add_argument("b", metavar="B", help="snapshot DIR or `live`")
    diff_cmd.add_argument("--flat", action="store_true",
                          help="everything on the root provider instead of "
                               "one child per NUMA cell")
    add_host_options(diff_cmd, replay=False)
    add_pinning_options(diff_cmd)
    return parser
