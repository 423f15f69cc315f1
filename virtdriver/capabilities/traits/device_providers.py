"""Traits of device providers: a static set and prefix-declared families.

Each device provider (:class:`~virtdriver.capabilities.devices.selection.DeviceOffer`)
gets its own traits, every one with the node-device XML element it came
from as evidence:

* **device kind** (static): ``COMPUTE_MANAGED_PCI_DEVICE`` on PCI
  passthrough providers (a plain function or a VF pool), ``HW_NIC_SRIOV``
  on a VF pool and on a PF with VFs passed through whole, and
  :data:`MISSING` on a provider whose device is gone, unlisted or
  re-typed while allocated.
* **PCI vendor** ``CUSTOM_PCI_VENDOR_<VENDOR>``, **PCI product**
  ``CUSTOM_PCI_PRODUCT_<VENDOR>_<PRODUCT>``, **PCI class**
  ``CUSTOM_PCI_CLASS_<CLASS><SUBCLASS>`` (the labels Node Feature
  Discovery gives PCI devices, as traits) — of the function sold: a VF
  pool's are its VFs'; **mdev type**
  ``CUSTOM_MDEV_TYPE_<TYPE>`` (the trait Nova leaves to operators).
  Dynamic: owned by prefix, so a name no longer derived is removed and
  none can leak.
* **device rule**: a ``device_spec``'s ``traits``, normalised as Nova
  does (``CUSTOM_<NAME>`` unless standard).  The driver owns them while
  a rule names them (:func:`rule_ownership`).

The families derive nothing from a host reading (the device kind's
static traits are unasserted on the root and the cells; the prefixed
families yield nothing): the libvirt driver answers for them per
provider with :func:`offer_traits`, and they are in its registry so the
tracker reconciles them like any other.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import replace
from types import MappingProxyType

import os_traits

from virtdriver.capabilities.devices.model import MdevParent, PCIDevice
from virtdriver.capabilities.devices.selection import (
    MDEV, PCI, VF_POOL, DeviceOffer)
from virtdriver.capabilities.devices.rules import DeviceRules
from virtdriver.capabilities.traits.derive import TraitReport
from virtdriver.capabilities.traits.model import (
    DerivationInputs, Evidence, TraitFamily, TraitResult, TraitState)
from virtdriver.capabilities.traits.names import invalid_reason
from virtdriver.capabilities.traits.ownership import Ownership

#: Marks a provider kept only because its device's units are allocated.
MISSING = "CUSTOM_VIRTDRIVER_DEVICE_MISSING"
VENDOR_PREFIX = "CUSTOM_PCI_VENDOR_"
PRODUCT_PREFIX = "CUSTOM_PCI_PRODUCT_"
CLASS_PREFIX = "CUSTOM_PCI_CLASS_"
MDEV_TYPE_PREFIX = "CUSTOM_MDEV_TYPE_"
#: The family name of a rule's operator traits.
RULE_FAMILY = "device rule"


def _nothing(inputs: DerivationInputs) -> Iterator[TraitResult]:
    return iter(())


_KIND_TRAITS = frozenset({os_traits.COMPUTE_MANAGED_PCI_DEVICE,
                          os_traits.HW_NIC_SRIOV, MISSING})


def _not_on_host(inputs: DerivationInputs) -> Iterator[TraitResult]:
    # The root and the cells never carry them; device providers answer
    # for themselves (offer_traits).
    for trait in sorted(_KIND_TRAITS):
        yield TraitResult(trait, TraitState.UNASSERTED, "device kind", (
            Evidence("device providers", "carry this trait, not the host"),))


KIND = TraitFamily("device kind", _KIND_TRAITS, _not_on_host)
VENDOR = TraitFamily("pci vendor", frozenset(), _nothing, (VENDOR_PREFIX,))
PRODUCT = TraitFamily("pci product", frozenset(), _nothing, (PRODUCT_PREFIX,))
CLASS = TraitFamily("pci class", frozenset(), _nothing, (CLASS_PREFIX,))
MDEV_TYPE = TraitFamily("mdev type", frozenset(), _nothing,
                        (MDEV_TYPE_PREFIX,))

FAMILIES = (KIND, VENDOR, PRODUCT, CLASS, MDEV_TYPE)
#: What device providers' traits are owned by, rules' traits aside.
DEVICE_OWNERSHIP = Ownership.of(FAMILIES)


def rule_ownership(rules: DeviceRules) -> Ownership:
    """The operator traits the rules name: owned while a rule names them."""
    return Ownership(frozenset(t for rule in rules.pci for t in rule.traits))


def _evidence(device: PCIDevice | MdevParent, detail: str,
              element: str) -> Evidence:
    return Evidence(f"node device {device.name}", detail,
                    device.source or None, element)


def offer_traits(offer: DeviceOffer) -> tuple[TraitResult, ...]:
    """Every trait ``offer``'s provider asserts, with evidence."""
    device = offer.device
    results: list[TraitResult] = []
    if offer.kind in (PCI, VF_POOL):
        results.append(KIND.result(
            os_traits.COMPUTE_MANAGED_PCI_DEVICE, TraitState.ASSERTED,
            _evidence(device, f"is listed for passthrough by {offer.rule}",
                      "capability[@type='pci']/address")))
    if offer.kind == VF_POOL:
        results.append(KIND.result(
            os_traits.HW_NIC_SRIOV, TraitState.ASSERTED,
            _evidence(device, f"has {len(offer.members)} listed VF(s)",
                      "capability[@type='virt_functions']/address")))
    elif (offer.kind == PCI and isinstance(device, PCIDevice)
          and device.virtual_functions):
        results.append(KIND.result(
            os_traits.HW_NIC_SRIOV, TraitState.ASSERTED,
            _evidence(device, f"is a PF with {len(device.virtual_functions)}"
                      " VF(s), passed through whole",
                      "capability[@type='virt_functions']/address")))
    # A VF pool sells VFs: its identity is theirs (their product id), not
    # the PF's.
    sold = offer.members[0] if offer.kind == VF_POOL else device
    if isinstance(sold, PCIDevice):
        results.extend(_pci_identity(sold))
    if offer.kind == MDEV and offer.mdev_type is not None:
        type_id = offer.mdev_type.type_id
        results.append(MDEV_TYPE.result(
            os_traits.normalize_name(f"MDEV_TYPE_{type_id}"),
            TraitState.ASSERTED,
            _evidence(device, f"offers mdev type {type_id!r}, the active "
                      f"type chosen by {offer.rule}",
                      f"capability[@type='mdev_types']/type[@id="
                      f"'{type_id}']")))
    for trait in offer.rule_traits:
        results.append(TraitResult(trait, TraitState.ASSERTED, RULE_FAMILY, (
            Evidence(offer.rule, f"gives {device.name} trait {trait}"),)))
    # A name the host made too long for Placement (a 300-character mdev
    # type) cannot be set: left out rather than failing the update.
    return tuple(r for r in results if invalid_reason(r.trait) is None)


