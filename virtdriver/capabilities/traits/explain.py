"""Explain any trait name in one sentence, with the evidence behind it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from virtdriver.capabilities.traits.derive import TraitReport, evidence_json
from virtdriver.capabilities.traits.model import Evidence
from virtdriver.capabilities.traits.names import invalid_reason, is_standard

NOT_OURS = "not ours"
INVALID = "invalid"
UNANSWERED = "owned, not derived"


@dataclass(frozen=True, slots=True)
class Explanation:
    """Why a trait is (or is not) on the compute node.

    Attributes:
        trait: the name asked about.
        status: ``asserted``, ``unasserted``, ``unknown``, ``not ours``,
            ``invalid`` or ``owned, not derived``.
        sentence: one sentence a person can act on.
        family: the trait family that answered, if any.
        evidence: everything behind the sentence.
    """

    trait: str
    status: str
    sentence: str
    family: str | None = None
    evidence: tuple[Evidence, ...] = ()

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
        return {"trait": self.trait, "status": self.status,
                "sentence": self.sentence, "family": self.family,
                "evidence": [evidence_json(e) for e in self.evidence]}


def explain(trait: str, report: TraitReport) -> Explanation:
    """Explain ``trait`` against ``report`` (see :class:`Explanation`)."""
    result = report.results.get(trait)
    if result is not None:
        status = result.state.value
        first = result.evidence[0].sentence() if result.evidence else \
            "no evidence recorded"
        more = len(result.evidence) - 1
        tail = f" (and {more} more)" if more > 0 else ""
        return Explanation(trait, status,
                           f"{trait}: {status} — {first}{tail}",
                           result.family, result.evidence)
    for bad in report.invalid:
        if bad.name == trait:
            return Explanation(trait, INVALID, f"{trait}: produced by "
                               f"{bad.family} but refused — {bad.reason}",
                               bad.family, bad.evidence)
    reason = invalid_reason(trait)
    if reason:
        return Explanation(trait, INVALID,
                           f"{trait}: not a valid trait name — {reason}")
    if report.ownership.owns(trait):
        return Explanation(trait, UNANSWERED, f"{trait}: owned by this "
                           "driver, but no family derived it this time; the "
                           "tracker leaves it as it is")
    kind = "a standard trait" if is_standard(trait) else "a custom trait"
    return Explanation(trait, NOT_OURS, f"{trait}: not ours — {kind} this "
                       "driver neither sets nor removes; whoever set it "
                       "keeps it")
