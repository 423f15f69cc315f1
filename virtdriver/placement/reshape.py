"""Reshaping: move inventory and the allocations on it in one request.

When a host switches between flat and nested (the fake driver's
``nested``, a libvirt host's NUMA reporting) or ``cpu_dedicated_set``
turns ``VCPU`` into ``PCPU``, inventory that allocations use must move:
Placement refuses to remove an allocated class from a provider (409
``placement.inventory.inuse``), and removing it elsewhere first would
leave capacity counted twice.  :func:`~virtdriver.placement.sync.sync`
therefore runs a :class:`Reshaper` before its deletions and writes: for
each tree that needs it, one ``POST /reshaper`` (microversion 1.30;
from 1.38 every consumer in it carries its ``consumer_type``) replaces, at
once, the inventories of every provider of the tree whose inventory
changes (each at the generation it was read at) and the complete
allocations of every consumer that must move.  Providers the new shape
adds (the NUMA cells) are created first, empty; providers it drops are
emptied by the reshape, then deleted (children first).  A dropped cell
is the caller's when ``owned_for`` vouches for it or, after a restart
(the tracker never saw it), when its uuid is derived from its parent's
and its name — the proof the tracker itself uses for children.

**Which trees.**  Only where the sync state shows a provider losing a
class the tree no longer gives it, or the tree changed shape (a provider
added under an existing root, or one gone) and a provider has no record;
or a provider with huge pages whose ``MEMORY_MB`` total goes down (or
has no record): before a cell's ``MEMORY_MB`` was its small-page memory
only, an instance on huge pages held ``MEMORY_MB`` for the same memory
too, and the reshape drops that repeat (:mod:`.memory_upgrade`) as it
lowers the total.
Nothing is read otherwise, so a steady-state sync still costs one read.
Those providers' allocations are read (``GET
/resource_providers/{uuid}/allocations``); only if one of them uses a
class it loses is the tree read whole (inventories and allocations of
each of the caller's providers, the record of each consumer that moves).

**Where each consumer goes** (:mod:`~.reshape_plan`): the consumer's
claim, when ``placement_of`` knows it — :class:`ClaimsPlacement` answers
from a ``ResourceTracker``'s claims: an instance's CPUs, memory and pages
go to the cells its claim pinned it to (``<node>_NUMA<id>``, the root in
flat mode), ``VCPU`` for shared vCPUs and ``PCPU`` for pinned ones.
Without a claim an allocation stays where its class is still offered or
moves to the one provider that will offer it (the root, in flat mode);
with two candidates (two cells) its destination is not known.  Only
consumers holding an allocation of a class that goes away move.

**A driver's reshape** (:class:`DriverPlacement`): a tree whose driver
raised ``ReshapeNeeded`` and moved allocations is reshaped even if no
class is lost: its providers' allocations are read and the consumers the
driver moved move as it said, with the tree's inventories, in one ``POST
/reshaper`` (providers the new shape adds are created first, and deleted
again if the reshape fails: Placement is left as it was).

**Refused** — a consumer with no known destination, a claim that does
not account for what Placement allocates, moved allocations that would
not fit, a consumer without a type at 1.38+: nothing is sent, the whole
tree is left exactly as it is this sync (no deletion, creation or write),
and each provider losing a class has an error naming the classes and
every consumer with the reason.  The next sync tries again.

**Conflicts.**  A 409 (a provider's or consumer's generation moved, or a
provider to create already exists) re-reads the tree and plans again,
``attempts`` times with the sync's jittered backoff; then the tree fails
with an error and is left alone this sync.  After a reshape the tree is
listed again and its providers are read as the sync reads any provider
whose generation moved.

A provider the sync state knows nothing about (a new state directory)
and whose tree kept its shape (``VCPU`` → ``PCPU``) is not suspected
before the write; Placement then refuses the write (``inventory in
use``), the outcome says so naming the provider and classes
(:func:`in_use_message`), the refused inventory is recorded, and the next
sync reshapes.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

import os_resource_classes as orc

from virtdriver.claims.usage import InstanceFit
from virtdriver.drivers.host_tree import (
    cell_provider_name, page_resource_class)
from virtdriver.drivers.identity import is_derived_child
from virtdriver.placement.memory_upgrade import holds_pages, memory_shrinks
from virtdriver.placement.errors import (
    DuplicateProvider, GenerationConflict, InventoryInUse, PlacementError,
    PlacementRequestError, PlacementUnavailable, ProviderInUse,
    ProviderNotFound)
from virtdriver.placement.plan import inventory_from_placement
from virtdriver.placement.reshape_plan import (
    ConsumerNow, Current, PlacementOf, ProviderNow, Refusal, ReshapePlan,
    in_use, moving_consumers, plan_reshape)
from virtdriver.placement.result import OutcomeBuilder
from virtdriver.placement.state import Listed, SyncState
from virtdriver.providers.record import ProviderData
from virtdriver.resource_tracker.snapshot import TreeReader

if TYPE_CHECKING:
    from virtdriver.placement.client import PlacementClient

LOG = logging.getLogger(__name__)
_MAX_DELAY = 2.0


class ClaimsPlacement:
    """``placement_of`` from a ``ResourceTracker``'s claims (read afresh
    on each call, so a claim made since counts).

    ``placement_of(instance uuid)`` → provider uuid → class → amount for
    the claimed classes, on the tracker's tree; ``None`` for an instance
    with no claim on any of the tracker's nodes.

    Raises (when called):
        ClaimError: the claims file cannot be believed; the reshape of
            that tree fails with the message.
    """

    def __init__(self, tracker: Any) -> None:
        self.tracker = tracker

    def __call__(self, consumer: str) -> dict[str, dict[str, int]] | None:
        tree = self.tracker.tree
        for nodename, usage in self.tracker.claims().items():
            fit = usage.instances.get(consumer)
            if fit is not None:
                return (fit_placement(fit, nodename, tree)
                        if tree.exists(nodename) else None)
        return None


class DriverPlacement:
    """``placement_of`` with the moves of drivers' reshapes.

    Called, it is ``fallback``'s answer (the claims); its
    :attr:`driver_moves` (root uuid → consumer → provider → class →
    amount) are the allocations drivers moved (the tracker's
    :attr:`~virtdriver.resource_tracker.tracker.ResourceTracker.reshapes`),
    which the :class:`Reshaper` sends as they are.
    """

    def __init__(self, moves: Mapping[str, Any],
                 fallback: PlacementOf | None = None) -> None:
        self.driver_moves = MappingProxyType(
            {root: getattr(m, "moved", m) for root, m in moves.items()})
        self.fallback = fallback

    def __call__(self, consumer: str) -> Mapping | None:
        return self.fallback(consumer) if self.fallback is not None \
            else None


def fit_placement(fit: InstanceFit, nodename: str, tree: TreeReader
                  ) -> dict[str, dict[str, int]]:
    """What ``fit`` takes, per provider of ``tree``: each guest cell's
    shared vCPUs (``VCPU``), pinned vCPUs and emulator CPUs (``PCPU``, as
    Placement allocates them: isolated siblings are not), small-page
    memory (``MEMORY_MB``) or huge pages on its host cell's provider
    (``<node>_NUMA<id>``, or the root when the tree is flat); an instance
    without a NUMA topology on the root."""
    root = tree.record(nodename).uuid
    found: dict[str, dict[str, int]] = {}

    def add(provider: str, rc: str, amount: int) -> None:
        if amount:
            into = found.setdefault(provider, {})
            into[rc] = into.get(rc, 0) + amount

    for cell in fit.cells:
        name = cell_provider_name(nodename, cell.host_cell)
        provider = tree.record(name).uuid if tree.exists(name) else root
        add(provider, orc.VCPU, len(cell.shared_vcpus))
        add(provider, orc.PCPU, len(cell.pinning) + len(cell.emulator_cpus))
        if cell.page_size_kib is None:
            add(provider, orc.MEMORY_MB, cell.memory_mb)
        else:
            add(provider, page_resource_class(cell.page_size_kib),
                cell.pages)
    add(root, orc.VCPU, fit.floating_vcpus)
    add(root, orc.MEMORY_MB, fit.floating_memory_mb)
    return found


def in_use_message(provider: ProviderData, exc: InventoryInUse) -> str:
    """The outcome's error when Placement refused an inventory write for
    inventory in use (one the reshaper did not foresee)."""
    classes = ", ".join(exc.resource_classes) or "some class"
    return (f"inventory in use: Placement refused to remove {classes} "
            f"from provider {provider.name!r} ({provider.uuid}), "
            f"allocations use it ({exc.detail}); that inventory is now "
            "recorded, so the next sync moves those allocations with POST "
            "/reshaper or names the consumers it cannot place")


@dataclass
class ReshapeReport:
    """What :meth:`Reshaper.before_sync` did, for the sync.

    Attributes:
        held: provider uuids the sync must leave alone this time (trees
            refused or failed): not deleted, created or written.
        outcomes: per provider: inventories changed, created, errors.
        notes: one line per tree reshaped (or, dry run, planned).
        conflicts: 409s retried.
    """

    held: set[str] = field(default_factory=set)
    outcomes: dict[str, OutcomeBuilder] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    conflicts: int = 0

    def outcome(self, uuid: str, name: str) -> OutcomeBuilder:
        if uuid not in self.outcomes:
            self.outcomes[uuid] = OutcomeBuilder(uuid, name)
        return self.outcomes[uuid]


class _Retry(Exception):
    """What was read is no longer true: read again."""


class Reshaper:
    """One sync's reshapes (module doc).

    Args:
        client: the Placement client.
        state: the sync state (what the last sync saw; ``CUSTOM_`` names).
        owned_for: the sync's ownership callable: only providers it
            vouches for are reshaped.
        placement_of: where each consumer belongs (:class:`ClaimsPlacement`),
            or ``None``: then only unambiguous moves are possible.
        dry_run: read and plan, send nothing.
        attempts, backoff, sleep: the sync's conflict retries.
    """

    def __init__(self, client: PlacementClient, state: SyncState,
                 owned_for: Callable[[str], Any],
                 placement_of: PlacementOf | None = None, *,
                 dry_run: bool = False, attempts: int = 5,
                 backoff: float = 0.05,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        self.client = client
        self.state = state
        self.owned_for = owned_for
        self.placement_of = placement_of
        self.dry_run = dry_run
        self.attempts = max(1, attempts)
        self.backoff = backoff
        self.sleep = sleep

    def before_sync(self, desired: Sequence[ProviderData],
                    listed: dict[str, Listed]) -> ReshapeReport:
        """Reshape every tree of ``desired`` (the caller's providers) that
        needs it; ``listed`` (Placement's providers by uuid) is updated
        for the trees reshaped.

        Raises:
            PlacementUnavailable: Placement unreachable or failing; what
                was not sent is tried again next sync.
        """
        report = ReshapeReport()
        by_root: dict[str, list[ProviderData]] = {}
        for provider in desired:
            by_root.setdefault(provider.root_uuid, []).append(provider)
        trees: dict[str, dict[str, Listed]] = {}
        for item in listed.values():
            trees.setdefault(item.root_uuid, {})[item.uuid] = item
        given_all = getattr(self.placement_of, "driver_moves", {})
        for root, providers in by_root.items():
            if root not in listed:
                continue   # a new tree: nothing can be allocated on it
            tree = self._ours(trees[root])
            given = given_all.get(root) or {}
            suspects = self._suspects(providers, tree, listed)
            if given and not suspects:
                suspects = [item.uuid for item in tree]
            if not suspects:
                continue
            try:
                self._tree(root, providers, tree, suspects, listed, report,
                           given)
            except PlacementUnavailable:
                raise
            except (PlacementError, ValueError) as exc:
                report.held.update(p.uuid for p in providers)
                report.held.update(item.uuid for item in tree)
                report.outcome(root, listed[root].name).error(
                    f"reshape failed, this tree is left as it is: {exc}")
        return report

    # -- which trees -------------------------------------------------------

    def _ours(self, listed: Mapping[str, Listed]) -> list[Listed]:
        """One tree's providers in Placement that are the caller's: those
        ``owned_for`` vouches for, and children whose uuid is derived from
        such a parent's and their name (the tracker's own proof) — the
        cells a flat tree no longer has, after a restart."""
        known: dict[str, bool] = {}

        def ours(uuid: str) -> bool:
            if uuid not in known:
                known[uuid] = False   # a loop is not a proof
                item = listed[uuid]
                known[uuid] = self.owned_for(uuid) is not None or (
                    item.parent_uuid in listed
                    and is_derived_child(uuid, item.name, item.parent_uuid,
                                         item.root_uuid)
                    and ours(item.parent_uuid))
            return known[uuid]

        return [item for item in listed.values() if ours(item.uuid)]

    def _suspects(self, providers: list[ProviderData], tree: list[Listed],
                  listed: Mapping[str, Listed]) -> list[str]:
        """Providers that may lose an allocated class, from the state's
        records (no request)."""
        wanted = {p.uuid: p for p in providers}
        shape = (any(p.uuid not in listed for p in providers)
                 or any(item.uuid not in wanted for item in tree))
        found = []
        for item in tree:
            target = wanted[item.uuid].inventory if item.uuid in wanted \
                else {}
            record = self.state.providers.get(item.uuid)
            if (record is None and (shape or holds_pages(target))) or (
                    record is not None
                    and (set(record.inventory) - set(target)
                         or memory_shrinks(record.inventory, target))):
                found.append(item.uuid)
        return found

    # -- one tree ------------------------------------------------------------

    def _tree(self, root: str, providers: list[ProviderData],
              tree: list[Listed], suspects: list[str],
              listed: dict[str, Listed], report: ReshapeReport,
              given: Mapping[str, Mapping] = MappingProxyType({})) -> None:
        cache = {uuid: self._allocations(uuid) for uuid in suspects}
        probe = {uuid: ProviderNow(uuid, uuid, root, generation,
                                   allocations=allocations)
                 for uuid, (generation, allocations) in cache.items()}
        if not given and not in_use(probe, {p.uuid: p for p in providers}):
            return   # nothing allocated stands in the way
        created: set[str] = set()
        for attempt in range(1, self.attempts + 1):
            try:
                current = self._current(tree, cache)
                cache = {}
                moving = set(moving_consumers(current.providers, providers))
                moving.update(c for c in given if any(
                    c in p.allocations for p in current.providers.values()))
                current = Current(current.providers, MappingProxyType(
                    {c: self._consumer(c, current) for c in sorted(moving)}))
                plan = plan_reshape(
                    current, providers, self.placement_of,
                    consumer_types=self.client.has("consumer_types"),
                    given=given)
                if plan is None:
                    return
                if isinstance(plan, Refusal):
                    self._refused(plan, providers, tree, report)
                    return
                if not self.dry_run:
                    self._send(plan, created)
                self._done(root, plan, created, listed, report)
                return
            except (_Retry, GenerationConflict, DuplicateProvider):
                report.conflicts += 1
                if attempt == self.attempts:
                    break
                self.sleep(min(_MAX_DELAY, self.backoff * 2 ** (attempt - 1)
                               * (0.5 + random.random())))
                tree = self._ours({
                    item.uuid: item for item in map(
                        Listed.from_body,
                        self.client.list_providers(in_tree=root))})
        raise PlacementRequestError(
            f"generation conflict on every one of {self.attempts} attempts "
            "(another writer keeps changing the tree or its consumers); it "
            "is retried next sync")

    def _current(self, tree: list[Listed],
                 cache: Mapping[str, tuple[int, Mapping]]) -> Current:
        """Inventories and allocations of ``tree``'s providers, each at
        one generation."""
        providers = {}
        for item in tree:
            generation, doc = self.client.get_part(item.uuid, "inventories")
            try:
                inventory = inventory_from_placement(doc)
            except (ValueError, TypeError) as exc:
                raise PlacementRequestError(
                    f"provider {item.uuid}: Placement's inventories are "
                    f"malformed ({exc}); check that the URL is "
                    "Placement's") from None
            held = cache.get(item.uuid)
            if held is None or held[0] != generation:
                held = self._allocations(item.uuid)
            if held[0] != generation:
                raise _Retry()
            providers[item.uuid] = ProviderNow(
                item.uuid, item.name, item.root_uuid, generation, inventory,
                held[1])
        return Current(MappingProxyType(providers))

    def _allocations(self, uuid: str) -> tuple[int, Mapping]:
        """``(generation, consumer → class → amount)`` on ``uuid``."""
        path = f"/resource_providers/{uuid}/allocations"
        body = self.client.request("GET", path)
        try:
            generation = body["resource_provider_generation"]
            found = {consumer: _amounts(entry["resources"])
                     for consumer, entry in body["allocations"].items()}
            if not isinstance(generation, int):
                raise TypeError("generation")
        except (KeyError, TypeError, AttributeError, ValueError):
            raise _malformed("GET", path) from None
        return generation, MappingProxyType(found)

    def _consumer(self, uuid: str, current: Current) -> ConsumerNow:
        """The consumer's record, checked against the providers' view."""
        path = f"/allocations/{uuid}"
        body = self.client.request("GET", path)
        try:
            allocations = {rp: _amounts(entry["resources"])
                           for rp, entry in body["allocations"].items()}
            if not allocations:
                raise _Retry()   # gone since the providers were read
            record = ConsumerNow(
                uuid, body["consumer_generation"], body["project_id"],
                body["user_id"], body.get("consumer_type"),
                MappingProxyType(allocations))
        except (KeyError, TypeError, AttributeError, ValueError):
            raise _malformed("GET", path) from None
        for rp, provider in current.providers.items():
            if allocations.get(rp, {}) != dict(
                    provider.allocations.get(uuid, {})):
                raise _Retry()   # it changed between the reads
        return record

    # -- results -------------------------------------------------------------

    def _send(self, plan: ReshapePlan, created: set[str]) -> None:
        generations = {}
        for uuid, name, parent in plan.create:
            body = self.client.create_provider(uuid, name, parent)
            generations[uuid] = body["generation"]
            created.add(uuid)
        try:
            for rc in sorted({rc for inventory in plan.inventories.values()
                              for rc in inventory
                              if rc.startswith("CUSTOM_")}
                             - self.state.custom_classes):
                self.client.ensure_resource_class(rc)
                self.state.custom_classes.add(rc)
            self.client.request("POST", "/reshaper",
                                body=plan.body(generations))
        except (PlacementError, ValueError):
            self._undo_created(plan, created)
            raise

    def _undo_created(self, plan: ReshapePlan, created: set[str]) -> None:
        """The reshape failed: delete the (empty) providers created for
        it, children first, so Placement is as it was."""
        for uuid, _, _ in reversed(plan.create):
            if uuid not in created:
                continue
            try:
                self.client.delete_provider(uuid)
            except PlacementError as exc:
                LOG.warning("provider %s, created for a reshape that "
                            "failed, could not be deleted again: %s",
                            uuid, exc)
                continue
            created.discard(uuid)

    def _done(self, root: str, plan: ReshapePlan, created: set[str],
              listed: dict[str, Listed], report: ReshapeReport) -> None:
        for uuid, new in plan.inventories.items():
            old = plan.old_inventories[uuid]
            outcome = report.outcome(uuid, plan.names[uuid])
            outcome.inventory.update({
                rc: (old.get(rc), new.get(rc))
                for rc in sorted(old.keys() | new.keys())
                if old.get(rc) != new.get(rc)})
        for uuid in created | {u for u, _, _ in plan.create}:
            report.outcome(uuid, plan.names[uuid]).fields["created"] = True
        what = "; ".join(plan.describe_moves())
        name = plan.names.get(root, root)
        if self.dry_run:
            report.notes.append(
                f"dry run: the tree of {name!r} ({root}) would be reshaped "
                f"in one POST /reshaper, moving {len(plan.moves)} "
                f"consumer(s): {what}")
            return
        report.notes.append(
            f"reshaped the tree of {name!r} ({root}) in one POST "
            f"/reshaper, moving {len(plan.moves)} consumer(s): {what}")
        LOG.info("%s", report.notes[-1])
        self._drop(plan, listed, report)
        for uuid in [u for u, item in listed.items()
                     if item.root_uuid == root]:
            del listed[uuid]
        for body in self.client.list_providers(in_tree=root):
            item = Listed.from_body(body)
            listed[item.uuid] = item

    def _drop(self, plan: ReshapePlan, listed: Mapping[str, Listed],
              report: ReshapeReport) -> None:
        """Delete the providers the new shape has no more (emptied by the
        reshape), children first; one Placement refuses is kept."""
        depth = {}
        for uuid in plan.gone:
            n, node = 0, listed[uuid].parent_uuid
            while node in listed:
                n, node = n + 1, listed[node].parent_uuid
            depth[uuid] = n
        for uuid in sorted(plan.gone, key=lambda u: -depth[u]):
            outcome = report.outcome(uuid, plan.names[uuid])
            try:
                self.client.delete_provider(uuid)
            except ProviderNotFound:
                pass
            except (ProviderInUse, PlacementRequestError) as exc:
                outcome.fields["kept"] = f"emptied but not deleted: {exc}"
                continue
            outcome.fields["deleted"] = True
            self.state.providers.pop(uuid, None)

    def _refused(self, refusal: Refusal, providers: list[ProviderData],
                 tree: list[Listed], report: ReshapeReport) -> None:
        report.held.update(p.uuid for p in providers)
        report.held.update(item.uuid for item in tree)
        for uuid in refusal.in_use:
            report.outcome(uuid, refusal.names.get(uuid, uuid)).error(
                refusal.message(uuid))
        LOG.warning("%s", refusal.message(next(iter(refusal.in_use))))


def _amounts(resources: object) -> dict[str, int]:
    if not isinstance(resources, dict) or not all(
            isinstance(n, int) and not isinstance(n, bool)
            for n in resources.values()):
        raise ValueError("resources")
    return {rc: n for rc, n in resources.items() if n}


def _malformed(method: str, path: str) -> PlacementRequestError:
    return PlacementRequestError(
        f"{method} {path}: Placement's answer is malformed; check that the "
        "URL is Placement's", method=method, path=path)
