"""Plan a reshape: inventory that must move while allocations use it.

Pure, no I/O.  :func:`plan_reshape` compares what Placement holds for one
tree (:class:`Current`: each provider's inventories and allocations, and
the records of the consumers that must move) with the desired tree, and
answers with a :class:`ReshapePlan` (one ``POST /reshaper`` body: every
changed inventory at its generation, every moving consumer's complete new
allocations), a :class:`Refusal` (consumers whose destination is not
known: nothing may be sent), or ``None`` (no allocation stands in the way:
the ordinary inventory writes will do).

A reshape is needed when a provider has allocations of a resource class
that the desired tree no longer gives it: the tree switched between flat
and nested (``VCPU`` leaves the root for the NUMA cells, or the cells go
away), or ``VCPU`` became ``PCPU`` (``cpu_dedicated_set``).  Placement
lets inventory shrink under its usage, but refuses to remove a class that
is allocated (``placement.inventory.inuse``).  Only the consumers holding
such an allocation move; every other allocation stays as it is.

Where a moving consumer now belongs:

* **Its claim**, if ``placement_of(consumer)`` answers: that answer
  replaces the consumer's allocations of the claimed classes
  (:func:`claimed_class`: ``VCPU``, ``PCPU``, ``MEMORY_MB``, huge pages)
  in the tree.  It must account for what Placement allocates — the same
  CPUs (``VCPU`` + ``PCPU``: a pinned instance's ``VCPU`` becomes
  ``PCPU``), the same memory, the same pages — on providers of the tree
  that will offer those classes.
* **Otherwise**, each allocation stays where the class is still offered,
  or moves to the one provider of the tree that will offer it (flat mode:
  the root).  When no provider or several would (two NUMA cells), its
  destination is not known.
* **Nowhere**: a provider gone from the tree whose allocated classes no
  provider of the tree offers (a device that vanished, seen by a sync
  whose tracker could not keep it) is left out of the reshape — its
  allocations stay on it, the deletions keep it while they last — rather
  than holding the whole tree.

* **The driver's word**, when the driver reshaped (it raised
  ``ReshapeNeeded`` and moved the allocations it was given,
  :mod:`virtdriver.resource_tracker.reshape_step`): ``given[consumer]``
  replaces the consumer's allocations in the tree, every class; they must
  be on providers of the new tree and add up to what Placement allocates
  there, class by class (``VCPU`` and ``PCPU`` together).  A consumer the
  driver moved moves even if no class is lost.

Any consumer whose destination is not known, or whose new allocations
would not fit, refuses the whole tree.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

import os_resource_classes as orc

from virtdriver.drivers.host_tree import PAGE_RC_PREFIX
from virtdriver.placement.memory_upgrade import doubled_memory, undouble
from virtdriver.placement.plan import same_inventory
from virtdriver.providers.inventory import Inventory
from virtdriver.providers.record import ProviderData

#: Resource classes the NUMA claims speak for.
CLAIMED_CLASSES = frozenset({orc.VCPU, orc.PCPU, orc.MEMORY_MB})
#: ``placement_of(consumer)``: its allocations of the claimed classes,
#: provider uuid → class → amount, or ``None`` when nothing says.
PlacementOf = Callable[[str], Mapping[str, Mapping[str, int]] | None]
Allocations = Mapping[str, Mapping[str, int]]
#: What Placement says when a consumer was never given a type.
UNKNOWN_TYPE = "unknown"
_CPU = "CPU (VCPU + PCPU)"


def claimed_class(rc: str) -> bool:
    """Whether the claims say where ``rc`` is used (CPUs, memory, pages)."""
    return rc in CLAIMED_CLASSES or rc.startswith(PAGE_RC_PREFIX)


@dataclass(frozen=True)
class ProviderNow:
    """One provider as Placement holds it, read at one generation.

    Attributes:
        allocations: consumer uuid → resource class → amount, on this
            provider.
    """

    uuid: str
    name: str
    root_uuid: str
    generation: int
    inventory: Mapping[str, Inventory] = field(
        default_factory=lambda: MappingProxyType({}))
    allocations: Allocations = field(
        default_factory=lambda: MappingProxyType({}))


@dataclass(frozen=True)
class ConsumerNow:
    """A consumer's record (``GET /allocations/{uuid}``).

    Attributes:
        allocations: provider uuid → class → amount, on every provider
            (also outside the tree: those allocations are kept as they
            are).
        consumer_type: ``None`` when the microversion has no types,
            ``"unknown"`` for a consumer never given one.
    """

    uuid: str
    generation: int
    project_id: str
    user_id: str
    consumer_type: str | None
    allocations: Allocations


@dataclass(frozen=True)
class Current:
    """Placement's view of one tree: its providers (only the caller's),
    and the records of the consumers :func:`moving_consumers` names."""

    providers: Mapping[str, ProviderNow]
    consumers: Mapping[str, ConsumerNow] = field(
        default_factory=lambda: MappingProxyType({}))


@dataclass(frozen=True)
class Move:
    """One consumer's allocations in the tree, before and after."""

    consumer: str
    old: Allocations
    new: Allocations
    by_claim: bool


