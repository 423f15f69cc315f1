"""Put a host's device providers into its provider tree.

Each :class:`~virtdriver.capabilities.devices.selection.DeviceOffer`
becomes a provider named ``<nodename>_<key>`` (``node1_pci_0000_81_00_0``,
``node1_ap_matrix``) under the NUMA-cell provider of its device's node
(:func:`~.host_tree.cell_provider_name`), or under the root when the
device has no node or the tree is flat.  Its uuid is derived from the
root's and its name (:func:`~.identity.child_uuid`), whatever its parent,
so it is the same provider wherever it sits.
It holds one inventory (the offer's class and total) and the traits of
:func:`~virtdriver.capabilities.traits.device_providers.offer_traits`;
traits the driver does not own on it are kept exactly.

**Devices that change.**  A provider whose device is gone, no longer
listed, or re-typed:

* with no allocation on it (``used`` says so): removed in this update;
* with allocations, or when ``used`` cannot say (``None``: fail safe,
  nothing is removed on a guess): kept, its inventory ``reserved =
  total`` so nothing new lands, the total never below what is used, and
  :data:`~virtdriver.capabilities.traits.device_providers.MISSING` set;
  one log line when it starts; it goes in the first update after its last
  allocation does.

A device whose provider exists under another parent (it gained or lost
a NUMA node, or the host switched between flat and nested) is moved
there, same uuid: the sync re-parents it in Placement (microversion
1.37), its inventory and allocations with it.

**Unknown devices** (``offers is None``): no device provider is
created, changed or removed, and their owned traits are reported unknown
so the tracker keeps them.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from virtdriver.capabilities.devices.selection import (
    DeviceOffer, SelectionError)
from virtdriver.capabilities.traits.device_providers import (
    DEVICE_OWNERSHIP, FAMILIES, KIND, MISSING, RULE_FAMILY, missing_result,
    offer_traits)
from virtdriver.capabilities.traits.model import TraitResult, TraitState
from virtdriver.capabilities.traits.ownership import Ownership
from virtdriver.drivers.host_tree import cell_provider_name
from virtdriver.drivers.identity import child_uuid, is_derived_child
from virtdriver.providers.record import MAX_NAME_LENGTH as NAME_LIMIT

LOG = logging.getLogger(__name__)

_NONE = Ownership()
#: ``used(uuid)``: resource class → amount allocated on that provider,
#: or ``None`` when that cannot be known.
Used = Callable[[str], "Mapping[str, int] | None"]


@dataclass(frozen=True)
class DevicePublication:
    """What the device providers assert, for the node's trait report.

    ``results`` answer for every device trait on any device provider:
    asserted where some provider asserts it, unknown where only a kept
    (missing) or unknown provider carries it.
    """

    results: tuple[TraitResult, ...] = ()
    providers: tuple[str, ...] = ()
    #: Provider name → the results its traits follow (``explain``'s rows).
    per_provider: Mapping[str, tuple[TraitResult, ...]] = field(
        default_factory=dict)


def device_provider_name(nodename: str, offer: DeviceOffer) -> str:
    """``<nodename>_<key>``, refused past Placement's name limit."""
    name = f"{nodename}_{offer.key}"
    if len(name) > NAME_LIMIT:
        raise SelectionError(
            f"device provider name {name[:40]}… would be {len(name)} "
            f"characters, past Placement's {NAME_LIMIT}: node {nodename!r} "
            f"with device {offer.key} listed by {offer.rule}; shorten the "
            "host name or stop listing the device")
    return name


def _record(total: int, reserved: int = 0) -> dict[str, Any]:
    return {"total": total, "reserved": reserved, "min_unit": 1,
            "max_unit": total, "step_size": 1, "allocation_ratio": 1.0}


def existing_device_providers(tree: Any, nodename: str) -> dict[str, Any]:
    """Name → record of the device providers this module made under
    ``nodename`` (derived uuids, named ``<nodename>_…``, not cells)."""
    cell = re.compile(re.escape(nodename) + r"_NUMA\d+")
    found = {}
    for uuid in tree.get_provider_uuids(nodename)[1:]:
        data = tree.record(uuid)
        if (data.name.startswith(f"{nodename}_")
                and not cell.fullmatch(data.name)
                and is_derived_child(uuid, data.name, data.parent_uuid,
                                     data.root_uuid)):
            found[data.name] = data
    return found


def lift_device_providers(tree: Any, nodename: str,
                          cells: set[str]) -> None:
    """Move device providers whose cell is not among ``cells`` (the cell
    providers the update keeps) under the root, same uuid, inventory and
    traits — before the host's publication removes those cells with
    whatever is under them (a switch to flat, a NUMA cell gone)."""
    if not tree.exists(nodename):
        return
    root = tree.record(nodename)
    for data in existing_device_providers(tree, nodename).values():
        if data.parent_uuid == root.uuid:
            continue
        if tree.record(data.parent_uuid).name in cells:
            continue
        tree.remove(data.uuid)
        tree.new_child(data.name, root.uuid, data.uuid)
        tree.update_inventory(data.uuid, dict(data.inventory))
        tree.update_traits(data.uuid, data.traits)


