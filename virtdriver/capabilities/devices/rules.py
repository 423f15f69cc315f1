"""The operator's device rules, in Nova's words, as pure frozen values.

Two kinds of rule choose which host devices are exposed (an unlisted
device never is):

* :class:`PciRule` — one ``[pci] device_spec`` value: a JSON object with
  ``vendor_id``, ``product_id``, ``address`` (Nova's glob string
  ``[[[domain]:]bus]:][slot][.[function]]`` with ``*`` for "any", or its
  dict form of regular expressions per field), and the tags
  ``resource_class``, ``traits``, ``physical_network``,
  ``remote_managed``, ``live_migratable``.  As in Nova, a single address
  that names an SR-IOV physical function also matches its virtual
  functions, and any other key is a tag that does not take part in
  matching.
* :class:`MdevRule` — one type of ``[devices] enabled_mdev_types`` with
  its ``[mdev_<type>]`` group: ``device_addresses``, ``mdev_class``,
  ``max_instances``.

Parsing raises ``ValueError`` with the reason; :mod:`virtdriver.conf.devices`
adds the option's name.  No I/O.
"""

from __future__ import annotations

import json
import re
import string
from dataclasses import dataclass

import os_resource_classes as orc
import os_traits

from virtdriver.capabilities.devices.model import PCIAddress, PCIDevice

#: A field of a glob address that matches anything.
ANY = "*"
#: Width of each address field as Nova and sysfs write it.
_FIELDS = (("domain", 0xFFFF, 4), ("bus", 0xFF, 2), ("slot", 0x1F, 2),
           ("function", 0x7, 1))
_HEX_ID = re.compile(r"[0-9a-fA-F]{1,4}")
#: Keys that choose devices; every other key is a tag.
_MATCH_KEYS = ("vendor_id", "product_id", "address", "devname")
_BOOL_TAGS = ("remote_managed", "live_migratable")


def _fields(address: PCIAddress) -> tuple[str, str, str, str]:
    return (f"{address.domain:04x}", f"{address.bus:02x}",
            f"{address.slot:02x}", f"{address.function:x}")


@dataclass(frozen=True, slots=True)
class AddressPattern:
    """Which PCI addresses a rule's ``address`` names.

    ``exact`` holds, per field, a lowercase hex value or ``None`` (any),
    for Nova's glob form; ``regex`` holds compiled patterns per field for
    its dict form (each matched from the field's start, as Nova does).
    """

    text: str
    exact: tuple[str | None, ...] | None = None
    regex: tuple[re.Pattern, ...] | None = None

    @property
    def single(self) -> bool:
        """Names one address, as Nova decides it: every field given, as
        hex digits (a glob's, or a dict's patterns that are plain hex)."""
        if self.exact is not None:
            return None not in self.exact
        return all(p.pattern and all(c in string.hexdigits
                                     for c in p.pattern)
                   for p in self.regex)

    def matches(self, address: PCIAddress) -> bool:
        """Whether ``address`` is one this pattern names."""
        values = _fields(address)
        if self.exact is not None:
            return all(want is None or want == value
                       for want, value in zip(self.exact, values, strict=True))
        return all(pattern.match(value)
                   for pattern, value in zip(self.regex, values, strict=True))


