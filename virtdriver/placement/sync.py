"""Make Placement equal a provider tree: few requests, generation-safe.

:func:`sync` takes a tree (or a snapshot of one), a client, the caller's
ownership callable and the sync state, and, in this order:

1. **lists** its own providers — one ``GET
   /resource_providers?member_of=<the agent's marking aggregate>``, and
   ``in_tree`` reads only of trees where a provider went missing
   (:mod:`~.listing`; one ``in_tree`` read per root without a marking
   aggregate), never the whole cloud — which gives every provider's
   generation; inventory that
   allocations use and that must move goes first, in one ``POST
   /reshaper`` per tree (:mod:`~.reshape`);
2. **deletes** providers gone from the tree, children first, each only if
   ``owned_for`` vouches for it (a state file never does); one that still
   has allocations is kept, and the result says so;
3. **creates and updates** the tree's providers, parents first: a new one
   is created with its parent; for one that exists, what it holds is taken
   from the state when Placement lists it at the generation the state
   recorded, and read (inventories, traits, aggregates) otherwise; then
   only the parts that differ are replaced (:mod:`~.plan`), at the
   generation last seen, ``CUSTOM_`` traits and resource classes created
   first; the marking aggregate is added where it is missing.

A generation conflict (409) re-reads only that provider, recomputes and
retries, ``attempts`` times in all with jittered exponential backoff; then
that provider fails with a clear error and the others still sync.
Placement unreachable or failing (5xx, after the client's own retries of
a transient failure, :mod:`~.transport`) stops the sync: the result is
*pending*, what was done is recorded, nothing is retried in a loop — the
next call catches up.  A TLS failure stops it as failed.  Our provider
found under another tree (re-parented by someone) is recognised by its
uuid and moved back.  ``docs/placement.md`` has the whole story.
"""

from __future__ import annotations

import dataclasses
import logging
import pathlib
import random
import time
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from virtdriver.capabilities.traits.ownership import Ownership
from virtdriver.placement.deletions import Deletions
from virtdriver.placement.listing import Listing
from virtdriver.placement.marker import Marker, read_marker
from virtdriver.placement.errors import (
    DuplicateProvider, GenerationConflict, InventoryInUse, PlacementError,
    PlacementRequestError, PlacementTLSError, PlacementUnavailable,
    ProviderNotFound, UnknownName)
from virtdriver.placement.plan import (
    ProviderPlan, custom_names, inventory_from_placement, plan_provider)
from virtdriver.placement.moves import Moves
from virtdriver.placement.reshape import Reshaper, in_use_message
from virtdriver.placement.reshape_plan import PlacementOf
from virtdriver.placement.result import OutcomeBuilder, SyncResult
from virtdriver.placement.state import Known, Listed, SyncState, SyncStateFile
from virtdriver.providers.record import ProviderData
from virtdriver.resource_tracker.snapshot import TreeReader

if TYPE_CHECKING:
    from virtdriver.placement.client import PlacementClient

LOG = logging.getLogger(__name__)

#: ``owned_for(uuid)``: what the provider's node owns, or ``None`` when
#: the provider is not the caller's (never created, written or deleted).
OwnedFor = Callable[[str], Ownership | None]
#: Attempts per provider before a generation conflict is given up.
DEFAULT_ATTEMPTS = 5
#: Mean delay before the first retry, in seconds; doubled each time.
DEFAULT_BACKOFF = 0.05
_MAX_DELAY = 2.0
_PARTS = ("inventories", "traits", "aggregates")