def publish_devices(tree: Any, nodename: str,
                    offers: tuple[DeviceOffer, ...] | None, *,
                    nested: bool = True, used: Used | None = None,
                    rule_owned: Ownership = _NONE,
                    traits_of: Callable[[DeviceOffer], tuple[
                        TraitResult, ...]] = offer_traits
                    ) -> DevicePublication:
    """Bring ``nodename``'s device providers up to date (module doc);
    ``traits_of`` gives an offer's traits (a caller may memoise)."""
    used = used or (lambda uuid: None)
    owned = DEVICE_OWNERSHIP.union(rule_owned)
    existing = existing_device_providers(tree, nodename)
    results: dict[str, TraitResult] = {}
    per: dict[str, tuple[TraitResult, ...]] = {}
    if offers is None:
        for name, data in existing.items():
            mine: dict[str, TraitResult] = {}
            _unknown(mine, data.traits, owned, "device reading unknown")
            per[name] = tuple(mine.values())
            _unknown(results, data.traits, owned, "device reading unknown")
        return DevicePublication(_final(results), tuple(existing), per)
    root = tree.record(nodename)
    wanted = {device_provider_name(nodename, o): o for o in offers}
    for name, data in existing.items():
        if name not in wanted:
            kept = _gone(tree, data, used(data.uuid), owned, results,
                         "its device is gone or no longer listed")
            if kept:
                per[name] = kept
    for name, offer in wanted.items():
        parent = root.name
        if nested and offer.numa_node is not None:
            cell = cell_provider_name(nodename, offer.numa_node)
            parent = cell if tree.exists(cell) else root.name
        parent_uuid = tree.record(parent).uuid
        data = existing.get(name)
        if data is not None and data.parent_uuid != parent_uuid:
            LOG.info("device provider %s moves under %s", name, parent)
            tree.remove(data.uuid)
            tree.new_child(name, parent_uuid, data.uuid)
        elif data is None:
            tree.new_child(name, parent_uuid, child_uuid(root.uuid, name))
            data = tree.record(name)
        known = used(data.uuid)
        usage = known or {}
        retyped = {rc for rc in data.inventory if rc != offer.resource_class}
        if (known is None and retyped) or any(
                rc != offer.resource_class and amount
                for rc, amount in usage.items()):
            per[name] = _gone(
                tree, data, known, owned, results,
                f"re-typed to {offer.resource_class}")
            continue
        total = offer.total
        taken = usage.get(offer.resource_class, 0)
        inventory = {}
        if max(total, taken):
            inventory[offer.resource_class] = _record(
                max(total, taken), max(0, taken - total))
        tree.update_inventory(name, inventory)
        asserted = traits_of(offer)
        per[name] = asserted
        for result in asserted:
            earlier = results.get(result.trait)
            if earlier is None or earlier.state is TraitState.UNKNOWN:
                results[result.trait] = result
        tree.update_traits(name, frozenset(
            t for t in data.traits if not owned.owns(t))
            | {r.trait for r in asserted})
    return DevicePublication(_final(results), tuple(wanted), per)


def _allocated(usage: Mapping[str, int] | None) -> bool:
    return bool(usage) and any(usage.values())


def _gone(tree: Any, data: Any, usage: Mapping[str, int] | None,
          owned: Ownership, results: dict[str, TraitResult],
          why: str) -> tuple[TraitResult, ...]:
    """Remove ``data``'s provider when nothing is allocated on it, else —
    allocated, or ``usage`` unknown (``None``: fail safe) — keep it
    reserved; the results of a kept one (none when removed)."""
    if usage is not None and not _allocated(usage):
        tree.remove(data.uuid)
        LOG.info("device provider %s removed: %s", data.name, why)
        return ()
    usage = usage or {}
    inventory = {}
    for rc, inv in data.inventory.items():
        total = max(inv.total, usage.get(rc, 0))
        inventory[rc] = _record(total, total)
    for rc, amount in usage.items():
        if rc not in inventory and amount:
            inventory[rc] = _record(amount, amount)
    tree.update_inventory(data.name, inventory)
    held = (", ".join(f"{rc}={n}" for rc, n in sorted(usage.items()) if n)
            + " is allocated on it") if usage else (
        "what is allocated on it cannot be known here")
    if MISSING not in data.traits:
        LOG.warning("device provider %s: %s, but %s; kept with reserved = "
                    "total until its last allocation goes", data.name, why,
                    held)
    tree.update_traits(data.name, data.traits | {MISSING})
    _unknown(results, data.traits - {MISSING}, owned,
             "kept while allocated")
    missing = missing_result(data.name, f"{why}, but {held}")
    results[MISSING] = missing
    mine: dict[str, TraitResult] = {}
    _unknown(mine, data.traits - {MISSING}, owned, "kept while allocated")
    return (missing, *mine.values())


def _unknown(results: dict[str, TraitResult], traits, owned: Ownership,
             why: str) -> None:
    for trait in traits:
        if owned.owns(trait) and trait not in results:
            results[trait] = TraitResult(trait, TraitState.UNKNOWN,
                                         family_of(trait), ())


def family_of(trait: str) -> str:
    """The device family that owns ``trait`` (a rule's, when none)."""
    return next((f.name for f in FAMILIES if trait in f.traits
                 or trait.startswith(f.prefixes)),
                RULE_FAMILY)


def _final(results: dict[str, TraitResult]) -> tuple[TraitResult, ...]:
    for trait in KIND.traits - results.keys():
        results[trait] = KIND.result(trait, TraitState.UNASSERTED)
    return tuple(results[name] for name in sorted(results))