def parse_address(value: object) -> AddressPattern:
    """Nova's ``address``: a glob string or a dict of regular expressions.

    Raises:
        ValueError: a field that is not hex or out of range, too many
            fields, a bad regular expression, an unknown dict key.
    """
    if isinstance(value, dict):
        unknown = set(value) - {name for name, _, _ in _FIELDS}
        if unknown:
            raise ValueError(f"address has unknown key(s) "
                             f"{', '.join(sorted(map(str, unknown)))}; use "
                             "domain, bus, slot, function")
        patterns = []
        for name, _, _ in _FIELDS:
            text = value.get(name, ".*")
            if not isinstance(text, str):
                raise ValueError(f"address {name} must be a string")
            try:
                patterns.append(re.compile(text))
            except re.error as exc:
                raise ValueError(f"address {name} {text!r} is not a "
                                 f"regular expression: {exc}") from None
        return AddressPattern(json.dumps(value, sort_keys=True),
                              regex=tuple(patterns))
    if not isinstance(value, str):
        raise ValueError("address must be a string or an object")
    head, _, function = value.partition(".")
    parts = head.split(":") if head else []
    if len(parts) > 3:
        raise ValueError(f"address {value!r} has more than domain:bus:slot")
    parts = [ANY] * (3 - len(parts)) + parts
    parts.append(function)
    exact: list[str | None] = []
    for (name, limit, width), text in zip(_FIELDS, parts, strict=True):
        text = text.strip()
        if text in ("", ANY):
            exact.append(None)
            continue
        try:
            number = int(text, 16)
        except ValueError:
            raise ValueError(f"address {value!r}: {name} {text!r} is not "
                             "hex or '*'") from None
        if not 0 <= number <= limit:
            raise ValueError(f"address {value!r}: {name} {text!r} is past "
                             f"{limit:#x}")
        exact.append(f"{number:0{width}x}")
    return AddressPattern(value, exact=tuple(exact))


def _hex_id(key: str, value: object) -> str | None:
    if value is None or value == ANY:
        return None
    if not isinstance(value, str) or not _HEX_ID.fullmatch(value.strip()):
        raise ValueError(f"{key} {value!r} is not a hex id of up to 4 "
                         "digits or '*'")
    return f"{int(value, 16):04x}"


def _bool_tag(key: str, value: object) -> bool | None:
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    raise ValueError(f"{key} {value!r} is not true or false")


def normalize_resource_class(name: str) -> str:
    """A rule's ``resource_class`` as Nova reads it, so flavors port:
    upper-cased; a standard class or a ``CUSTOM_`` name kept (its other
    characters made Placement's), anything else ``CUSTOM_<NAME>`` with
    every run of other characters one ``_`` — spaces included, as in
    Nova (``" gpu"`` is ``CUSTOM__GPU``)."""
    upper = name.upper()
    if upper in orc.STANDARDS:
        return upper
    return orc.normalize_name(upper.removeprefix(orc.CUSTOM_NAMESPACE))


def normalize_traits(text: str) -> tuple[str, ...]:
    """A rule's ``traits`` (comma separated) as Nova reads them, so
    flavors port: a standard name *as written* kept; anything else
    upper-cased, a ``CUSTOM_`` name kept, the rest ``CUSTOM_<NAME>`` —
    spaces count as in Nova (``"a, b"`` is ``CUSTOM_A``, ``CUSTOM__B``;
    ``hw_gpu_api_vulkan`` is ``CUSTOM_HW_GPU_API_VULKAN``).  Empty parts
    (a trailing comma) are skipped: Placement would refuse them."""
    standard = _standard_traits()
    names = []
    for part in text.split(","):
        if not part:
            continue
        if part in standard:
            names.append(part)
            continue
        upper = part.upper()
        names.append(os_traits.normalize_name(
            upper.removeprefix(os_traits.CUSTOM_NAMESPACE)))
    return tuple(dict.fromkeys(names))


_STANDARD: frozenset[str] | None = None


def _standard_traits() -> frozenset[str]:
    global _STANDARD
    if _STANDARD is None:
        _STANDARD = frozenset(os_traits.get_traits())
    return _STANDARD


@dataclass(frozen=True, slots=True)
class PciRule:
    """One ``[pci] device_spec`` value (module doc).

    ``label`` names it for messages: ``[pci] device_spec #2``.
    """

    label: str
    text: str
    vendor_id: str | None = None
    product_id: str | None = None
    address: AddressPattern | None = None
    resource_class: str | None = None
    traits: tuple[str, ...] = ()
    physical_network: str | None = None
    remote_managed: bool | None = None
    live_migratable: bool | None = None

    def matches(self, device: PCIDevice, pf: PCIDevice | None = None
                ) -> bool:
        """Whether this rule lists ``device``; ``pf`` is its physical
        function when it is a VF (a single address naming the PF lists
        the PF's VFs too, as in Nova)."""
        if self.vendor_id is not None and device.vendor_id != self.vendor_id:
            return False
        if (self.product_id is not None
                and device.product_id != self.product_id):
            return False
        if self.address is None:
            return True
        if (device.physical_function is not None and self.address.single
                and pf is not None and pf.is_pf
                and self.address.matches(device.physical_function)):
            return True
        return self.address.matches(device.address)