def sync(tree: TreeReader, client: PlacementClient, *, owned_for: OwnedFor,
         state: SyncState, remove: Iterable[str] = (), dry_run: bool = False,
         attempts: int = DEFAULT_ATTEMPTS, backoff: float = DEFAULT_BACKOFF,
         marker: str | None = None,
         sleep: Callable[[float], None] = time.sleep,
         placement_of: PlacementOf | None = None,
         progress: Callable[[int, int], None] | None = None) -> SyncResult:
    """Make Placement equal ``tree`` (module doc); update ``state``.

    Args:
        tree: a ``ProviderTree`` or ``TreeSnapshot`` (snapshotted once, so
            the tree may change meanwhile).
        client: the Placement client.
        owned_for: per provider uuid, the ownership of its node, or
            ``None`` for a provider that is not the caller's.  Asked also
            for providers gone from the tree: only those it vouches for
            are deleted.
        state: what the last sync saw; updated in place (save it with
            :class:`~.state.SyncStateFile`, or use :class:`Syncer`).
        remove: uuids the caller knows are gone (a tracker's diff
            deletions) and wants deleted even if the state does not list
            them; ``owned_for`` must vouch for them too.
        dry_run: read, plan and report; write nothing.
        attempts: per provider, attempts before a generation conflict is
            reported as an error.
        backoff: mean delay before the first retry (doubled, jittered).
        marker: the agent's marking aggregate (:mod:`~.marker`): put on
            every provider synced, and the one listing; ``None``: one
            ``in_tree`` listing per root, no mark.
        sleep: how to wait between retries (tests pass a recorder).
        placement_of: where each consumer's allocations belong when
            inventory must move (:class:`~.reshape.ClaimsPlacement`);
            ``None``: only moves with one possible destination.
        progress: called as ``progress(done, total)`` after each provider
            is synced (a CLI's progress bar); ``None``: not told.

    Returns:
        A :class:`~.result.SyncResult`; never raises for Placement's
        failures (pending or per-provider errors instead).
    """
    run = _Run(tree.snapshot(), client, owned_for, state, remove=remove,
               dry_run=dry_run, attempts=max(1, attempts), backoff=backoff,
               marker=marker, sleep=sleep,
               placement_of=placement_of, progress=progress)
    return run.execute()


class Syncer:
    """What a long-lived agent keeps between cycles: the client and the
    state directory's sync state (reloaded only when another process
    rewrote it), used under the directory's lock.

    Args:
        client: the Placement client.
        state_dir: holds ``placement-sync.json``, the marking aggregate
            (``placement-aggregate``) and the lock file the ledger uses,
            so a CLI run and an agent sharing it take turns.
        lock_timeout: seconds to wait for the lock (default 30).
        marker: the marking aggregate (a uuid, or a
            :class:`~.marker.Marker` already read); default: the state
            directory's own (:func:`~.marker.read_marker`, made on first
            use, read again while it could not be saved).
        options: defaults for :func:`sync`'s keyword arguments.
    """

    def __init__(self, client: PlacementClient, state_dir: pathlib.Path | str,
                 *, lock_timeout: float | None = None,
                 marker: Marker | str | None = None,
                 **options: Any) -> None:
        self.client = client
        kwargs = {} if lock_timeout is None else {
            "lock_timeout": lock_timeout}
        self.state_file = SyncStateFile(state_dir, **kwargs)
        self.marker = Marker(marker) if isinstance(marker, str) else marker
        self.options = options

    def sync(self, tree: TreeReader, *, owned_for: OwnedFor,
             **options: Any) -> SyncResult:
        """:func:`sync` with this syncer's state, loaded and saved under
        the state directory's lock.

        Raises:
            LockTimeout, LockError: the directory's lock (naming the
                holder); nothing was sent.
        """
        with self.state_file.locked() as state:
            if self.marker is None or self.marker.unmarked:
                self.marker = read_marker(self.state_file.state_dir)
            marker = self.marker
            if marker.uuid is not None and marker.problem:
                self.marker = Marker(marker.uuid)  # a repair: told once
            options = {"marker": marker.uuid, **self.options, **options}
            result = sync(tree, self.client, owned_for=owned_for,
                          state=state, **options)
        return dataclasses.replace(result, marker_problem=marker.problem,
                                   unmarked=marker.unmarked)


def sync_state_dir(tree: TreeReader, client: PlacementClient, *,
                   owned_for: OwnedFor, state_dir: pathlib.Path | str,
                   lock_timeout: float | None = None,
                   **options: Any) -> SyncResult:
    """One :meth:`Syncer.sync` (a CLI run).  Aggregates are taken away
    only by the process that set them, so a one-shot run never removes
    one; keep a :class:`Syncer` where that matters."""
    return Syncer(client, state_dir, lock_timeout=lock_timeout).sync(
        tree, owned_for=owned_for, **options)


class _GiveUp(Exception):
    """A provider's generation kept moving: stop retrying it."""


