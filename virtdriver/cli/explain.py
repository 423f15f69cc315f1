"""``virtdriver explain``: why each trait is or is not on a node.

The answers come from a :class:`TraitReport` and the operator's provider
config files, whichever driver gave the report: libvirt's is read in
:mod:`.host` (its CPU map, a snapshot replayed); any other driver's —
anything ``--driver`` loads that reports trait evidence — through
:func:`driver_node`, the node ``report`` would build.
"""

from __future__ import annotations

import argparse
import logging
import shutil
import sys
from collections.abc import Collection
from dataclasses import dataclass
from typing import TextIO

from virtdriver.capabilities.traits.derive import TraitReport
from virtdriver.capabilities.traits.explain import (
    INVALID, ConfigSource, Explanation, explain, explain_all, parse_statuses,
    select)
from virtdriver.capabilities.traits.ownership import Ownership
from virtdriver.cli.errors import EXIT_FAILURE, CommandError
from virtdriver.provider_config import (
    EVERY_COMPUTE_NODE, ProviderConfigError, check_ownership, load_directory)
from virtdriver.render.explain import (
    DEFAULT_WIDTH, render_explanation_table, render_explanations)

LOG = logging.getLogger(__name__)


@dataclass(frozen=True)
class NodeTraits:
    """One node's trait report and the provider config traits for it.

    Attributes:
        label: the node, in words (``node 'cmp1' of driver 'example'``).
        report: the driver's trait report for the node.
        configured: trait → the provider config line naming it.
        status: ``node N: disabled since …`` when an operator disabled
            the node (``virtdriver disable``), else empty.
    """

    label: str
    report: TraitReport
    configured: dict[str, ConfigSource]
    status: str = ""


def run_explain(args: argparse.Namespace, node: NodeTraits,
                families: Collection[str], out: TextIO) -> int:
    """Write the answers for ``args.traits`` (all, when none), filtered
    by ``--status`` and ``--family`` (one of ``families``)."""
    statuses, chosen = explain_filters(args, families)
    if args.traits:
        answers = [explain(t, node.report, node.configured)
                   for t in args.traits]
    else:
        answers = explain_all(node.report, node.configured)
    answers = select(answers, statuses=statuses, families=chosen)
    if node.status and args.format != "json":
        out.write(node.status)
    out.write(explanations(answers, args, out))
    # A name that is no trait is bad input, even beside good ones.
    invalid = [a.trait for a in answers if a.status == INVALID]
    if args.traits and invalid:
        print(f"virtdriver: {', '.join(invalid)}: not a trait name; "
              "check the spelling (an os-traits name or CUSTOM_...)",
              file=sys.stderr)
        return EXIT_FAILURE
    return 0


def run_driver_explain(args: argparse.Namespace, conf,
                       out: TextIO | None = None) -> int:
    """``explain --driver NAME`` for a driver other than libvirt: the
    answers from its node's trait report (:func:`driver_node`)."""
    node = driver_node(args, conf)
    return run_explain(args, node, report_families(node.report),
                       out or sys.stdout)


def explain_filters(args: argparse.Namespace, families: Collection[str]
                    ) -> tuple[frozenset[str], frozenset[str]]:
    """``--status`` and ``--family`` of ``explain``, checked against the
    statuses and the driver's trait ``families``.

    Raises:
        CommandError: a status or family that does not exist.
    """
    try:
        statuses = parse_statuses(args.status or ())
    except ValueError as exc:
        raise CommandError(str(exc)) from None
    known = {family.lower(): family for family in families}
    chosen = set()
    for value in args.family or ():
        for name in filter(None, (p.strip() for p in value.split(","))):
            if name.lower() not in known:
                raise CommandError(
                    f"--family {name!r} is not a trait family of the "
                    f"{getattr(args, 'driver', 'libvirt')} driver; use one "
                    "of: " + ", ".join(sorted(known.values(), key=str.lower)))
            chosen.add(name)
    return statuses, frozenset(chosen)


def explanations(answers: list[Explanation], args: argparse.Namespace,
                 out: TextIO) -> str:
    """Paragraphs for the traits named, else the table (as wide as the
    terminal, 100 columns in a pipe)."""
    if args.traits:
        return render_explanations(answers, args.format)
    width = DEFAULT_WIDTH
    isatty = getattr(out, "isatty", None)
    if isatty is not None and isatty():
        width = shutil.get_terminal_size((width, 24)).columns
    return render_explanation_table(answers, args.format, width=width)


def configured_traits(conf, ownership: Ownership, nodename: str,
                      uuid: str | None) -> dict[str, ConfigSource]:
    """The traits ``[compute] provider_config_location`` names for the
    compute node ``nodename`` (root provider ``uuid``, when known), each
    with the line naming it.

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
    entry, how = found.by_uuid.get(uuid) if uuid else None, "by uuid"
    if entry is None:
        entry, how = found.by_name.get(nodename), "by name"
    if entry is None:
        entry, how = found.compute_node, EVERY_COMPUTE_NODE
    if entry is None:
        return {}
    provider = f"compute node {nodename!r} ({how})"
    return {trait: ConfigSource(source.path, source.line, source.entry,
                                provider)
            for trait, source in entry.traits.items()}


def driver_node(args: argparse.Namespace, conf) -> NodeTraits:
    """``args.driver``'s node ``args.node`` (the only one, when not
    given), loaded and built as ``report`` builds it, with its trait
    report.

    Raises:
        CommandError: no such node, several and none chosen, or a driver
            that reports no traits for it.
    """
    # Imported here: the tracker is needed only for a driver's tree.
    from virtdriver.cli.loading import chosen_node, host_tree, started_driver
    driver = started_driver(args, conf)
    tree = host_tree(driver, args.driver, conf)
    nodename = chosen_node(driver, args)
    report = driver.node_capabilities(nodename).traits
    label = f"node {nodename!r} of driver {args.driver!r}"
    if report is None:
        raise CommandError(
            f"{label} reports no traits (its node_capabilities gives "
            "traits=None), so there is no evidence to explain; explain "
            "needs a driver that reports a TraitReport")
    uuid = tree.data(nodename).uuid if tree.exists(nodename) else None
    from virtdriver.cli.disable import status_lines
    return NodeTraits(label, report, configured_traits(
        conf, report.ownership, nodename, uuid),
        status_lines(args.driver, [nodename]))


def report_families(report: TraitReport) -> frozenset[str]:
    """The families that answered in ``report``."""
    return frozenset(result.family for result in report.results.values())
