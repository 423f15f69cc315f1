"""What a Placement sync did, as text and as JSON (``virtdriver sync``).

:func:`render_sync` — the target, one line per provider with news, the
notes and a summary with the request count (``no changes, 0 writes`` when
there was nothing to do; ``0 requests`` when the embedded Placement was
not started, :mod:`~virtdriver.placement.db_stamp`); :func:`sync_json`
— the ``sync`` object of ``--format json``.
"""

from __future__ import annotations

import textwrap
from typing import Any

from virtdriver.placement.result import ProviderOutcome, SyncResult


def summary(result: SyncResult) -> str:
    """One line: ``no changes, 0 writes; 1 request (1 read), 0.01 s``."""
    changed = sum(o.changed for o in result.outcomes)
    if result.pending:
        head = "pending, Placement unavailable"
    elif result.reason:
        head = "failed"
    elif result.errors:
        head = f"{_count(len(result.errors), 'provider')} failed"
    elif not changed and result.kept:
        # A delete Placement refused is no change, but news: say so, and
        # why, in the one line an agent cycle logs.
        kept = result.kept
        head = (f"{_count(len(kept), 'provider')} not deleted "
                f"({kept[0].name or kept[0].uuid}: {kept[0].kept})")
    elif not changed:
        head = "no changes"
    elif result.dry_run:
        head = f"{_count(changed, 'provider')} would change"
    else:
        head = f"synced, {_count(changed, 'provider')} changed"
    counts = result.counts
    line = (f"{head}, {_count(counts.writes, 'write')}; "
            f"{_count(counts.total, 'request')} "
            f"({_count(counts.reads, 'read')})")
    if result.conflicts:
        line += f", {_count(result.conflicts, 'conflict')} retried"
    line += f", {result.seconds:.2f} s"
    return ("dry run, nothing written: " + line) if result.dry_run else line


def render_sync(result: SyncResult, target: str) -> str:
    """The text form: the target, one line per provider with news, notes,
    the summary."""
    lines = [f"sync to {target}:"]
    lines += [textwrap.fill(o.describe(), width=79, initial_indent="  ",
                            subsequent_indent="      ",
                            break_long_words=False, break_on_hyphens=False)
              for o in result.outcomes]
    lines += [f"  note: {note}" for note in result.notes]
    if result.marker_problem:
        lines.append(f"  warning: {result.marker_problem}")
    if result.foreign:
        lines.append(f"  {_count(len(result.foreign), 'provider')} in "
                     "these trees are someone else's, left as they are")
    lines.append(f"sync: {summary(result)}")
    return "\n".join(lines) + "\n"


def sync_json(result: SyncResult, target: str) -> dict[str, Any]:
    """The ``sync`` object of ``--format json``."""
    counts = result.counts
    return {
        "placement": target,
        "dry_run": result.dry_run, "ok": result.ok,
        "pending": result.pending, "reason": result.reason,
        "changed": result.changed, "summary": summary(result),
        "requests": {"total": counts.total, "reads": counts.reads,
                     "writes": counts.writes,
                     "by_method": dict(sorted(counts.by_method.items()))},
        "conflicts": result.conflicts,
        "seconds": round(result.seconds, 4),
        "providers": [outcome_json(o) for o in result.outcomes],
        "foreign": list(result.foreign), "notes": list(result.notes),
        "marker_problem": result.marker_problem,
        "unmarked": result.unmarked}


def outcome_json(outcome: ProviderOutcome) -> dict[str, Any]:
    """One provider's outcome, Placement's shapes for inventories."""
    return {
        "uuid": outcome.uuid, "name": outcome.name,
        "created": outcome.created, "deleted": outcome.deleted,
        "renamed_from": outcome.renamed_from,
        "reparented_from": outcome.reparented_from,
        "inventory": {rc: {"old": old.as_dict() if old else None,
                           "new": new.as_dict() if new else None}
                      for rc, (old, new) in sorted(outcome.inventory.items())},
        **{name: sorted(getattr(outcome, name)) for name in (
            "traits_added", "traits_removed", "aggregates_added",
            "aggregates_removed", "removed_by_others", "added_by_others")},
        "kept": outcome.kept, "error": outcome.error,
        "retries": outcome.retries}


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"
