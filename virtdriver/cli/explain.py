"""``virtdriver explain``: why each trait is or is not on each provider
of a node.

The answers come from the trait report each provider follows and the
operator's provider config files, whichever driver gave the reports:
libvirt's are read in :mod:`.host` (its CPU map, a snapshot replayed);
any other driver's — anything ``--driver`` loads that reports trait
evidence — through :func:`driver_node` (``provider_traits`` of the node
``report`` would build).  ``--provider NAME`` keeps one provider.
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
    INVALID, ConfigSource, Explanation, parse_statuses, select)
from virtdriver.capabilities.traits.explain_providers import (
    ProviderTraits, chosen, explain_node)
from virtdriver.capabilities.traits.ownership import Ownership
from virtdriver.cli.errors import EXIT_FAILURE, CommandError
from virtdriver.provider_config import (
    EVERY_COMPUTE_NODE, ProviderConfigError, check_ownership, load_directory)
from virtdriver.render.explain import (
    DEFAULT_WIDTH, render_explanation_table, render_explanations)

LOG = logging.getLogger(__name__)


@dataclass(frozen=True)
class Provider:
    """One provider of a node, as explain finds its provider config
    entry: by uuid, by name, or as the compute node root."""

    name: str
    uuid: str | None
    root: bool = False


@dataclass(frozen=True)
class NodeTraits:
    """One node's trait report, and its providers, each with the report
    it follows and its provider config traits.

    Attributes:
        label: the node, in words (``node 'cmp1' of driver 'example'``).
        report: the driver's trait report for the whole node (what
            ``image-check`` asks).
        configured: the root's provider config traits.
        providers: the node's providers, root first.
        owned: what the driver owns on the node as the tracker keeps it
            (``ownership_for``); ``None``: each report's own.
    """

    label: str
    report: TraitReport
    configured: dict[str, ConfigSource]
    providers: tuple[ProviderTraits, ...]
    owned: Ownership | None = None

    @property
    def name(self) -> str:
        """The root provider's name."""
        return self.providers[0].name


def run_explain(args: argparse.Namespace, node: NodeTraits,
                families: Collection[str], out: TextIO) -> int:
    """Write the answers for ``args.traits`` (all, when none), filtered
    by ``--provider``, ``--status`` and ``--family`` (one of
    ``families``)."""
    statuses, families_chosen = explain_filters(args, families)
    providers = chosen_providers(node, getattr(args, "provider", None))
    answers = explain_node(providers, args.traits, owned=node.owned,
                           unanswered_on=node.name,
                           node=None if len(providers) < len(node.providers)
                           else node.report)
    answers = select(answers, statuses=statuses, families=families_chosen)
    if args.format != "json":   # a disabled node: since when and why
        from virtdriver.cli.disable import status_lines
        out.write(status_lines(getattr(args, "driver", None) or "libvirt",
                               [node.name]))
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
    answers from its node's trait reports (:func:`driver_node`)."""
    node = driver_node(args, conf)
    families = frozenset().union(*(report_families(p.report)
                                   for p in node.providers))
    return run_explain(args, node, families, out or sys.stdout)


def chosen_providers(node: NodeTraits, name: str | None
                     ) -> list[ProviderTraits]:
    """The node's providers, or only ``--provider name``.

    Raises:
        CommandError: the node has no provider ``name`` (the message
            lists those it has).
    """
    try:
        return chosen(node.providers, name)
    except LookupError as exc:
        raise CommandError(
            f"--provider {name!r}: {node.label} has no such provider; give "
            f"one of: {exc.args[0]}") from None


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


def configured_traits(conf, ownership: Ownership,
                      providers: list[Provider]
                      ) -> dict[str, dict[str, ConfigSource]]:
    """Per provider name, the traits ``[compute]
    provider_config_location`` names for it, each with the line naming
    it: the entry naming the provider's uuid, else its name, else — for
    the compute node root — ``$COMPUTE_NODE``'s.

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
    configured = {}
    for provider in providers:
        entry, how = (found.by_uuid.get(provider.uuid) if provider.uuid
                      else None), "by uuid"
        if entry is None:
            entry, how = found.by_name.get(provider.name), "by name"
        if entry is None and provider.root:
            entry, how = found.compute_node, EVERY_COMPUTE_NODE
        if entry is None:
            continue
        kind = "compute node" if provider.root else "provider"
        where = f"{kind} {provider.name!r} ({how})"
        configured[provider.name] = {
            trait: ConfigSource(source.path, source.line, source.entry,
                                where)
            for trait, source in entry.traits.items()}
    return configured


def node_traits(label: str, report: TraitReport,
                reports: dict[str, TraitReport], providers: list[Provider],
                conf, owned: Ownership | None = None) -> NodeTraits:
    """A :class:`NodeTraits` of the node's ``report``, ``reports``
    (provider name → the report it follows, root first) and the provider
    config files: a provider the files name but no report covers (one
    someone else made) is explained too, with no evidence of its own."""
    configured = configured_traits(conf, owned or report.ownership,
                                   providers)
    empty = TraitReport({}, report.ownership)
    root = providers[0].name
    return NodeTraits(label, report, configured.get(root, {}), tuple(
        ProviderTraits(p.name, reports.get(p.name, empty),
                       configured.get(p.name, {}))
        for p in providers if p.name in reports or p.name in configured),
        owned)


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
    reports = dict(driver.provider_traits(nodename)) or {nodename: report}
    return node_traits(label, report, reports,
                       tree_providers(tree, nodename, reports), conf,
                       driver.ownership_for(nodename))


def tree_providers(tree, nodename: str, reports: dict[str, TraitReport]
                   ) -> list[Provider]:
    """The providers of ``nodename``'s tree in ``tree`` (parents first),
    then any in ``reports`` the tree lacks."""
    found = []
    if tree.exists(nodename):
        root = tree.record(nodename).uuid
        found = [Provider(record.name, record.uuid, record.uuid == root)
                 for record in (tree.record(uuid) for uuid in
                                tree.get_provider_uuids(nodename))]
    names = {p.name for p in found}
    found += [Provider(name, None, not found and name == nodename)
              for name in reports if name not in names]
    return found


def report_families(report: TraitReport) -> frozenset[str]:
    """The families that answered in ``report``."""
    return frozenset(result.family for result in report.results.values())
