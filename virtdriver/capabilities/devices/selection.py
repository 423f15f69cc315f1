"""Which host devices the operator's rules expose, and as what.

Pure: a :class:`~.model.HostDevices` and :class:`~.rules.DeviceRules` in,
one :class:`DeviceOffer` per device provider out, or a
:class:`SelectionError` naming both rules of a conflict.  An unlisted
device is never exposed.

* **PCI passthrough**: each function is listed by the first
  ``device_spec`` that matches it (Nova's order); one whose rule has a
  ``physical_network`` is Neutron's (an SR-IOV port), not a provider, as
  in Nova.  A listed PF or plain
  function is one provider of one unit; listed VFs are pooled on their
  PF's provider, one unit each.  Resource class: the rule's, else
  ``CUSTOM_PCI_<VENDOR>_<PRODUCT>``.
* **mdev**: one active type per parent: the type whose
  ``[mdev_<type>] device_addresses`` lists the parent, else (Nova's
  default) the first enabled type without addresses — if the parent
  offers it.  Total = the
  parent's existing mdevs of the type + ``availableInstances``;
  ``max_instances`` caps the type's total over its parents (allotted in
  address order, never below what exists): a parent past the cap keeps
  its provider.  Class: ``mdev_class`` when set, else ``VGPU`` for a
  display controller, else ``CUSTOM_MDEV_<TYPE>``.

Refused (:class:`SelectionError`): a function listed for passthrough and
chosen as an mdev parent (or its PF or one of its VFs listed); a PF and
its VFs both listed; VFs of one PF with different classes or traits; a
parent listed by two types' ``device_addresses``.
"""

from __future__ import annotations

from dataclasses import dataclass

import os_resource_classes as orc

from virtdriver.capabilities.devices.model import (
    HostDevices, MdevParent, MdevType, PCIDevice)
from virtdriver.capabilities.devices.rules import DeviceRules, MdevRule, PciRule
from virtdriver.providers.inventory import invalid_resource_class_reason

PCI = "pci"
VF_POOL = "vf-pool"
MDEV = "mdev"


class SelectionError(ValueError):
    """Two rules, or a rule and the host, contradict each other."""


@dataclass(frozen=True, slots=True)
class DeviceOffer:
    """One device provider to publish.

    Attributes:
        key: the provider name's suffix after ``<node>_``: Nova's
            ``pci_0000_81_00_0`` for PCI functions (a VF pool takes its
            PF's), the libvirt name of a non-PCI mdev parent
            (``ap_matrix``, ``css_0_0_fffe``).
        kind: :data:`PCI`, :data:`VF_POOL` or :data:`MDEV`.
        device: the PCI function or mdev parent the provider stands for
            (a VF pool's PF, when listed; else its first VF).
        members: the functions whose units it holds (the VFs of a pool).
        numa_node: the cell it belongs under, ``None``: the root.
        resource_class, total: its one inventory (``total`` may be 0: an
            mdev parent past ``max_instances`` keeps its provider).
        rule: the label of the rule that listed it.
        rule_traits: the rule's operator traits (``device_spec``).
        mdev_type: the active type of an mdev parent.
        existing: mdevs of that type the parent holds now.
        capped: ``max_instances`` cut the total (by how much).
    """

    key: str
    kind: str
    device: PCIDevice | MdevParent
    members: tuple[PCIDevice, ...]
    numa_node: int | None
    resource_class: str
    total: int
    rule: str
    rule_traits: tuple[str, ...] = ()
    mdev_type: MdevType | None = None
    existing: int = 0
    capped: int = 0


def default_pci_class(device: PCIDevice) -> str:
    """``CUSTOM_PCI_<VENDOR>_<PRODUCT>``, Nova's default."""
    return orc.normalize_name(f"PCI_{device.vendor_id}_{device.product_id}")


def default_mdev_class(type_id: str, display: bool) -> str:
    """``VGPU`` on a display controller, else ``CUSTOM_MDEV_<TYPE>``."""
    return orc.VGPU if display else orc.normalize_name(f"MDEV_{type_id}")


def select_devices(devices: HostDevices, rules: DeviceRules
                   ) -> tuple[DeviceOffer, ...]:
    """The device providers ``rules`` ask for on ``devices`` (module doc).

    Raises:
        SelectionError: a conflict, naming both rules.
    """
    passthrough = _pci_matches(devices, rules.pci)
    mdev_choice = _mdev_choices(devices, rules.mdev)
    for parent, (rule, _) in mdev_choice.items():
        if not isinstance(parent, PCIDevice):
            continue
        # The function itself, its PF, or one of its VFs: passing any of
        # them through takes what the mdevs are carved from.
        related = (parent.address, parent.physical_function,
                   *parent.virtual_functions)
        taken = next((a for a in related if a in passthrough), None)
        if taken is not None:
            kin = "PF" if taken == parent.physical_function else "VF"
            what = ("it" if taken == parent.address
                    else f"its {kin} {taken}")
            raise SelectionError(
                f"{parent.address} is chosen as an mdev parent by "
                f"{rule.label} and {what} is listed for passthrough by "
                f"{passthrough[taken].label}: it would be sold twice; "
                "remove it from one of them")
    offers = _pci_offers(devices, passthrough)
    offers.extend(_mdev_offers(devices, mdev_choice, rules.mdev))
    for offer in offers:
        reason = invalid_resource_class_reason(offer.resource_class)
        if reason is not None:
            raise SelectionError(
                f"{offer.key} listed by {offer.rule} would get resource "
                f"class {reason}; give the rule a shorter resource_class "
                "(or the type an mdev_class)")
    return tuple(sorted(offers, key=lambda o: o.key))