@dataclass(frozen=True)
class ReshapePlan:
    """One ``POST /reshaper``.

    Attributes:
        in_use: provider → the allocated classes it loses (why a reshape
            is needed).
        inventories: provider → its complete new inventory, for every
            provider of the tree whose inventory changes.
        old_inventories: provider → its inventory now (empty for one to
            create).
        generations: provider → the generation it was read at (absent for
            one to create).
        create: providers to create first, parents first:
            ``(uuid, name, parent uuid)``.
        gone: providers the desired tree has no more (emptied here, to
            delete afterwards).
        moves: consumer → :class:`Move`, for every consumer that moves.
        consumers: the moving consumers' records.
        names: provider uuid → name, for messages.
    """

    in_use: Mapping[str, tuple[str, ...]]
    inventories: Mapping[str, Mapping[str, Inventory]]
    old_inventories: Mapping[str, Mapping[str, Inventory]]
    generations: Mapping[str, int]
    create: tuple[tuple[str, str, str | None], ...]
    gone: tuple[str, ...]
    moves: Mapping[str, Move]
    consumers: Mapping[str, ConsumerNow]
    names: Mapping[str, str]
    consumer_types: bool = True

    def body(self, created: Mapping[str, int] = MappingProxyType({})
             ) -> dict:
        """The request body; ``created``: generation of each provider
        created for it (``POST /resource_providers`` answered it)."""
        generations = {**self.generations, **created}
        missing = [u for u in self.inventories if u not in generations]
        if missing:
            raise ValueError(f"providers {', '.join(missing)} have no "
                             "generation; create them first")
        inventories = {
            uuid: {"resource_provider_generation": generations[uuid],
                   "inventories": {rc: rec.as_dict() for rc, rec
                                   in sorted(inventory.items())}}
            for uuid, inventory in self.inventories.items()}
        allocations = {}
        for uuid, move in self.moves.items():
            record = self.consumers[uuid]
            kept = {rp: res for rp, res in record.allocations.items()
                    if rp not in move.old}
            entry = {
                "allocations": {rp: {"resources": dict(res)} for rp, res
                                in sorted({**kept, **move.new}.items())},
                "project_id": record.project_id,
                "user_id": record.user_id,
                "consumer_generation": record.generation}
            if self.consumer_types:
                entry["consumer_type"] = record.consumer_type
            allocations[uuid] = entry
        return {"inventories": inventories, "allocations": allocations}

    def describe_moves(self) -> list[str]:
        """One phrase per consumer: ``consumer C: VCPU 2 on 'cn1' → VCPU
        2 on 'cn1_NUMA1'``."""
        return [f"consumer {uuid}: {_where(move.old, self.names)} → "
                f"{_where(move.new, self.names)}"
                for uuid, move in sorted(self.moves.items())]


@dataclass(frozen=True)
class Refusal:
    """The tree cannot be reshaped now; nothing may be sent.

    Attributes:
        in_use: provider → the allocated classes it would lose.
        consumers: consumer → why it cannot be moved.
        names: provider uuid → name, for messages.
    """

    in_use: Mapping[str, tuple[str, ...]]
    consumers: Mapping[str, str]
    names: Mapping[str, str]

    def message(self, provider: str) -> str:
        """One line for ``provider``'s outcome: what is in use, which
        consumers cannot be placed and why, what to do."""
        classes = ", ".join(self.in_use.get(provider, ())) or "inventory"
        why = "; ".join(f"consumer {c}: {reason}" for c, reason
                        in sorted(self.consumers.items()))
        return (f"inventory in use: {classes} on provider "
                f"{self.names.get(provider, provider)!r} ({provider}) is "
                f"allocated and must move, but the reshaper cannot place "
                f"{len(self.consumers)} consumer(s) ({why}); nothing in "
                "this tree was changed — claim those instances on this "
                "host or move their allocations in Placement, and the next "
                "sync reshapes")


