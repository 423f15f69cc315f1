"""Run trait families over the inputs and collect one report."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import InitVar, dataclass, field, replace
from types import MappingProxyType
from typing import Any

from virtdriver.capabilities.traits.model import (
    DerivationInputs, InvalidTrait, TraitFamily, TraitResult, TraitState)
from virtdriver.capabilities.traits.names import invalid_reason
from virtdriver.capabilities.traits.ownership import Ownership


@dataclass(frozen=True)
class TraitReport:
    """Every owned trait's state and evidence, from one derivation.

    Attributes:
        results: trait name → :class:`TraitResult`, for every trait the
            families answered for (all static owned traits, plus dynamic
            ones found).
        ownership: the registry the families make up.
        invalid: names a family produced that are not valid trait names or
            that the family does not own; never dropped silently.

    A report built by hand is checked as :func:`derive_traits` checks
    its own: a result whose name is not a valid trait name, is not
    ``ownership``'s, or is filed under another name is moved from
    ``results`` to ``invalid`` (with its evidence), never used.
    """

    results: Mapping[str, TraitResult]
    ownership: Ownership
    invalid: tuple[InvalidTrait, ...] = ()
    _by_state: Mapping[TraitState, frozenset[str]] = field(
        init=False, repr=False, compare=False)
    #: True when the caller checked the names already (derive_traits).
    checked: InitVar[bool] = False

    def __post_init__(self, checked: bool = False) -> None:
        if not checked:
            self._check_names()
        groups: dict[TraitState, set[str]] = {s: set() for s in TraitState}
        for trait, result in self.results.items():
            groups[result.state].add(trait)
        object.__setattr__(self, "_by_state", MappingProxyType(
            {state: frozenset(names) for state, names in groups.items()}))

    def _check_names(self) -> None:
        bad: list[InvalidTrait] = []
        for name, result in self.results.items():
            reason = invalid_reason(name)
            if reason is None and result.trait != name:
                reason = f"filed under {name!r} but names {result.trait!r}"
            if reason is None and not self.ownership.owns(name):
                reason = ("not in the report's ownership, so the driver "
                          "would not own it (add it, or its prefix)")
            if reason is not None:
                bad.append(InvalidTrait(name, reason, result.family,
                                        result.evidence))
        if bad:
            gone = {b.name for b in bad}
            object.__setattr__(self, "results", MappingProxyType(
                {n: r for n, r in self.results.items() if n not in gone}))
            object.__setattr__(self, "invalid", tuple(self.invalid)
                               + tuple(bad))

    def names(self, state: TraitState) -> frozenset[str]:
        """Names of the traits in ``state``."""
        return self._by_state[state]

    @property
    def asserted(self) -> frozenset[str]:
        """Traits to set."""
        return self._by_state[TraitState.ASSERTED]

    @property
    def unasserted(self) -> frozenset[str]:
        """Owned traits to remove."""
        return self._by_state[TraitState.UNASSERTED]

    @property
    def unknown(self) -> frozenset[str]:
        """Owned traits to leave exactly as they are."""
        return self._by_state[TraitState.UNKNOWN]

    def state(self, trait: str) -> TraitState | None:
        """The state of ``trait``, or ``None`` if no family answered."""
        result = self.results.get(trait)
        return result.state if result else None

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict: traits by state, with evidence, and errors."""
        return {
            "asserted": sorted(self.asserted),
            "unknown": sorted(self.unknown),
            "unasserted": sorted(self.unasserted),
            "traits": {name: result_json(self.results[name])
                       for name in sorted(self.results)},
            "invalid": [{"name": bad.name, "reason": bad.reason,
                         "family": bad.family,
                         "evidence": [evidence_json(e) for e in bad.evidence]}
                        for bad in self.invalid],
        }


def result_json(result: TraitResult) -> dict[str, Any]:
    """One result as JSON."""
    return {"state": result.state.value, "family": result.family,
            "evidence": [evidence_json(e) for e in result.evidence]}


def evidence_json(evidence) -> dict[str, Any]:
    """One piece of evidence as JSON (``None`` fields left out)."""
    data = {"document": evidence.document, "detail": evidence.detail,
            "source": evidence.source, "element": evidence.element}
    return {key: value for key, value in data.items() if value is not None}


def derive_traits(inputs: DerivationInputs,
                  families: Iterable[TraitFamily]) -> TraitReport:
    """Derive every trait of ``families`` from ``inputs``.

    An unset virt type is chosen from the host first (see
    :meth:`TraitConfig.resolved`).  Each family answers for its own
    traits; a name that is not a valid trait, or that its family does not
    declare (so it would not be owned and could leak), is collected in
    :attr:`TraitReport.invalid` with its evidence instead of being used.

    Raises:
        ValueError: two families answered for the same trait (a bug in the
            family table, not in the input).
    """
    families = tuple(families)
    config = inputs.config.resolved(inputs.host)
    if config is not inputs.config:
        inputs = replace(inputs, config=config)
    results: dict[str, TraitResult] = {}
    invalid: list[InvalidTrait] = []
    for family in families:
        for result in family.derive(inputs):
            reason = invalid_reason(result.trait)
            if reason is None and not (result.trait in family.traits or
                                       result.trait.startswith(
                                           family.prefixes)):
                reason = (f"family {family.name!r} does not declare it, so "
                          "the driver would not own it")
            if reason:
                invalid.append(InvalidTrait(result.trait, reason,
                                            family.name, result.evidence))
                continue
            earlier = results.setdefault(result.trait, result)
            if earlier is not result:
                raise ValueError(
                    f"trait {result.trait} derived by both "
                    f"{earlier.family!r} and {family.name!r}")
    return TraitReport(MappingProxyType(dict(sorted(results.items()))),
                       Ownership.of(families), tuple(invalid), checked=True)
