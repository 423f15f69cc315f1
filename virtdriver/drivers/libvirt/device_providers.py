"""The libvirt driver's device providers: rules, selection, publication.

One :class:`DeviceProviders` per driver holds the operator's rules
(:func:`~virtdriver.conf.device_rules.device_rules`) and, per update, turns
the reading's devices into providers (:func:`~..device_tree.publish_devices`)
and the node's trait report into one that answers for their traits too.

What is allocated on a device provider comes from the ``allocations``
the tracker passes to ``update_provider_tree`` (Nova's shape: consumer →
``{"allocations": {provider uuid: {"resources": {class: amount}}}}``),
else from ``usage`` (provider uuid → class → amount, or ``None``:
unknown; the agent gives the driver Placement's,
:func:`virtdriver.placement.usages.provider_usage`), else it is not known — then a
gone device's provider is removed from the tree and the sync keeps it
if Placement says it is still allocated.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any

from virtdriver.capabilities.devices.model import DevicesReading
from virtdriver.capabilities.devices.rules import DeviceRules
from virtdriver.capabilities.devices.selection import (
    SelectionError, select_devices)
from virtdriver.capabilities.traits.derive import TraitReport
from virtdriver.capabilities.traits.device_providers import (
    DEVICE_OWNERSHIP, KIND, kind_unasserted, offer_traits, rule_ownership,
    with_device_results)
from virtdriver.capabilities.traits.model import TraitResult, TraitState
from virtdriver.capabilities.traits.registry import LIBVIRT_OWNERSHIP
from virtdriver.drivers.base import DriverError
from virtdriver.drivers.device_tree import (
    device_provider_name, publish_devices)

NO_RULES = DeviceRules()
#: ``usage(uuid)``: class → amount allocated on that provider, or None.
Usage = Callable[[str], "Mapping[str, int] | None"]


def usage_from_allocations(allocations: Mapping[str, Any]) -> Usage:
    """``usage`` read from Nova-shaped ``allocations``."""
    totals: dict[str, dict[str, int]] = {}
    for consumer in allocations.values():
        for rp, entry in (consumer.get("allocations") or {}).items():
            row = totals.setdefault(rp, {})
            for rc, amount in (entry.get("resources") or {}).items():
                row[rc] = row.get(rc, 0) + int(amount)
    return lambda uuid: totals.get(uuid, {})


class DeviceProviders:
    """Device rules and the last publication of one driver."""

    def __init__(self, rules: DeviceRules = NO_RULES,
                 usage: Usage | None = None) -> None:
        self.rules = rules
        self._usage = usage
        self._rule_owned = rule_ownership(rules)
        self.ownership = (LIBVIRT_OWNERSHIP.union(self._rule_owned)
                          if self._rule_owned.static else LIBVIRT_OWNERSHIP)
        self._published: tuple[object, tuple[TraitResult, ...],
                               Mapping[str, tuple[TraitResult, ...]]
                               ] | None = None
        # The steady cycle reads devices equal to the last ones: their
        # offers and traits are not derived again.
        self._last: tuple[DevicesReading, tuple] | None = None
        self._traits: dict = {}

    def use_usage(self, usage: Usage | None) -> None:
        """Replace the usage source (see the module doc)."""
        self._usage = usage

    def offers(self, devices: DevicesReading):
        """The offers of ``devices``, ``None`` when they are unknown.

        Raises:
            DriverError: the rules conflict on this host.
        """
        if not devices.known:
            return None
        last = self._last
        if last is not None and (last[0] is devices or last[0] == devices):
            return last[1]
        try:
            offers = select_devices(devices, self.rules)
        except SelectionError as exc:
            raise DriverError(f"device rules: {exc}") from exc
        self._last = (devices, offers)
        self._traits = {}
        return offers

    def traits_of(self, offer) -> tuple[TraitResult, ...]:
        """:func:`offer_traits`, once per offer of the current reading."""
        # By identity: the offers of one reading are the same objects, and
        # hashing an offer would walk its whole device.
        found = self._traits.get(id(offer))
        if found is None or found[0] is not offer:
            found = self._traits[id(offer)] = (offer, offer_traits(offer))
        return found[1]

    def publish(self, tree: Any, nodename: str, devices: DevicesReading, *,
                nested: bool,
                allocations: Mapping[str, Any] | None = None) -> None:
        """Bring the device providers up to date; remember their traits
        for :meth:`report` of the same reading."""
        offers = self.offers(devices)
        used = (usage_from_allocations(allocations)
                if allocations is not None else self._usage)
        try:
            done = publish_devices(tree, nodename, offers, nested=nested,
                                   used=used, rule_owned=self._rule_owned,
                                   traits_of=self.traits_of)
        except SelectionError as exc:
            raise DriverError(f"device rules: {exc}") from exc
        self._published = (devices, done.results, done.per_provider)

    def report(self, report: TraitReport, devices: DevicesReading
               ) -> TraitReport:
        """``report`` answering for device traits: those the last
        publication of ``devices`` set, else those its offers derive."""
        if self._published is not None and self._published[0] is devices:
            results: tuple[TraitResult, ...] = self._published[1]
        else:
            found: dict[str, TraitResult] = {}
            for offer in self.offers(devices) or ():
                for result in self.traits_of(offer):
                    found.setdefault(result.trait, result)
            for trait in KIND.traits - found.keys():
                found[trait] = KIND.result(trait, TraitState.UNASSERTED)
            results = tuple(found.values())
        return with_device_results(
            report, results, DEVICE_OWNERSHIP.union(self._rule_owned))

    def provider_reports(self, nodename: str, devices: DevicesReading
                         ) -> dict[str, TraitReport]:
        """Device provider name → the report its traits follow (what
        ``explain`` explains per provider): the last publication's for
        the same reading, else the offers' own."""
        if self._published is not None and self._published[0] is devices:
            per = self._published[2]
        else:
            per = {}
            for offer in self.offers(devices) or ():
                try:
                    name = device_provider_name(nodename, offer)
                except SelectionError as exc:
                    raise DriverError(f"device rules: {exc}") from exc
                per[name] = self.traits_of(offer)
        owned = DEVICE_OWNERSHIP.union(self._rule_owned)
        reports = {}
        for name, results in sorted(per.items()):
            found = {r.trait: r for r in results}
            for trait in KIND.traits - found.keys():
                found[trait] = kind_unasserted(name, trait)
            reports[name] = TraitReport(
                MappingProxyType(dict(sorted(found.items()))), owned)
        return reports