def in_use(current: Mapping[str, ProviderNow],
           desired: Mapping[str, ProviderData]
           ) -> dict[str, tuple[str, ...]]:
    """Provider → the classes it is allocated and the desired tree no
    longer gives it (all of them for a provider gone from the tree), and
    ``MEMORY_MB`` where a consumer holds memory twice
    (:func:`doubled_memory`)."""
    found = _lost(current, desired)
    for uuid in doubled_memory(current):
        found[uuid] = tuple(sorted({*found.get(uuid, ()), orc.MEMORY_MB}))
    return found


def _lost(current: Mapping[str, ProviderNow],
          desired: Mapping[str, ProviderData]) -> dict[str, tuple[str, ...]]:
    found = {}
    for uuid, provider in current.items():
        target = desired[uuid].inventory if uuid in desired else {}
        lost = sorted({rc for used in provider.allocations.values()
                       for rc, amount in used.items()
                       if amount and rc not in target})
        if lost:
            found[uuid] = tuple(lost)
    return found


def moving_consumers(current: Mapping[str, ProviderNow],
                     desired: Iterable[ProviderData]) -> list[str]:
    """The consumers holding an allocation that must move, sorted."""
    wanted = {p.uuid: p for p in desired}
    lost = _lost(current, wanted)
    moving = {c for uuid, classes in lost.items()
              for c, used in current[uuid].allocations.items()
              if any(used.get(rc) for rc in classes)}
    moving.update(*doubled_memory(current).values())
    return sorted(moving)


def plan_reshape(current: Current, desired: Iterable[ProviderData],
                 placement_of: PlacementOf | None = None, *,
                 consumer_types: bool = True,
                 given: Mapping[str, Allocations] | None = None
                 ) -> ReshapePlan | Refusal | None:
    """What moves, in one request, or why it cannot (module doc).

    Args:
        current: Placement's view of the tree (the caller's providers
            only; consumers' records for :func:`moving_consumers`).
        desired: the tree's providers as they should be (one root's).
        placement_of: the claims' answer per consumer, or ``None``.
        consumer_types: the microversion (1.38+) needs ``consumer_type``
            on every consumer written.
        given: consumer → its new allocations, from the driver's reshape
            (module doc); consumers Placement does not list are ignored.

    Returns:
        ``None`` when no allocation stands in the way of the ordinary
        inventory writes.

    Raises:
        ValueError: a moving consumer's record is missing from
            ``current.consumers`` (the caller must read them).
    """
    wanted = {p.uuid: p for p in desired}
    providers = current.providers
    lost = in_use(providers, wanted)
    stranded = _stranded(lost, wanted)
    if stranded:
        # Nothing can take what is allocated on them: they stay as they
        # are (the deletions keep them while allocated), and consumers'
        # allocations there are kept as they are.
        providers = {u: p for u, p in providers.items() if u not in stranded}
        lost = {u: c for u, c in lost.items() if u not in stranded}
    tree = set(providers) | set(wanted)
    given = {c: a for c, a in (given or {}).items()
             if any(c in p.allocations for p in providers.values())}
    if not lost and not given:
        return None
    names = {**{u: p.name for u, p in providers.items()},
             **{u: p.name for u, p in wanted.items()}}
    moving = sorted(set(moving_consumers(providers, wanted.values()))
                    | set(given))
    absent = [c for c in moving if c not in current.consumers]
    if absent:
        raise ValueError(f"no record of consumers {', '.join(absent)}; "
                         "read GET /allocations/{consumer} first")
    reasons: dict[str, str] = {}
    moves: dict[str, Move] = {}
    for uuid in moving:
        record = current.consumers[uuid]
        held = {rp: MappingProxyType({rc: n for rc, n in res.items() if n})
                for rp, res in record.allocations.items() if rp in tree}
        old = undouble(held)
        if consumer_types and record.consumer_type in (None, UNKNOWN_TYPE):
            reasons[uuid] = (
                "it has no consumer type, which the reshaper at "
                "microversion 1.38+ must name (set one with PUT "
                "/allocations/{consumer})")
            continue
        if uuid in given:
            answer = given[uuid]
            new, why = _by_driver(old, answer, tree, wanted, names)
        else:
            answer = (placement_of(uuid) if placement_of is not None
                      else None)
            new, why = (_by_claim(old, answer, wanted, names)
                        if answer is not None
                        else _by_offer(old, wanted, names))
        if why:
            reasons[uuid] = why
        else:
            moves[uuid] = Move(uuid, MappingProxyType(held), new,
                               answer is not None)
    if not reasons:
        reasons = _capacity(providers, wanted, moves, names)
    if reasons:
        return Refusal(MappingProxyType(lost), MappingProxyType(reasons),
                       MappingProxyType(names))
    return _plan(providers, wanted, lost, moves, current.consumers, names,
                 consumer_types)


