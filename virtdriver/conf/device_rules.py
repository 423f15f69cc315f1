"""Read the device options into rules (:mod:`virtdriver.conf.devices`
defines them).

Without an enabled mdev type nothing here imports oslo.config, so the
default configuration (:class:`~virtdriver.conf.defaults.DefaultConf`)
reads them as cheaply as the other sections.
"""

from __future__ import annotations

from typing import Any

from virtdriver.capabilities.devices.model import PCIAddress
from virtdriver.capabilities.devices.rules import (
    DeviceRules, MdevRule, normalize_mdev_class, parse_pci_rule)
from virtdriver.conf.reader import OptionReader, option_name


def mdev_group(type_id: str) -> str:
    """``mdev_<type>``, the group of one enabled type."""
    return f"mdev_{type_id}"


def register_mdev_groups(conf: Any, types: list[str]) -> None:
    """Register ``[mdev_<type>]`` for each of ``types`` (once) on an
    oslo ``ConfigOpts``."""
    from virtdriver.conf.devices import MDEV_OPTS
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


def device_rules(conf: Any) -> DeviceRules:
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
                       "it (`virtdriver help devices`)")
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
    seen: dict[str, str] = {}
    for rule in mdev:
        for address in rule.device_addresses:
            first = seen.setdefault(address, rule.type_id)
            if first != rule.type_id:
                reader.add(
                    f"{address} is in both [{mdev_group(first)}] "
                    f"device_addresses and [{mdev_group(rule.type_id)}] "
                    "device_addresses: a parent has one type; list it "
                    "under one of them")
    reader.check()
    return DeviceRules(tuple(pci), tuple(mdev))