def _pci_identity(device: PCIDevice) -> Iterable[TraitResult]:
    vendor = device.vendor_id.upper()
    yield VENDOR.result(
        VENDOR_PREFIX + vendor, TraitState.ASSERTED,
        _evidence(device, f"has vendor id 0x{device.vendor_id}",
                  "capability[@type='pci']/vendor/@id"))
    yield PRODUCT.result(
        f"{PRODUCT_PREFIX}{vendor}_{device.product_id.upper()}",
        TraitState.ASSERTED,
        _evidence(device, f"has product id 0x{device.product_id}",
                  "capability[@type='pci']/product/@id"))
    if device.class_code is not None:
        yield CLASS.result(
            f"{CLASS_PREFIX}{device.class_code >> 8:04X}",
            TraitState.ASSERTED,
            _evidence(device, f"has class 0x{device.class_code:06x}",
                      "capability[@type='pci']/class"))


#: What a device provider is not, when a static trait is unasserted on it.
_KIND_MEANS = {
    os_traits.COMPUTE_MANAGED_PCI_DEVICE:
        "a PCI passthrough device (a function or a pool of VFs)",
    os_traits.HW_NIC_SRIOV: "an SR-IOV PF or a pool of its VFs",
    MISSING: "kept only for what is allocated on a gone device",
}


def kind_unasserted(name: str, trait: str) -> TraitResult:
    """A device-kind ``trait`` unasserted on provider ``name``, saying
    what the provider is not."""
    return KIND.result(trait, TraitState.UNASSERTED, Evidence(
        f"device provider {name}", f"is not {_KIND_MEANS[trait]}"))


def missing_result(name: str, why: str) -> TraitResult:
    """:data:`MISSING` asserted on provider ``name``, saying why."""
    return KIND.result(MISSING, TraitState.ASSERTED, Evidence(
        f"device provider {name}", why))


def with_device_results(report: TraitReport, results: Iterable[TraitResult],
                        ownership: Ownership) -> TraitReport:
    """``report`` answering for the device providers' traits too (a name
    a host family already answers for keeps that answer)."""
    merged = dict(report.results)
    mine = {family.name for family in FAMILIES}
    for result in results:
        earlier = merged.get(result.trait)
        if earlier is None or earlier.family in mine:
            merged[result.trait] = result
    return replace(report, results=MappingProxyType(dict(sorted(
        merged.items()))), ownership=report.ownership.union(ownership))
