"""Explain the traits of every provider of a node, one row per provider
and trait.

A node's traits live on several providers: the compute node root, its
NUMA cells (``HW_NUMA_ROOT``, the CPU features), later its devices.  Each
provider follows a trait report of its own — the driver's split,
``ComputeDriver.provider_traits`` — and may get traits from an
operator's provider config file.  :func:`explain_node` answers for each
provider against its own report and file lines, so a trait is explained
where it is (``HW_NUMA_ROOT`` asserted on each cell, not "unasserted" on
the root), and a row says which provider it is about.

A row is an :class:`~.explain.Explanation`: provider, trait, status,
family (the source that answered), evidence.  A driver that adds
providers (devices) adds a :class:`ProviderTraits` with its report; no
change here.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from types import MappingProxyType

from virtdriver.capabilities.traits.derive import TraitReport
from virtdriver.capabilities.traits.explain import (
    ConfigSource, Explanation, explain)
from virtdriver.capabilities.traits.ownership import Ownership


@dataclass(frozen=True)
class ProviderTraits:
    """One provider of a node, with what explains its traits.

    Attributes:
        name: the provider's name (the root's is the node's).
        report: the trait report the provider's traits follow.
        configured: trait → the provider config file line setting it on
            this provider.
    """

    name: str
    report: TraitReport
    configured: Mapping[str, ConfigSource] = field(
        default_factory=lambda: MappingProxyType({}))


def known_names(provider: ProviderTraits) -> set[str]:
    """The names ``provider`` has something to say about: answered by its
    report, refused by it, or set by a provider config file."""
    names = set(provider.report.results) | set(provider.configured)
    names |= {bad.name for bad in provider.report.invalid}
    return names


def explain_node(providers: Sequence[ProviderTraits],
                 traits: Iterable[str] = (), *,
                 owned: Ownership | None = None,
                 unanswered_on: str | None = None,
                 node: TraitReport | None = None) -> list[Explanation]:
    """The rows for ``providers`` (root first), by provider then trait.

    With no ``traits``: every name each provider's report answers or
    refuses and each file line sets, on that provider; and, on the
    provider ``unanswered_on`` (the node's root), every name the driver
    owns that no report answers (``owned, not derived``).  With
    ``traits``: each on every provider that knows it, else once for the
    node (``not ours``, ``invalid``, …; on the provider, when there is
    one).

    ``owned``: what the driver owns on the node as the tracker keeps it
    (``ComputeDriver.ownership_for``); default each report's own.
    ``node``: the node's whole report; a name it answers that no
    provider's report has (CPU features of a host that lists no NUMA
    cell) is a row of no provider, saying so.
    """
    names_of = [(p, known_names(p)) for p in providers]
    everywhere = set().union(*(names for _, names in names_of))
    nowhere = (set(node.results) - everywhere) if node is not None else set()
    traits = list(dict.fromkeys(traits))
    if traits:
        rows = []
        for trait in traits:
            where = [p for p, names in names_of if trait in names]
            if not where and trait in nowhere:
                rows.append(_unplaced(trait, node, owned))
            elif not where:
                # Known nowhere (not ours, not a trait): an answer for the
                # node, from its root — or for the one provider asked.
                row = _row(trait, providers[0], owned)
                rows.append(row if len(providers) == 1 else explain(
                    trait, providers[0].report, providers[0].configured,
                    owned=owned))
            rows += [_row(trait, provider, owned) for provider in where]
        return rows
    rows = []
    for provider, names in names_of:
        if provider.name == unanswered_on:
            ownership = owned or provider.report.ownership
            names = names | (set(ownership.static) - everywhere - nowhere)
        rows += [_row(trait, provider, owned) for trait in sorted(names)]
    rows += [_unplaced(trait, node, owned) for trait in sorted(nowhere)]
    return rows


#: Said of a name the node's report answers that no provider follows.
ON_NO_PROVIDER = ("no provider of the node follows this answer (a host "
                  "listing no NUMA cell has none for its CPU features), "
                  "so the tracker sets and removes it nowhere")


def _unplaced(trait: str, node: TraitReport, owned: Ownership | None
              ) -> Explanation:
    found = explain(trait, node, owned=owned)
    return replace(found, sentence=f"{found.sentence}; {ON_NO_PROVIDER}",
                   summary=f"{found.summary} (on no provider)")


def _row(trait: str, provider: ProviderTraits,
         owned: Ownership | None) -> Explanation:
    return explain(trait, provider.report, provider.configured, owned=owned,
                   provider=provider.name)


def chosen(providers: Sequence[ProviderTraits], name: str | None
           ) -> list[ProviderTraits]:
    """``providers``, or only the one named ``name``.

    Raises:
        LookupError: no provider is named ``name`` (the message lists
            them).
    """
    if name is None:
        return list(providers)
    found = [p for p in providers if p.name == name]
    if not found:
        raise LookupError(", ".join(p.name for p in providers) or "none")
    return found
