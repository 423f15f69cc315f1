"""Owned-trait reconciliation and drift, as pure functions.

The rule, per provider (``docs/resource-tracker.md``)::

    owned = driver's static names ∪ names under its prefixes
            ∪ (ledger ∩ the driver's namespace)
    new   = (current − owned) ∪ (current ∩ unknown) ∪ asserted

Foreign traits (not owned) are never removed; asserted traits are always
present afterwards; traits whose state is unknown keep their presence.
Ledger entries outside the namespace are ignored (reported, never acted
on), so a tampered ledger cannot delete a foreign trait.

:func:`reconcile` is the rule with a full report (asserted and unknown
sets).  :func:`settle` is what the tracker runs after a driver has
updated a provider with its own report: the driver's result stands for the
names the driver owns on that node, and :func:`reconcile` decides
everything else — foreign traits as they were before, stale names found
only through the ledger removed.  :func:`drift` says what others changed
on owned traits since the last update.

:func:`settle_self_set` is the rule for a node whose driver declares no
ownership (Nova's drivers): the driver owns exactly the traits it set
itself — added by one of its updates, and recorded in the ledger with a
proof (:meth:`~.ledger.Ledger.proven`) — so it may remove those, and a
trait it removes that it cannot be proved to have set is put back.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from virtdriver.capabilities.traits.ownership import Ownership

_EMPTY: frozenset[str] = frozenset()


@dataclass(frozen=True)
class Reconciliation:
    """One provider's traits after reconciliation.

    Attributes:
        traits: what the provider should have.
        owned: the names treated as owned (present before or after).
        ignored_ledger: ledger entries outside the namespace: a tampered or
            stale ledger; never acted on.
    """

    traits: frozenset[str]
    owned: frozenset[str]
    ignored_ledger: frozenset[str] = _EMPTY


def owner(ownership: Ownership, ledger: Iterable[str] = (),
          namespace: Ownership | None = None) -> Callable[[str], bool]:
    """The predicate "owned": by ``ownership``, or listed in ``ledger``
    and inside ``namespace`` (default: ``ownership`` itself)."""
    namespace = namespace or ownership
    trusted = frozenset(t for t in ledger if namespace.owns(t))
    return lambda trait: ownership.owns(trait) or trait in trusted


def reconcile(current: Iterable[str], asserted: Iterable[str], *,
              ownership: Ownership, unknown: Iterable[str] = (),
              ledger: Iterable[str] = (),
              namespace: Ownership | None = None) -> Reconciliation:
    """Apply the ownership rule (module doc) to one provider.

    Args:
        current: the provider's traits now.
        asserted: traits the driver says are true.
        ownership: what the driver owns on this provider's node.
        unknown: owned traits the driver could not decide this time.
        ledger: traits the tracker set on this provider before.
        namespace: where ledger entries are trusted (default
            ``ownership``); the driver's whole registry, for drivers whose
            per-node ownership is narrower.
    """
    current, asserted = frozenset(current), frozenset(asserted)
    ledger, unknown = frozenset(ledger), frozenset(unknown)
    owns = owner(ownership, ledger, namespace)
    namespace = namespace or ownership
    kept = frozenset(t for t in current if not owns(t) or t in unknown)
    traits = kept | asserted
    return Reconciliation(
        traits=traits,
        owned=frozenset(t for t in current | traits if owns(t)),
        ignored_ledger=frozenset(t for t in ledger
                                 if not namespace.owns(t)))


@dataclass(frozen=True)
class Settlement:
    """A provider after the driver's update and the tracker's rule.

    Attributes:
        traits: the provider's final traits.
        ledger: what the ledger records for it now (owned and present).
        restored: foreign traits the driver removed, put back.
        dropped: traits the driver set without owning them, taken off.
        stale: owned traits the driver left but does not answer for any
            more (unanswered by its report, or owned only through the
            ledger), removed.
        ignored_ledger: see :class:`Reconciliation`.
        removed_by_others, added_by_others: this provider's drift.
    """

    traits: frozenset[str]
    ledger: frozenset[str]
    restored: frozenset[str] = _EMPTY
    dropped: frozenset[str] = _EMPTY
    stale: frozenset[str] = _EMPTY
    ignored_ledger: frozenset[str] = _EMPTY
    removed_by_others: frozenset[str] = _EMPTY
    added_by_others: frozenset[str] = _EMPTY


def settle(before: Iterable[str], driver_result: Iterable[str], *,
           ownership: Ownership, ledger: Iterable[str] | None,
           namespace: Ownership | None = None,
           answered: Collection[str] | None = None) -> Settlement:
    """Finish one provider after the driver updated it.

    The driver applied its own report to ``before`` and left
    ``driver_result``; its result is the asserted set for the names it
    owns (``ownership``) and its report answers for (``answered``, the
    node report's names; ``None``: all), and :func:`reconcile` against
    ``before`` does the rest — so an owned name no family answers for (a
    dynamic name the driver stopped reporting) goes even if the driver
    left it.  ``ledger`` is ``None`` when the ledger does not know the
    provider (first update, lost ledger): no drift is reported then, for
    there is no baseline.
    """
    # reconcile(before, kept, ...) and drift(...) inlined: this runs for
    # every provider of every node updated, so each set is built once.
    before, result = frozenset(before), frozenset(driver_result)
    static, prefixes = ownership.static, ownership.prefixes
    entries = frozenset(ledger) if ledger else _EMPTY
    trusted = (frozenset(t for t in entries if (namespace or ownership)
                         .owns(t)) if entries else _EMPTY)

    def owns(trait: str) -> bool:
        return (trait in static or trait in trusted
                or (bool(prefixes) and trait.startswith(prefixes)))

    kept = {t for t in result if (t in static or (
        bool(prefixes) and t.startswith(prefixes)))
        and (answered is None or t in answered)}
    traits = frozenset({t for t in before if not owns(t)} | kept)
    if ledger is not None:
        removed = frozenset(t for t in entries - before if owns(t))
        added = frozenset(t for t in before - entries - traits if owns(t))
    else:
        removed = added = _EMPTY
    gone = result - traits
    return Settlement(
        traits=traits,
        ledger=frozenset(t for t in traits if owns(t)),
        restored=traits - result,
        dropped=frozenset(t for t in gone if not owns(t)),
        stale=frozenset(t for t in gone if owns(t)),
        ignored_ledger=entries - trusted,
        removed_by_others=removed, added_by_others=added)


def settle_self_set(before: Iterable[str], driver_result: Iterable[str], *,
                    ledger: Iterable[str] | None) -> Settlement:
    """Finish one provider of a node whose driver declares no ownership.

    ``ledger`` is what the ledger *provably* records as set by the driver
    (``None``: nothing proven — first update, lost or edited ledger).  The
    driver's additions are its own from now on; its removals stand only
    for traits it set; any other removal is undone (``restored``).
    """
    before, result = frozenset(before), frozenset(driver_result)
    mine = frozenset(ledger) if ledger else _EMPTY
    removed = before - result
    restored = removed - mine
    traits = result | restored if restored else result
    recorded = (mine & traits) | (result - before)
    return Settlement(
        traits=traits, ledger=recorded, restored=restored,
        stale=removed & mine,
        removed_by_others=(mine - before) if ledger is not None else _EMPTY)


def drift(ledger: Iterable[str], before: Iterable[str],
          after: Iterable[str], owns: Callable[[str], bool]
          ) -> tuple[frozenset[str], frozenset[str]]:
    """What others changed on owned traits since the last update.

    Returns ``(removed_by_others, added_by_others)``: owned traits the
    ledger says we set that were gone before this update, and owned traits
    that appeared without us and that this update removed (unsupported).
    """
    ledger, before, after = frozenset(ledger), frozenset(before), \
        frozenset(after)
    removed = frozenset(t for t in ledger - before if owns(t))
    added = frozenset(t for t in before - ledger - after if owns(t))
    return removed, added


@dataclass(frozen=True)
class Drift:
    """Per provider name: owned traits others changed since the last update.

    Attributes:
        removed_by_others: owned traits someone removed (reasserted if the
            driver still asserts them).
        added_by_others: owned traits someone added that the driver does
            not assert; removed again.
    """

    removed_by_others: Mapping[str, frozenset[str]] = field(
        default_factory=dict)
    added_by_others: Mapping[str, frozenset[str]] = field(
        default_factory=dict)

    def __post_init__(self) -> None:
        for name in ("removed_by_others", "added_by_others"):
            value = {p: frozenset(t) for p, t in getattr(self, name).items()
                     if t}
            object.__setattr__(self, name, MappingProxyType(value))

    @property
    def empty(self) -> bool:
        """Whether nobody changed an owned trait."""
        return not (self.removed_by_others or self.added_by_others)

    def describe(self) -> list[str]:
        """One line per provider with drift, sorted by provider name."""
        lines = []
        for name in sorted(self.removed_by_others.keys()
                           | self.added_by_others.keys()):
            parts = []
            if self.removed_by_others.get(name):
                parts.append("removed by others: " + ", ".join(
                    sorted(self.removed_by_others[name])))
            if self.added_by_others.get(name):
                parts.append("added by others, unsupported, removed: "
                             + ", ".join(sorted(self.added_by_others[name])))
            lines.append(f"provider {name}: " + "; ".join(parts))
        return lines


#: The drift of an update nobody interfered with (one shared instance).
NO_DRIFT = Drift()
