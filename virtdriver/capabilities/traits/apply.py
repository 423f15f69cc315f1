"""Apply a trait report to a provider's current traits, touching only ours.

The rule, per provider: keep every trait we do not own; keep owned traits
whose state is unknown exactly as they are; add every asserted trait;
remove every owned trait that is unasserted — or that no family answered
for this time (an owned name the driver no longer reports, e.g. a stale
``CUSTOM_DEV_VENDORID_…``).

The tracker adds a ledger of what it set before on top of this (see the
resource tracker); drivers and tests use this pure core directly.
"""

from __future__ import annotations

from collections.abc import Iterable

from virtdriver.capabilities.traits.derive import TraitReport
from virtdriver.capabilities.traits.model import TraitState


def apply_report(current: Iterable[str], report: TraitReport) -> frozenset[str]:
    """The traits a provider should have after ``report``.

    Foreign traits (not owned) are never removed; asserted traits are always
    present afterwards; unknown ones keep their current presence.
    """
    result: set[str] = set()
    for trait in current:
        state = report.state(trait)
        if state is TraitState.UNKNOWN or not report.ownership.owns(trait):
            result.add(trait)
    return frozenset(result | report.asserted)
