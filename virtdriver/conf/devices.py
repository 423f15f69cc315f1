"""Device options, accepted unchanged from Nova.

``[pci] device_spec`` (one JSON object per value, repeatable),
``[devices] enabled_mdev_types`` and, for each enabled type, a
``[mdev_<type>]`` group with ``device_addresses``, ``mdev_class`` and
``max_instances`` (registered when the types are read, as Nova does).
:func:`~virtdriver.conf.device_rules.device_rules` (which needs no
oslo.config for the default configuration) reads them into
:class:`~virtdriver.capabilities.devices.rules.DeviceRules`; every bad
value is one line naming the option.  docs/devices.md explains them.
"""

from __future__ import annotations

from oslo_config import cfg


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
    cfg.MultiStrOpt(
        "alias", default=[],
        help="A device a flavor may ask for by name "
             "(pci_passthrough:alias = NAME:COUNT), one JSON object per "
             "value as Nova reads it: name, vendor_id and product_id or "
             "resource_class, device_type (type-PCI, type-PF, type-VF), "
             "numa_policy (required, legacy, preferred, socket), traits "
             "(comma separated)."),
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