def _stranded(lost: Mapping[str, tuple[str, ...]],
              wanted: Mapping[str, ProviderData]) -> set[str]:
    """Providers gone from the tree whose allocated classes no provider
    of the tree will offer (a device that vanished): no reshape can move
    those allocations anywhere."""
    offered = {rc for provider in wanted.values()
               for rc in provider.inventory}
    return {uuid for uuid, classes in lost.items()
            if uuid not in wanted and not offered.intersection(classes)}


def _plan(providers: Mapping[str, ProviderNow],
          wanted: Mapping[str, ProviderData], lost: Mapping[str, tuple],
          moves: Mapping[str, Move], consumers: Mapping[str, ConsumerNow],
          names: Mapping[str, str], consumer_types: bool) -> ReshapePlan:
    inventories, old = {}, {}
    for uuid, provider in providers.items():
        target = wanted[uuid].inventory if uuid in wanted else {}
        if not same_inventory(provider.inventory, target):
            inventories[uuid] = MappingProxyType(dict(target))
            old[uuid] = provider.inventory
    receiving = {rp for move in moves.values() for rp in move.new}
    create = []
    for uuid, provider in wanted.items():   # parents first
        if uuid not in providers and (provider.inventory
                                      or uuid in receiving):
            create.append((uuid, provider.name, provider.parent_uuid))
            inventories[uuid] = MappingProxyType(dict(provider.inventory))
            old[uuid] = MappingProxyType({})
    return ReshapePlan(
        in_use=MappingProxyType(dict(lost)),
        inventories=MappingProxyType(inventories),
        old_inventories=MappingProxyType(old),
        generations=MappingProxyType({u: p.generation
                                      for u, p in providers.items()}),
        create=tuple(create),
        gone=tuple(u for u in providers if u not in wanted),
        moves=MappingProxyType(dict(moves)),
        consumers=MappingProxyType({c: consumers[c] for c in moves}),
        names=MappingProxyType(names), consumer_types=consumer_types)


def _by_claim(old: Allocations, answer: Allocations,
              wanted: Mapping[str, ProviderData], names: Mapping[str, str]
              ) -> tuple[Allocations, str | None]:
    """The claim's answer for the claimed classes, the rest by offer."""
    new: dict[str, dict[str, int]] = {}
    for rp, res in answer.items():
        if rp not in wanted:
            return {}, (f"its claim places it on provider {rp}, which is "
                        "not in the tree")
        for rc, amount in res.items():
            if not claimed_class(rc):
                return {}, (f"its claim names {rc}, which claims do not "
                            "account for")
            if amount:
                new.setdefault(rp, {})[rc] = amount
    before, after = _kinds(old), _kinds(new)
    if before != after:
        return {}, (f"its claim accounts for {_totals(after)} but "
                    f"Placement allocates {_totals(before)} in this tree")
    rest = {rp: {rc: n for rc, n in res.items() if not claimed_class(rc)}
            for rp, res in old.items()}
    others, why = _by_offer(rest, wanted, names)
    if why:
        return {}, why
    for rp, res in others.items():
        for rc, amount in res.items():
            new.setdefault(rp, {})[rc] = amount
    return _frozen(new), None


def _by_driver(old: Allocations, answer: Allocations, tree: set[str],
               wanted: Mapping[str, ProviderData], names: Mapping[str, str]
               ) -> tuple[Allocations, str | None]:
    """The driver's reshape's allocations in the tree, checked."""
    new: dict[str, dict[str, int]] = {}
    for rp, res in answer.items():
        if rp not in tree:
            continue   # outside the tree: kept as Placement has it
        if rp not in wanted:
            return {}, (f"the driver's reshape leaves it on provider "
                        f"{names.get(rp, rp)!r}, which the new tree has "
                        "no more")
        for rc, amount in res.items():
            if amount:
                new.setdefault(rp, {})[rc] = amount
    before, after = _every_kind(old), _every_kind(new)
    if before != after:
        return {}, (f"the driver's reshape gives it {_totals(after)} but "
                    f"Placement allocates {_totals(before)} in this tree")
    return _frozen(new), None


