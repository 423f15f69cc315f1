"""Explain any trait name in one sentence, with the evidence behind it.

:func:`explain` answers one name on one provider; :func:`explain_all`
answers every name the driver owns, derived, refused or an operator's
provider config file names, once each; :func:`select` filters answers by
status and family.  :mod:`.explain_providers` answers for every provider
of a node.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any

import os_resource_classes as orc

from virtdriver.capabilities.traits.derive import TraitReport, evidence_json
from virtdriver.capabilities.traits.model import Evidence, TraitState
from virtdriver.capabilities.traits.names import invalid_reason, is_standard
from virtdriver.capabilities.traits.ownership import Ownership

NOT_OURS = "not ours"
INVALID = "invalid"
UNANSWERED = "owned, not derived"
PROVIDER_CONFIG = "provider config"
#: Asserted by the driver's report, but outside what the driver owns on
#: the node: the tracker takes it off (``report``/``sync`` warn).
DROPPED = "not owned: dropped"

#: Where an inventory comes from, for a resource class given to explain
#: in place of a trait.
INVENTORY_SOURCES = {
    orc.DISK_GB: (
        "the libvirt driver's DISK_GB (on the compute node) is the size of "
        "the filesystem holding the state directory, or the size a "
        "replayed snapshot recorded; reserved is [compute] "
        "reserved_host_disk_mb rounded up to GiB, the allocation ratio "
        "[compute] disk_allocation_ratio (docs/configuration.md, \"Where "
        "DISK_GB comes from\")"),
}

#: Every status an explanation can have, in the order a table lists them.
STATUSES = (*(state.value for state in TraitState), UNANSWERED,
            PROVIDER_CONFIG, DROPPED, INVALID, NOT_OURS)


@dataclass(frozen=True, slots=True)
class ConfigSource:
    """Where an operator's provider config file names a trait for this
    host's compute node.

    Attributes:
        path: the file.
        line: 1-based line of the trait's list item.
        entry: index of the entry in the file's ``providers`` list.
        provider: the provider it is for, in words (``compute node
            'cmp1' ($COMPUTE_NODE)``).
    """

    path: str
    line: int
    entry: int
    provider: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line} (providers[{self.entry}])"


@dataclass(frozen=True, slots=True)
class Explanation:
    """Why a trait is (or is not) on a provider: one row of ``explain``'s
    table — provider, trait, status, family (the source that answered),
    evidence.

    Attributes:
        trait: the name asked about.
        status: one of :data:`STATUSES`.
        sentence: one sentence a person can act on.
        family: the trait family that answered, if any.
        evidence: everything behind the sentence.
        summary: the evidence in one line (a table's column).
        config: the provider config file line, for ``provider config``.
        provider: the provider's name (``None``: the node as a whole).
    """

    trait: str
    status: str
    sentence: str
    family: str | None = None
    evidence: tuple[Evidence, ...] = ()
    summary: str = ""
    config: ConfigSource | None = None
    provider: str | None = None

    def text(self) -> str:
        """The sentence, then one indented line per piece of evidence."""
        lines = [self.sentence]
        for evidence in self.evidence:
            where = ", ".join(part for part in (evidence.source,
                                                evidence.element) if part)
            lines.append(f"  - {evidence.sentence()}"
                         + (f" [{where}]" if where else ""))
        return "\n".join(lines)

    def to_json(self) -> dict[str, Any]:
        """The explanation as a JSON-ready dict."""
        data: dict[str, Any] = {
            "provider": self.provider,
            "trait": self.trait, "status": self.status,
            "sentence": self.sentence, "family": self.family,
            "summary": self.summary,
            "evidence": [evidence_json(e) for e in self.evidence]}
        if self.config is not None:
            data["provider_config"] = {
                "file": self.config.path, "line": self.config.line,
                "entry": self.config.entry, "provider": self.config.provider}
        return data


def explain(trait: str, report: TraitReport,
            configured: Mapping[str, ConfigSource] | None = None, *,
            owned: Ownership | None = None, provider: str | None = None
            ) -> Explanation:
    """Explain ``trait`` against ``report`` (see :class:`Explanation`).

    ``configured`` maps the traits operators' provider config files name
    for the provider to the line naming them; the driver's own answer
    comes first (a file cannot name a trait the driver owns).  ``owned``:
    what the driver owns on the node, as the tracker keeps it (default:
    the report's own ownership); a trait asserted outside it is
    :data:`DROPPED`.  ``provider``: the provider's name, said in the
    sentence.
    """
    found = _explain(trait, report, configured, owned,
                     trait if provider is None else f"{trait} on {provider!r}")
    return found if provider is None else replace(found, provider=provider)


def _explain(trait: str, report: TraitReport,
             configured: Mapping[str, ConfigSource] | None,
             owned: Ownership | None, head: str) -> Explanation:
    owned = owned if owned is not None else report.ownership
    result = report.results.get(trait)
    if result is not None:
        status = result.state.value
        first = result.evidence[0].sentence() if result.evidence else \
            "no evidence recorded"
        more = len(result.evidence) - 1
        summary = first + (f" (and {more} more)" if more > 0 else "")
        if result.state is TraitState.ASSERTED and not owned.owns(trait):
            return Explanation(
                trait, DROPPED, f"{head}: {DROPPED} — the driver asserts it "
                f"({summary}) but does not own it on this node, so the "
                "tracker takes it off with a warning; the driver must add "
                "it to its ownership", result.family, result.evidence,
                f"asserted but not owned, taken off — {summary}")
        return Explanation(trait, status, f"{head}: {status} — {summary}",
                           result.family, result.evidence, summary)
    for bad in report.invalid:
        if bad.name == trait:
            summary = f"produced by {bad.family} but refused — {bad.reason}"
            return Explanation(trait, INVALID, f"{head}: {summary}",
                               bad.family, bad.evidence, summary)
    reason = invalid_reason(trait)
    if reason and trait in orc.STANDARDS:
        reason = ("a resource class, not a trait: `virtdriver report` shows "
                  "the inventories"
                  + (f"; {INVENTORY_SOURCES[trait]}"
                     if trait in INVENTORY_SOURCES else ""))
    if reason:
        return Explanation(trait, INVALID, f"{head}: not a valid trait "
                           f"name — {reason}", summary=reason)
    if owned.owns(trait):
        return Explanation(trait, UNANSWERED, f"{head}: owned by this "
                           "driver, but no family derived it this time; the "
                           "tracker leaves it as it is",
                           summary="no family derived it this time")
    source = (configured or {}).get(trait)
    if source is not None:
        return Explanation(
            trait, PROVIDER_CONFIG, f"{head}: provider config — set by "
            f"provider config file {source.path} line {source.line} (entry "
            f"providers[{source.entry}]) on {source.provider}; delete that "
            "line to have the next update remove it",
            summary=f"{source} for {source.provider}", config=source)
    kind = "a standard trait" if is_standard(trait) else "a custom trait"
    return Explanation(trait, NOT_OURS, f"{head}: not ours — {kind} this "
                       "driver neither sets nor removes; whoever set it "
                       "keeps it", summary=f"{kind} this driver does not "
                       "own")


def explain_all(report: TraitReport,
                configured: Mapping[str, ConfigSource] | None = None
                ) -> list[Explanation]:
    """Every trait the driver owns or derived, every name it refused and
    every trait in ``configured``, once each, sorted by name."""
    names = set(report.results) | set(report.ownership.static)
    names |= {bad.name for bad in report.invalid}
    names |= set(configured or {})
    return [explain(name, report, configured) for name in sorted(names)]


def status_key(status: str) -> str:
    """``status`` as a filter word: lower case, words joined by ``-``
    (``owned, not derived`` → ``owned-not-derived``)."""
    return re.sub(r"[^a-z]+", "-", status.lower()).strip("-")


#: Other words accepted for a status (the issue's and shorter ones).
STATUS_ALIASES = {"owned-unasserted": TraitState.UNASSERTED.value,
                  "not-derived": UNANSWERED}


def parse_statuses(values: Iterable[str]) -> frozenset[str]:
    """The statuses ``values`` name (each a status or a comma list).

    Raises:
        ValueError: a word that is no status, naming the valid ones.
    """
    keys = {status_key(s): s for s in STATUSES}
    keys.update(STATUS_ALIASES)
    chosen = set()
    for value in values:
        for word in filter(None, (status_key(w) for w in value.split(","))):
            if word not in keys:
                raise ValueError(
                    f"--status {word!r} is not a status; use one or more of "
                    + ", ".join(status_key(s) for s in STATUSES))
            chosen.add(keys[word])
    return frozenset(chosen)


def select(answers: Iterable[Explanation], *,
           statuses: Iterable[str] = (), families: Iterable[str] = ()
           ) -> list[Explanation]:
    """The answers with one of ``statuses`` and of ``families`` (family
    names compared without case); an empty filter keeps everything."""
    statuses = frozenset(statuses)
    families = frozenset(f.lower() for f in families)
    return [a for a in answers
            if (not statuses or a.status in statuses)
            and (not families or (a.family or "").lower() in families)]