def parse_pci_rule(text: str, label: str) -> PciRule:
    """Read one ``device_spec`` value.

    Raises:
        ValueError: not a JSON object, a bad id, address, class or flag.
    """
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise ValueError(f"not JSON ({exc})") from None
    if not isinstance(data, dict):
        raise ValueError("not a JSON object like "
                         '{"vendor_id": "8086", "product_id": "1572"}')
    if "devname" in data:
        raise ValueError("devname (a network interface name) is not read "
                         "here; name the device by its address instead")
    rc = data.get("resource_class")
    if rc == "":
        rc = None  # Nova's default class, as Nova reads an empty one
    if rc is not None and (not isinstance(rc, str) or not rc.strip()):
        raise ValueError(f"resource_class {rc!r} is not a name")
    traits = data.get("traits", "")
    if not isinstance(traits, str):
        raise ValueError("traits must be one comma-separated string")
    network = data.get("physical_network")
    if network is not None and not isinstance(network, str):
        raise ValueError("physical_network must be a string")
    address = data.get("address")
    return PciRule(
        label=label, text=text,
        vendor_id=_hex_id("vendor_id", data.get("vendor_id")),
        product_id=_hex_id("product_id", data.get("product_id")),
        address=None if address is None else parse_address(address),
        resource_class=None if rc is None else normalize_resource_class(rc),
        traits=normalize_traits(traits),
        physical_network=network,
        **{key: _bool_tag(key, data.get(key)) for key in _BOOL_TAGS})


@dataclass(frozen=True, slots=True)
class MdevRule:
    """One enabled mdev type and its ``[mdev_<type>]`` group.

    ``device_addresses`` empty: the type applies to every parent offering
    it (Nova's reading of a lone enabled type).  ``mdev_class`` ``None``:
    ``VGPU`` on a display device, else ``CUSTOM_MDEV_<TYPE>``.
    """

    type_id: str
    device_addresses: tuple[str, ...] = ()
    mdev_class: str | None = None
    max_instances: int | None = None

    @property
    def label(self) -> str:
        """``[devices] enabled_mdev_types nvidia-35``."""
        return f"[devices] enabled_mdev_types {self.type_id}"

    def names(self, parent_name: str, address: PCIAddress | None,
              parent_address: str | None) -> bool:
        """Whether ``device_addresses`` lists this parent (by PCI address,
        by a non-PCI parent's own address such as ``0.0.fffe``, or by its
        node-device name such as ``ap_matrix``)."""
        wanted = set(self.device_addresses)
        if address is not None and str(address) in wanted:
            return True
        return parent_name in wanted or (parent_address or "") in wanted


_MDEV_CLASS = re.compile(rf"{orc.VGPU}|{orc.CUSTOM_NAMESPACE}[A-Z0-9_]+")


def normalize_mdev_class(name: str) -> str:
    """``mdev_class`` as Nova accepts it: ``VGPU`` or a ``CUSTOM_`` name,
    as written (upper case), at most 255 characters.

    Raises:
        ValueError: anything else.
    """
    if len(name) <= 255 and _MDEV_CLASS.fullmatch(name):
        return name
    raise ValueError("not VGPU nor a CUSTOM_[A-Z0-9_]+ name (as Nova "
                     "accepts it)")


@dataclass(frozen=True, slots=True)
class DeviceRules:
    """Every rule: PCI passthrough and mdev types, in option order."""

    pci: tuple[PciRule, ...] = ()
    mdev: tuple[MdevRule, ...] = ()

    @property
    def empty(self) -> bool:
        """No device is listed at all."""
        return not (self.pci or self.mdev)