class _Run:
    """One sync (see :func:`sync`)."""

    def __init__(self, snapshot: TreeReader, client: PlacementClient,
                 owned_for: OwnedFor, state: SyncState, *,
                 remove: Iterable[str], dry_run: bool, attempts: int,
                 backoff: float, marker: str | None,
                 sleep: Callable[[float], None],
                 placement_of: PlacementOf | None = None,
                 progress: Callable[[int, int], None] | None = None) -> None:
        self.tree = snapshot
        self.progress = progress
        self.client = client
        self.owned_for = owned_for
        self.state = state
        self.remove = tuple(remove)
        self.dry_run = dry_run
        self.attempts = attempts
        self.backoff = backoff
        self.listing = Listing(client, state, marker, dry_run=dry_run)
        self.keep = frozenset() if marker is None else frozenset({marker})
        self.sleep = sleep
        self.outcomes: dict[str, OutcomeBuilder] = {}
        self.conflicts = 0
        self.names_recreated = 0
        self.missing: set[str] = set()   # desired, not in Placement
        self.foreign: list[str] = []
        self.placement_of = placement_of
        self.notes: list[str] = []

    # -- the whole run ------------------------------------------------------

    def execute(self) -> SyncResult:
        started, before = time.monotonic(), self.client.counts
        notes = [self.state.note] if self.state.note else []
        pending, reason = False, None
        try:
            self._run()
        except PlacementUnavailable as exc:
            pending, reason = True, str(exc)
            LOG.warning("placement sync pending: %s", exc)
        except PlacementError as exc:   # e.g. too old a microversion
            reason = str(exc)
            LOG.error("placement sync failed: %s", exc)
        return SyncResult(
            outcomes=tuple(o.build() for o in self.outcomes.values()),
            pending=pending, reason=reason,
            counts=self.client.counts - before, conflicts=self.conflicts,
            names_recreated=self.names_recreated,
            seconds=time.monotonic() - started, foreign=tuple(self.foreign),
            notes=tuple(notes + self.notes), dry_run=self.dry_run)

    def _run(self) -> None:
        state = self.state
        state.bind(self.client.endpoint)
        if state.microversion:
            self.client.adopt_microversion(state.microversion)
        desired = self.tree.providers()
        self.own = {p.uuid: self.owned_for(p.uuid) for p in desired}
        managed = [p for p in desired if self.own[p.uuid] is not None]
        self.foreign.extend(p.uuid for p in desired
                            if self.own[p.uuid] is None)
        roots = list(dict.fromkeys(p.root_uuid for p in managed))
        def relist(roots: list[str]) -> dict[str, Listed]:
            return self.listing.trees(roots, managed)
        listed = relist(roots)
        state.microversion = self.client.negotiated or state.microversion
        self.moves = Moves(self.client, dry_run=self.dry_run,
                           notes=self.notes)
        listed, stuck = self.moves.restore_roots(
            roots, managed, listed, self._outcome, relist)
        managed = [p for p in managed if p.root_uuid not in stuck]
        # Inventory that allocations use moves first, in one request per
        # tree; a tree that cannot be reshaped is held: left untouched.
        reshaped = Reshaper(
            self.client, state, self.owned_for, self.placement_of,
            dry_run=self.dry_run, attempts=self.attempts,
            backoff=self.backoff, sleep=self.sleep).before_sync(
                managed, listed)
        self.outcomes.update(reshaped.outcomes)
        self.notes.extend(reshaped.notes)
        self.conflicts += reshaped.conflicts
        self.moves.out_of_gone_parents(
            managed, listed, reshaped.held, {p.uuid for p in desired},
            self._outcome)
        gone = Deletions(self.client, state, self.owned_for,
                         dry_run=self.dry_run)
        # What a reshape deleted already is not deleted twice.
        remove = [u for u in self.remove if not (
            u in reshaped.outcomes
            and reshaped.outcomes[u].fields.get("deleted"))]
        try:
            gone.run(listed, {p.uuid for p in desired} | reshaped.held,
                     set(roots), remove, complete=self.listing.complete)
        finally:
            self.outcomes.update(gone.outcomes)
            self.foreign.extend(gone.foreign)
        todo = [p for p in managed if p.uuid not in reshaped.held]
        for done, provider in enumerate(todo, 1):
            self._sync_provider(provider, listed.get(provider.uuid))
            if self.progress is not None:
                self.progress(done, len(todo))
        managed_uuids = {p.uuid for p in managed}
        for uuid in list(state.providers):
            if uuid not in managed_uuids:
                del state.providers[uuid]
        for uuid in list(state.wrote_aggregates):
            if uuid not in managed_uuids:
                del state.wrote_aggregates[uuid]

    def _outcome(self, uuid: str, name: str) -> OutcomeBuilder:
        if uuid not in self.outcomes:
            self.outcomes[uuid] = OutcomeBuilder(uuid, name)
        return self.outcomes[uuid]

    # -- one provider -----------------------------------------------------

    def _sync_provider(self, desired: ProviderData,
                       listed: Listed | None) -> None:
        outcome = self._outcome(desired.uuid, desired.name)
        try:
            if desired.parent_uuid in self.missing:
                self.missing.add(desired.uuid)
                outcome.error(f"not created: its parent "
                              f"{desired.parent_uuid} is not in Placement")
                return
            if listed is None:
                retried = self.client.retried
                try:
                    current, baseline = self._create(desired, outcome), None
                    fresh = True
                except DuplicateProvider:
                    # Not in our tree's listing, yet Placement has it.
                    listed = self.moves.elsewhere(desired)
                    if (self.client.retried > retried
                            and listed.parent_uuid == desired.parent_uuid):
                        # Our first POST landed; its answer was lost.
                        outcome.fields["created"] = True
            if listed is not None:
                current, baseline, fresh = self._current(listed)
                current = self.moves.move(desired, current, outcome)
            self._converge(desired, current, baseline, outcome, fresh)
        except (PlacementUnavailable, PlacementTLSError):
            raise
        except _GiveUp as exc:
            self.state.providers.pop(desired.uuid, None)
            outcome.error(str(exc))
        except PlacementError as exc:
            self.state.providers.pop(desired.uuid, None)
            if isinstance(exc, ProviderNotFound) or listed is None:
                self.missing.add(desired.uuid)
            outcome.error(str(exc))
        finally:
            built = outcome.build()
            if not (built.changed or built.error or built.retries
                    or built.removed_by_others or built.added_by_others):
                del self.outcomes[desired.uuid]
            elif built.error:
                LOG.warning("%s", built.describe())

    def _create(self, desired: ProviderData, outcome: OutcomeBuilder) -> Known:
        outcome.fields["created"] = True
        if self.dry_run:
            return Known(desired.uuid, desired.name, desired.parent_uuid,
                         desired.root_uuid, 0)
        try:
            body = self.client.create_provider(
                desired.uuid, desired.name, desired.parent_uuid)
        except PlacementError:
            outcome.fields["created"] = False
            raise
        return Known(desired.uuid, desired.name, desired.parent_uuid,
                     body.get("root_provider_uuid") or desired.root_uuid,
                     body["generation"])

    def _current(self, listed: Listed) -> tuple[Known, Known | None, bool]:
        """What Placement holds, the drift baseline (the state's record
        when Placement moved on since), and whether it was read now."""
        known = self.state.providers.get(listed.uuid)
        if (known is not None and known.generation == listed.generation
                and known.name == listed.name
                and known.parent_uuid == listed.parent_uuid):
            return known, None, False
        return self._read(listed), known, True

    def _read(self, listed: Listed | Known) -> Known:
        """Read the provider's three parts at one generation."""
        for _ in range(self.attempts):
            got = {part: self.client.get_part(listed.uuid, part)
                   for part in _PARTS}
            generations = {generation for generation, _ in got.values()}
            if len(generations) == 1:
                break
            # Someone wrote between the reads: read again.
            self.conflicts += 1
        else:
            raise _GiveUp(f"its generation kept changing while it was read "
                          f"({self.attempts} attempts); it is retried next "
                          "sync")
        try:
            inventory = inventory_from_placement(got["inventories"][1])
            traits = frozenset(got["traits"][1])
            aggregates = frozenset(got["aggregates"][1])
        except (ValueError, TypeError) as exc:
            raise PlacementRequestError(
                f"provider {listed.uuid}: Placement's answer is malformed "
                f"({exc}); check that the URL is Placement's") from None
        self.state.custom_traits.update(
            t for t in traits if t.startswith("CUSTOM_"))
        self.state.custom_classes.update(
            rc for rc in inventory if rc.startswith("CUSTOM_"))
        return Known(listed.uuid, listed.name, listed.parent_uuid,
                     listed.root_uuid, generations.pop(), inventory,
                     traits, aggregates)

    def _converge(self, desired: ProviderData, current: Known,
                  baseline: Known | None, outcome: OutcomeBuilder,
                  fresh: bool) -> None:
        """Plan and write until Placement matches, retrying conflicts.

        ``fresh``: ``current`` was read (or created) by this sync.  If it
        came from the state, the traits and aggregates a write would
        replace are read first: a state file never decides what is taken
        away.
        """
        ownership = self.own[desired.uuid]
        attempt = 1
        while True:
            plan = plan_provider(
                desired, current, ownership, baseline=baseline,
                wrote_aggregates=self.state.wrote_aggregates.get(
                    desired.uuid, ()), keep=self.keep)
            if not fresh and not plan.empty:
                current, fresh = self._verify(current, plan), True
                continue
            outcome.drift(plan)
            if plan.empty or self.dry_run:
                outcome.record(plan, _PARTS)
                break
            try:
                current = self._apply(desired, current, plan, outcome)
                break
            except GenerationConflict:
                self.conflicts += 1
                outcome.fields["retries"] = attempt
                if attempt >= self.attempts:
                    raise _GiveUp(
                        f"generation conflict on every one of "
                        f"{self.attempts} attempts (another writer keeps "
                        "changing it); it is retried next sync") from None
                self.sleep(min(_MAX_DELAY, self.backoff * 2 ** (attempt - 1)
                               * (0.5 + random.random())))
                attempt += 1
                baseline = current
                current = self._read(current)
        if not self.dry_run:
            self.state.providers[desired.uuid] = current

    def _verify(self, current: Known, plan: ProviderPlan) -> Known:
        """Read the parts ``plan`` replaces whose content would come from
        the state (traits, aggregates); all three if the generation moved
        meanwhile."""
        parts = [part for part, content in (("traits", plan.traits),
                                            ("aggregates", plan.aggregates))
                 if content is not None]
        for part in parts:
            generation, content = self.client.get_part(current.uuid, part)
            if generation != current.generation:
                return self._read(current)
            current = dataclasses.replace(current, **{part: frozenset(
                content)})
        return current

    def _apply(self, desired: ProviderData, current: Known,
               plan: ProviderPlan, outcome: OutcomeBuilder) -> Known:
        """Write the plan's parts in order; the new :class:`Known`.

        A part refused for inventory in use is reported and skipped; the
        other parts are still written.
        """
        self._ensure_names(plan, force=False)
        uuid = desired.uuid
        for part, content in (("inventories", plan.inventory),
                              ("traits", plan.traits),
                              ("aggregates", plan.aggregates)):
            if content is None:
                continue
            payload = ({rc: rec.as_dict() for rc, rec in content.items()}
                       if part == "inventories" else sorted(content))
            try:
                generation = self._put(uuid, part, current.generation,
                                       payload, plan)
            except InventoryInUse as exc:
                outcome.error(in_use_message(desired, exc))
                continue
            field = {"inventories": "inventory"}.get(part, part)
            current = dataclasses.replace(
                current, generation=generation, **{field: content})
            self.state.providers[uuid] = current
            outcome.record(plan, (part,))
            if part == "aggregates":
                wrote = set(self.state.wrote_aggregates.get(uuid, ()))
                wrote |= plan.aggregates_added
                wrote -= plan.aggregates_removed
                self.state.wrote_aggregates[uuid] = frozenset(wrote)
        return current

    def _put(self, uuid: str, part: str, generation: int, payload: Any,
             plan: ProviderPlan) -> int:
        try:
            return self.client.put_part(uuid, part, generation, payload)
        except UnknownName:
            # A CUSTOM_ name the state wrongly believed to exist (or
            # someone deleted it): create the plan's names, try once more.
            traits, classes = custom_names(plan)
            if not (traits or classes):
                raise
            self.names_recreated += 1
            self._ensure_names(plan, force=True)
            return self.client.put_part(uuid, part, generation, payload)

    def _ensure_names(self, plan: ProviderPlan, *, force: bool) -> None:
        """Create the plan's ``CUSTOM_`` traits and resource classes that
        are not known to exist."""
        traits, classes = custom_names(plan)
        for name in sorted(traits):
            if force or name not in self.state.custom_traits:
                self.client.ensure_trait(name)
                self.state.custom_traits.add(name)
        for name in sorted(classes):
            if force or name not in self.state.custom_classes:
                self.client.ensure_resource_class(name)
                self.state.custom_classes.add(name)
