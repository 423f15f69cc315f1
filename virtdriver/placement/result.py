"""What one sync did: per provider, and for the whole run."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from virtdriver.placement.counts import RequestCounts
from virtdriver.providers.inventory import Inventory

if TYPE_CHECKING:
    from virtdriver.placement.plan import ProviderPlan

_EMPTY: frozenset[str] = frozenset()


@dataclass(frozen=True)
class ProviderOutcome:
    """What the sync changed (or, with ``dry_run``, would change) on one
    provider, and what it could not.

    Attributes:
        uuid, name: the provider.
        created, deleted: it was created / deleted.
        renamed_from: its old name in Placement, if renamed.
        reparented_from: its old parent in Placement, if moved (``""``
            for a former root).
        inventory: resource class → ``(old, new)`` for each record that
            changed (``None``: no record).
        traits_added, traits_removed, aggregates_added,
        aggregates_removed: what changed in Placement.
        removed_by_others, added_by_others: drift — owned traits others
            removed (reasserted) or added (unsupported, removed) since the
            last sync.
        kept: why a provider gone from the tree was not deleted.
        error: why (part of) the provider could not be synced; it is
            retried next sync.
        retries: generation conflicts retried on this provider.
    """

    uuid: str
    name: str
    created: bool = False
    deleted: bool = False
    renamed_from: str | None = None
    reparented_from: str | None = None
    inventory: Mapping[str, tuple[Inventory | None, Inventory | None]] = \
        field(default_factory=dict)
    traits_added: frozenset[str] = _EMPTY
    traits_removed: frozenset[str] = _EMPTY
    aggregates_added: frozenset[str] = _EMPTY
    aggregates_removed: frozenset[str] = _EMPTY
    removed_by_others: frozenset[str] = _EMPTY
    added_by_others: frozenset[str] = _EMPTY
    kept: str | None = None
    error: str | None = None
    retries: int = 0

    def __post_init__(self) -> None:
        object.__setattr__(self, "inventory",
                           MappingProxyType(dict(self.inventory)))

    @property
    def changed(self) -> bool:
        """Whether anything was (or would be) written for it."""
        return bool(self.created or self.deleted or self.inventory
                    or self.renamed_from is not None
                    or self.reparented_from is not None
                    or self.traits_added or self.traits_removed
                    or self.aggregates_added or self.aggregates_removed)

    def describe(self) -> str:
        """One line: ``provider 'cn1' (uuid): created; traits +A -B``."""
        parts = []
        if self.created:
            parts.append("created")
        if self.deleted:
            parts.append("deleted")
        if self.renamed_from is not None:
            parts.append(f"renamed from {self.renamed_from!r}")
        if self.reparented_from is not None:
            parts.append(f"moved from parent {self.reparented_from or '-'}")
        if self.inventory:
            parts.append("inventory " + ", ".join(
                _inventory_change(rc, old, new)
                for rc, (old, new) in sorted(self.inventory.items())))
        changes = [f"+{t}" for t in sorted(self.traits_added)] + \
            [f"-{t}" for t in sorted(self.traits_removed)]
        if changes:
            parts.append("traits " + " ".join(changes))
        changes = [f"+{a}" for a in sorted(self.aggregates_added)] + \
            [f"-{a}" for a in sorted(self.aggregates_removed)]
        if changes:
            parts.append("aggregates " + " ".join(changes))
        if self.removed_by_others:
            parts.append("drift: removed by others, reasserted: "
                         + ", ".join(sorted(self.removed_by_others)))
        if self.added_by_others:
            parts.append("drift: added by others, unsupported, removed: "
                         + ", ".join(sorted(self.added_by_others)))
        if self.kept:
            parts.append(f"not deleted: {self.kept}")
        if self.error:
            parts.append(f"error: {self.error}")
        if self.retries:
            parts.append(f"{self.retries} generation conflict(s) retried")
        return f"provider {self.name!r} ({self.uuid}): " + (
            "; ".join(parts) or "unchanged")


def _inventory_change(rc: str, old: Inventory | None,
                      new: Inventory | None) -> str:
    """``+VCPU=8``, ``-PCPU``, or each changed field old -> new:
    ``MEMORY_MB (total 4096 -> 8192, reserved 512 -> 1024)``."""
    if old is None:
        return f"+{rc}={new.total}"
    if new is None:
        return f"-{rc}"
    before, after = old.as_dict(), new.as_dict()
    changed = [f"{field} {before[field]} -> {after[field]}"
               for field in before if before[field] != after[field]]
    return f"{rc} ({', '.join(changed) or 'unchanged'})"


@dataclass(frozen=True)
class SyncResult:
    """The whole sync.

    Attributes:
        outcomes: providers with something to report, deletions first
            (children before parents), then the tree's order.
        pending: Placement was unreachable or failing (``reason`` says
            how); what was not sent is sent next sync.  Not a success.
        reason: why the sync is pending, or the error that stopped it.
        counts: the requests this sync sent.
        conflicts: generation conflicts retried, over all providers.
        names_recreated: writes refused for a ``CUSTOM_`` name believed to
            exist, retried after creating the plan's names again (a name
            someone deleted, or one Placement answered as existing but had
            not created: its concurrent resource-class creation on
            PostgreSQL can); each cost the refused write, a ``PUT`` per
            name and the write again.
        seconds: wall time.
        foreign: uuids of providers in our trees that are someone else's,
            left exactly as they are.
        notes: remarks on the sync state (a file ignored, and why).
        dry_run: nothing was written; outcomes say what would have been.
        marker_problem: what went wrong with the marking aggregate
            (:class:`~.marker.Marker`), one line with what to do.
        unmarked: no marking aggregate could be kept: providers were
            listed tree by tree and not marked.  Not a success for a
            command (exit 2), though what was synced stands.
    """

    outcomes: tuple[ProviderOutcome, ...] = ()
    pending: bool = False
    reason: str | None = None
    counts: RequestCounts = field(
        default_factory=lambda: RequestCounts({}))
    conflicts: int = 0
    names_recreated: int = 0
    seconds: float = 0.0
    foreign: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()
    dry_run: bool = False
    marker_problem: str | None = None
    unmarked: bool = False

    @property
    def errors(self) -> tuple[ProviderOutcome, ...]:
        """Outcomes with an error."""
        return tuple(o for o in self.outcomes if o.error)

    @property
    def kept(self) -> tuple[ProviderOutcome, ...]:
        """Providers gone from the tree that were not deleted."""
        return tuple(o for o in self.outcomes if o.kept)

    @property
    def ok(self) -> bool:
        """Placement now equals the tree: not pending, nothing failed."""
        return not self.pending and self.reason is None and not self.errors

    @property
    def changed(self) -> bool:
        """Whether anything was (or would be) written."""
        return any(o.changed for o in self.outcomes)

    def get(self, uuid: str) -> ProviderOutcome | None:
        """The outcome for provider ``uuid``, if it has one."""
        return next((o for o in self.outcomes if o.uuid == uuid), None)

    def describe(self) -> list[str]:
        """Human lines: one per provider with news, then a summary."""
        lines = [o.describe() for o in self.outcomes]
        lines.extend(self.notes)
        status = ("pending: " + (self.reason or "") if self.pending
                  else f"failed: {self.reason}" if self.reason
                  else f"{len(self.errors)} provider(s) failed"
                  if self.errors else "no changes" if not self.changed
                  else "done")
        if self.dry_run:
            status = "dry run, nothing written; " + status
        lines.append(f"sync {status}; {self.counts}, "
                     f"{self.conflicts} conflict(s) retried, "
                     f"{self.seconds:.2f} s")
        return lines


class OutcomeBuilder:
    """A mutable :class:`ProviderOutcome` while a sync runs."""

    def __init__(self, uuid: str, name: str) -> None:
        self.fields: dict[str, Any] = {"uuid": uuid, "name": name}
        self.inventory: dict = {}
        self.sets = {k: set() for k in (
            "traits_added", "traits_removed", "aggregates_added",
            "aggregates_removed", "removed_by_others", "added_by_others")}

    def record(self, plan: ProviderPlan, parts: Iterable[str]) -> None:
        """Note what ``plan`` changed in ``parts`` (written, or planned in
        a dry run)."""
        parts = set(parts)
        if "inventories" in parts:
            self.inventory.update(plan.inventory_changes)
        for part, added, removed in (
                ("traits", plan.traits_added, plan.traits_removed),
                ("aggregates", plan.aggregates_added,
                 plan.aggregates_removed)):
            if part in parts:
                self._change(part, added, removed)

    def _change(self, part: str, added: Iterable[str],
                removed: Iterable[str]) -> None:
        plus, minus = self.sets[f"{part}_added"], self.sets[f"{part}_removed"]
        for name in added:
            minus.discard(name) if name in minus else plus.add(name)
        for name in removed:
            plus.discard(name) if name in plus else minus.add(name)

    def drift(self, plan: ProviderPlan) -> None:
        self.sets["removed_by_others"] |= plan.removed_by_others
        self.sets["added_by_others"] |= plan.added_by_others

    def error(self, message: str) -> None:
        previous = self.fields.get("error")
        self.fields["error"] = f"{previous}; {message}" if previous \
            else message

    def build(self) -> ProviderOutcome:
        return ProviderOutcome(
            **self.fields, inventory=self.inventory,
            **{k: frozenset(v) for k, v in self.sets.items()})