def _every_kind(allocations: Allocations) -> dict[str, int]:
    """Amounts by class, ``VCPU`` and ``PCPU`` together."""
    totals: dict[str, int] = {}
    for res in allocations.values():
        for rc, amount in res.items():
            if amount:
                kind = _CPU if rc in (orc.VCPU, orc.PCPU) else rc
                totals[kind] = totals.get(kind, 0) + amount
    return totals


def _by_offer(old: Allocations, wanted: Mapping[str, ProviderData],
              names: Mapping[str, str]
              ) -> tuple[Allocations, str | None]:
    """Each allocation where its class is still offered, or on the one
    provider of the tree that will offer it."""
    new: dict[str, dict[str, int]] = {}
    for rp, res in sorted(old.items()):
        for rc, amount in sorted(res.items()):
            if not amount:
                continue
            if rp in wanted and rc in wanted[rp].inventory:
                target = rp
            else:
                offers = sorted(u for u, p in wanted.items()
                                if rc in p.inventory)
                if len(offers) != 1:
                    where = (" or ".join(repr(names[u]) for u in offers)
                             if offers else "no provider of the tree")
                    return {}, (f"no claim says where its {rc} {amount} on "
                                f"{names.get(rp, rp)!r} goes ({where} will "
                                "offer it)")
                target = offers[0]
            into = new.setdefault(target, {})
            into[rc] = into.get(rc, 0) + amount
    return _frozen(new), None


def _capacity(providers: Mapping[str, ProviderNow],
              wanted: Mapping[str, ProviderData],
              moves: Mapping[str, Move], names: Mapping[str, str]
              ) -> dict[str, str]:
    """Why moved allocations would not fit the new inventories."""
    used: dict[tuple[str, str], int] = {}
    for uuid, provider in providers.items():
        for consumer, res in provider.allocations.items():
            if consumer not in moves:
                for rc, amount in res.items():
                    used[uuid, rc] = used.get((uuid, rc), 0) + amount
    for move in moves.values():
        for rp, res in move.new.items():
            for rc, amount in res.items():
                used[rp, rc] = used.get((rp, rc), 0) + amount
    reasons = {}
    for move in sorted(moves.values(), key=lambda m: m.consumer):
        found = [f"its {rc} {amount} on {names.get(rp, rp)!r} {why}"
                 for rp, res in sorted(move.new.items())
                 for rc, amount in sorted(res.items())
                 if (why := _misfit(wanted[rp].inventory.get(rc), amount,
                                    used[rp, rc]))]
        if found:
            reasons[move.consumer] = found[0]
    return reasons


def _misfit(record: Inventory | None, amount: int, total_used: int
            ) -> str | None:
    if record is None:
        return "would be on a provider that will not offer it"
    capacity = int((record.total - record.reserved)
                   * record.allocation_ratio)
    if total_used > capacity:
        return (f"would not fit: {total_used} used of a capacity of "
                f"{capacity}")
    if not (record.min_unit <= amount <= record.max_unit) or \
            amount % record.step_size:
        return (f"breaks the inventory's min_unit {record.min_unit}, "
                f"max_unit {record.max_unit} or step_size "
                f"{record.step_size}")
    return None


def _kinds(allocations: Allocations) -> dict[str, int]:
    """Claimed amounts by kind: CPUs (VCPU and PCPU together), memory,
    each page size."""
    totals: dict[str, int] = {}
    for res in allocations.values():
        for rc, amount in res.items():
            if claimed_class(rc) and amount:
                kind = _CPU if rc in (orc.VCPU, orc.PCPU) else rc
                totals[kind] = totals.get(kind, 0) + amount
    return totals


def _totals(totals: Mapping[str, int]) -> str:
    return ", ".join(f"{kind} {n}" for kind, n in sorted(totals.items())) \
        or "nothing"


def _where(allocations: Allocations, names: Mapping[str, str]) -> str:
    return "; ".join(
        f"{names.get(rp, rp)!r}: " + ", ".join(
            f"{rc} {n}" for rc, n in sorted(res.items()))
        for rp, res in sorted(allocations.items(),
                              key=lambda item: names.get(item[0], item[0]))
    ) or "nothing"


def _frozen(allocations: Mapping[str, Mapping[str, int]]) -> Allocations:
    return MappingProxyType({rp: MappingProxyType(dict(res))
                             for rp, res in allocations.items() if res})