def _pci_matches(devices: HostDevices, rules: tuple[PciRule, ...]
                 ) -> dict:
    matched = {}
    if not rules:
        return matched
    for device in devices.pci:
        pf = (devices.by_address(device.physical_function)
              if device.physical_function is not None else None)
        rule = next((r for r in rules if r.matches(device, pf)), None)
        if rule is not None and rule.physical_network is None:
            matched[device.address] = rule
    return matched


def _pci_offers(devices: HostDevices, matched: dict) -> list[DeviceOffer]:
    offers: list[DeviceOffer] = []
    pools: dict = {}
    for device in devices.pci:
        rule = matched.get(device.address)
        if rule is None:
            continue
        pf_address = device.physical_function
        if pf_address is None:
            offers.append(DeviceOffer(
                device.address.nova_suffix, PCI, device, (device,),
                device.numa_node,
                rule.resource_class or default_pci_class(device), 1,
                rule.label, rule.traits))
            continue
        if pf_address in matched:
            raise SelectionError(
                f"PF {pf_address} is listed by {matched[pf_address].label} "
                f"and its VF {device.address} by {rule.label}: a PF and its "
                "VFs cannot both be exposed (using one makes the others "
                "unusable); list only one of them")
        pools.setdefault(pf_address, []).append((device, rule))
    for pf_address, members in pools.items():
        first, first_rule = members[0]
        first_rc = first_rule.resource_class or default_pci_class(first)
        for vf, rule in members[1:]:
            rc = rule.resource_class or default_pci_class(vf)
            if rc != first_rc or set(rule.traits) != set(first_rule.traits):
                raise SelectionError(
                    f"VFs of PF {pf_address} differ: {first.address} is "
                    f"{first_rc} with traits "
                    f"{', '.join(first_rule.traits) or 'none'} by "
                    f"{first_rule.label}, {vf.address} is {rc} with traits "
                    f"{', '.join(rule.traits) or 'none'} by {rule.label}; "
                    "VFs of one PF share one provider, give them one class "
                    "and one set of traits")
        pf = devices.by_address(pf_address)
        numa = next((d.numa_node for d in (pf, first) if d is not None
                     and d.numa_node is not None), None)
        offers.append(DeviceOffer(
            pf_address.nova_suffix, VF_POOL, pf or first,
            tuple(vf for vf, _ in members), numa, first_rc, len(members),
            first_rule.label, first_rule.traits))
    return offers


def _offered(parent: PCIDevice | MdevParent, type_id: str
             ) -> MdevType | None:
    return next((t for t in parent.mdev_types if t.type_id == type_id), None)


def _mdev_choices(devices: HostDevices, rules: tuple[MdevRule, ...]
                  ) -> dict:
    """Parent → (rule, offered type), one active type per parent."""
    chosen: dict = {}
    if not rules:
        return chosen
    # Nova's default: the first type without device_addresses, for every
    # parent no type lists; later ones without addresses are not used.
    default = next((r for r in rules if not r.device_addresses), None)
    for parent in devices.mdev_parents:
        address = parent.address if isinstance(parent, PCIDevice) else None
        own = None if isinstance(parent, PCIDevice) else parent.address
        named = [r for r in rules if r.device_addresses
                 and r.names(parent.name, address, own)]
        if len(named) > 1:
            raise SelectionError(
                f"mdev parent {address or parent.name} is listed by both "
                f"[mdev_{named[0].type_id}] device_addresses and "
                f"[mdev_{named[1].type_id}] device_addresses: a parent "
                "has one active type; list it under one type only")
        rule = named[0] if named else default
        offered = None if rule is None else _offered(parent, rule.type_id)
        if offered is not None:  # else: the parent does not offer it
            chosen[parent] = (rule, offered)
    return chosen


def _mdev_offers(devices: HostDevices, chosen: dict,
                 rules: tuple[MdevRule, ...]) -> list[DeviceOffer]:
    offers = []
    budget = {r.type_id: r.max_instances for r in rules}
    ordered = sorted(chosen.items(), key=lambda item: _parent_key(item[0]))
    for parent, (rule, offered) in ordered:
        existing = sum(1 for m in devices.mdevs_of(parent.name)
                       if m.type_id == offered.type_id)
        total = existing + (offered.available_instances or 0)
        capped = 0
        left = budget[offered.type_id]
        if left is not None:
            allowed = max(existing, min(total, left))
            capped, total = total - allowed, allowed
            budget[offered.type_id] = max(0, left - allowed)
        display = isinstance(parent, PCIDevice) and parent.is_display
        key = (parent.address.nova_suffix if isinstance(parent, PCIDevice)
               else parent.name)
        numa = parent.numa_node if isinstance(parent, PCIDevice) else None
        offers.append(DeviceOffer(
            key, MDEV, parent, (), numa,
            rule.mdev_class or default_mdev_class(offered.type_id, display),
            total, rule.label, (), offered, existing, capped))
    return offers


def _parent_key(parent: PCIDevice | MdevParent) -> tuple:
    if isinstance(parent, PCIDevice):
        return (0, parent.address.domain, parent.address.bus,
                parent.address.slot, parent.address.function, "")
    return (1, 0, 0, 0, 0, parent.name)
