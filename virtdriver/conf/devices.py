"""Device options, accepted unchanged from Nova.

``[pci] device_spec`` (one JSON object per value, repeatable),
``[devices] enabled_mdev_types`` and, for each enabled type, a
``[mdev_<type>]`` group with ``device_addresses``, ``mdev_class`` and
``max_instances`` (registered when the types are read, as Nova does).
:func:`device_rules` reads them into
:class:`~virtdriver.capabilities.devices.rules.DeviceRules`; every bad
value is one line naming the option.  docs/devices.md explains them.
"""

from __future__ import annotations

from oslo_config import cfg

from virtdriver.capabilities.devices.model import PCIAddress
from virtdriver.capabilities.devices.rules import (
    DeviceRules, MdevRule, normalize_mdev_class, parse_pci_rule)
from virtdriver.conf.reader import OptionReader, option_name

PCI_OPTS = [
    cfg.MultiStrOpt(
        "device_spec", default=[],
        help="PCI functions to expose for passthrough, one JSON object per "
             "value as Nova reads it: vendor_id, product_id, address (a "
             "'*' glob '[[domain:]bus:]slot[.function]' or an object of "
             "regular expressions per field), and the tags "
             "resource_class, traits (comma separated), physical_network, "
             "remote_managed, live_migratable. An unlisted device is never "
             "exposed."),
]

DEVICES_OPTS = [
    cfg.ListOpt(
        "enabled_mdev_types", default=[],
        help="Mediated device types to offer, e.g. 'nvidia-35'. Each may "
             "have a [mdev_<type>] group with device_addresses, mdev_class "
             "and max_instances."),
]

MDEV_OPTS = [
    cfg.ListOpt(
        "device_addresses", default=[],
        help="Parents (PCI addresses like 0000:84:00.0, or a non-PCI "
             "parent's address or node-device name) that offer this type. "
             "Empty: every parent offering it that no other type lists."),
    cfg.StrOpt(
        "mdev_class",
        help="Resource class of this type's mdevs: VGPU or a CUSTOM_ name. "
             "Unset: VGPU on a display controller, else "
             "CUSTOM_MDEV_<TYPE>."),
    cfg.IntOpt(
        "max_instances", min=1,
        help="Cap on this type's total over all its parents; a parent "
             "past the cap keeps its provider. Unset: no cap."),
]


def mdev_group(type_id: str) -> str:
    """``mdev_<type>``, the group of one enabled type."""
    return f"mdev_{type_id}"


def register_mdev_groups(conf: cfg.ConfigOpts,
                         types: list[str]) -> None:
    """Register ``[mdev_<type>]`` for each of ``types`` (once)."""
    for type_id in types:
        group = mdev_group(type_id)
        if group not in conf:
            conf.register_opts(MDEV_OPTS, group=group)


def _address(text: str) -> str:
    text = text.strip()
    try:
        return str(PCIAddress.parse(text))
    except ValueError:
        if not text or any(c.isspace() for c in text):
            raise ValueError(f"{text!r} is not a device address") from None
        return text  # a non-PCI parent: 0.0.fffe, ap_matrix


def device_rules(conf: cfg.ConfigOpts) -> DeviceRules:
    """The device rules ``conf`` sets.

    Raises:
        ConfigError: every bad value, one line each naming the option.
    """
    reader = OptionReader(conf)
    specs = reader.get("pci", "device_spec") or []
    pci = []
    for index, text in enumerate(specs, 1):
        label = f"{option_name('pci', 'device_spec')} #{index}"
        try:
            pci.append(parse_pci_rule(text, label))
        except ValueError as exc:
            reader.add(f"{label} = {text!r}: {exc}; write it as Nova reads "
                       "it (see docs/devices.md)")
    types = [t.strip() for t in reader.get("devices",
                                           "enabled_mdev_types") or []]
    mdev = []
    for type_id in dict.fromkeys(t for t in types if t):
        register_mdev_groups(conf, [type_id])
        group = mdev_group(type_id)
        addresses = reader.get(group, "device_addresses",
                               lambda v: tuple(_address(a) for a in v))
        mdev_class = reader.get(group, "mdev_class", normalize_mdev_class)
        cap = reader.get(group, "max_instances")
        mdev.append(MdevRule(type_id, addresses or (), mdev_class, cap))
    reader.check()
    return DeviceRules(tuple(pci), tuple(mdev))
