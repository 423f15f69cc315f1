"""The devices a flavor asks for, as Nova reads them (pure).

Two sources, both Nova's:

* ``pci_passthrough:alias`` = ``NAME:COUNT[,NAME:COUNT…]`` naming
  ``[pci] alias`` values (JSON objects: ``name``, ``vendor_id``,
  ``product_id``, ``device_type`` ``type-PCI``/``type-PF``/``type-VF``,
  ``numa_policy``, ``resource_class``, ``traits``).  As Nova's PCI in
  Placement: one spec per alias, ``vendor_id`` and ``product_id`` or a
  ``resource_class`` required, the class the alias's (normalised as
  ``device_spec``'s) else ``CUSTOM_PCI_<VENDOR>_<PRODUCT>``, each device
  its own request of one unit.
* ``resources[N]:<CLASS>=<AMOUNT>`` for a class no NUMA cell or root
  holds (``VGPU``, ``CUSTOM_…``): one request of that amount.

The NUMA affinity policy of a request: the flavor's
``hw:pci_numa_affinity_policy`` or the image's
``hw_pci_numa_affinity_policy`` (both set and different: refused, as Nova
refuses it), else the alias's ``numa_policy``, else ``legacy`` (Nova's
default).  Every bad alias value is one :class:`~.model.Problem` naming
``[pci] alias #N``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import os_resource_classes as orc
import os_traits

from virtdriver.capabilities.devices.rules import (
    normalize_resource_class, normalize_traits)
from virtdriver.claims.model import ClaimError, InvalidRequest, Problem
from virtdriver.drivers.host_tree import PAGE_RC_PREFIX

#: NUMA affinity policies (Nova's ``PCINUMAAffinityPolicy``).
REQUIRED = "required"
LEGACY = "legacy"
PREFERRED = "preferred"
SOCKET = "socket"
POLICIES = (REQUIRED, LEGACY, PREFERRED, SOCKET)
#: Alias device types (Nova's ``PciDeviceType`` an alias may name).
TYPE_PCI = "type-PCI"
TYPE_PF = "type-PF"
TYPE_VF = "type-VF"
DEVICE_TYPES = (TYPE_PCI, TYPE_PF, TYPE_VF)

ALIAS_KEY = "pci_passthrough:alias"
FLAVOR_POLICY = "hw:pci_numa_affinity_policy"
IMAGE_POLICY = "hw_pci_numa_affinity_policy"
_ALIAS_FIELDS = {"name", "vendor_id", "product_id", "device_type",
                 "numa_policy", "resource_class", "traits",
                 "capability_type", "live_migratable"}
_HEX = re.compile(r"[0-9a-fA-F]{1,4}")
_RESOURCES_KEY = re.compile(r"^resources([a-zA-Z0-9_-]{0,64}):(.+)$")
#: Classes the cells and the root hold: never a device request.
_HOST_CLASSES = frozenset({orc.VCPU, orc.PCPU, orc.MEMORY_MB, orc.DISK_GB})
#: Most devices one alias may ask for (Placement's groups are per device).
MAX_COUNT = 64


class InvalidDeviceRequest(InvalidRequest):
    """A bad ``[pci] alias`` value, an unknown alias, a bad count or NUMA
    affinity policy: an :class:`~.model.InvalidRequest` (exit 2) whose
    message says it is the devices."""

    def __init__(self, problems) -> None:
        self.problems = tuple(problems)
        ClaimError.__init__(self, "invalid device request: " + "; ".join(
            p.message for p in self.problems))


@dataclass(frozen=True)
class PciAlias:
    """One ``[pci] alias`` value, as Nova reads it."""

    name: str
    resource_class: str
    required: frozenset[str] = frozenset()
    device_type: str | None = None
    numa_policy: str | None = None
    label: str = ""


@dataclass(frozen=True)
class DeviceRequest:
    """Devices of one kind the instance needs.

    Attributes:
        source: what asked (``alias gpu #2``, ``resources:VGPU``).
        resource_class: the class its providers hold.
        count: units, all from one provider (an alias's request is of 1).
        required: traits the provider must have.
        forbidden: traits it must not have.
        policy: one of :data:`POLICIES`.
        device_type: an alias's ``device_type`` (``None``: any).
    """

    source: str
    resource_class: str
    count: int = 1
    required: frozenset[str] = frozenset()
    forbidden: frozenset[str] = frozenset()
    policy: str = LEGACY
    device_type: str | None = None

    def to_json(self) -> dict[str, Any]:
        """The request as JSON."""
        return {"source": self.source, "resource_class": self.resource_class,
                "count": self.count, "required": sorted(self.required),
                "forbidden": sorted(self.forbidden), "policy": self.policy,
                "device_type": self.device_type}


def parse_aliases(values: Sequence[str]) -> dict[str, PciAlias]:
    """``[pci] alias`` values → alias name → alias.

    Raises:
        InvalidDeviceRequest: every bad value, each naming ``[pci] alias
            #N``.
    """
    found: dict[str, PciAlias] = {}
    problems = []
    for index, text in enumerate(values, 1):
        label = f"[pci] alias #{index}"
        try:
            alias = _alias(text, label)
        except ValueError as exc:
            problems.append(Problem(
                f"{label} = {_clip(text)}: {exc}; write it as Nova reads it "
                "(`virtdriver help claims`, device requests)", {label: text}))
            continue
        if alias.name in found:
            problems.append(Problem(
                f"{label} names alias {alias.name!r} again "
                f"({found[alias.name].label} did): PCI in Placement takes "
                "one spec per alias; give the devices one resource_class "
                "in [pci] device_spec and keep one alias", {label: text}))
            continue
        found[alias.name] = alias
    if problems:
        raise InvalidDeviceRequest(problems)
    return found


def _alias(text: str, label: str) -> PciAlias:
    try:
        spec = json.loads(text)
    except ValueError as exc:
        raise ValueError(f"not JSON ({exc})") from None
    if not isinstance(spec, dict):
        raise ValueError("not a JSON object")
    unknown = sorted(set(spec) - _ALIAS_FIELDS)
    if unknown:
        raise ValueError(f"unknown field {unknown[0]!r}")
    for key, value in spec.items():
        if not isinstance(value, str):
            raise ValueError(f"{key} is not a string")
    name = spec.get("name", "").strip()
    if not name or len(name) > 256:
        raise ValueError("name is missing (1 to 256 characters)")
    for key in ("vendor_id", "product_id"):
        if key in spec and not _HEX.fullmatch(spec[key]):
            raise ValueError(f"{key} {spec[key]!r} is not 1 to 4 hex digits")
    device_type = spec.get("device_type")
    if device_type is not None and device_type not in DEVICE_TYPES:
        raise ValueError(f"device_type {device_type!r} is not one of "
                         + ", ".join(DEVICE_TYPES))
    policy = spec.get("numa_policy")
    if policy is not None and policy not in POLICIES:
        raise ValueError(f"numa_policy {policy!r} is not one of "
                         + ", ".join(POLICIES))
    if spec.get("resource_class"):
        rc = normalize_resource_class(spec["resource_class"])
    elif "vendor_id" in spec and "product_id" in spec:
        rc = orc.normalize_name(
            f"PCI_{spec['vendor_id'].lower().zfill(4)}_"
            f"{spec['product_id'].lower().zfill(4)}")
    else:
        raise ValueError("it has neither vendor_id and product_id nor "
                         "resource_class")
    required = set(normalize_traits(spec.get("traits", "")))
    return PciAlias(name, rc, frozenset(required), device_type, policy,
                    label)


def affinity_policy(extra_specs: Mapping[str, Any],
                    image_properties: Mapping[str, Any]) -> str | None:
    """The flavor's or the image's policy (``None``: neither sets one).

    Raises:
        InvalidRequest: a value not in :data:`POLICIES`, or the two differ.
    """
    flavor = extra_specs.get(FLAVOR_POLICY)
    image = image_properties.get(IMAGE_POLICY)
    problems = [Problem(f"{where} {key}={value!r} is not one of "
                        f"{', '.join(POLICIES)}; choose one", {key: value})
                for where, key, value in (("flavor", FLAVOR_POLICY, flavor),
                                          ("image", IMAGE_POLICY, image))
                if value is not None and value not in POLICIES]
    if not problems and flavor and image and flavor != image:
        problems.append(Problem(
            f"flavor {FLAVOR_POLICY}={flavor} and image {IMAGE_POLICY}="
            f"{image} differ; make them agree or drop the image's",
            {FLAVOR_POLICY: flavor, IMAGE_POLICY: image}))
    if problems:
        raise InvalidDeviceRequest(problems)
    return flavor or image


def asks_devices(extra_specs: Mapping[str, Any]) -> bool:
    """Whether the flavor asks for any device (an alias or a device
    class's ``resources`` key)."""
    if ALIAS_KEY in extra_specs:
        return True
    for key in extra_specs:
        match = _RESOURCES_KEY.match(key)
        if match and match.group(2) not in _HOST_CLASSES \
                and not match.group(2).startswith(PAGE_RC_PREFIX):
            return True
    return False


def device_requests(extra_specs: Mapping[str, Any],
                    image_properties: Mapping[str, Any],
                    aliases: Mapping[str, PciAlias] | None = None
                    ) -> tuple[DeviceRequest, ...]:
    """The device requests of a flavor and image (module doc), aliases
    first in the order written, then ``resources`` keys by class.

    Raises:
        InvalidRequest: an unknown alias, a bad count or policy.
    """
    policy = affinity_policy(extra_specs, image_properties)
    found: list[DeviceRequest] = []
    text = extra_specs.get(ALIAS_KEY)
    if text is not None:
        found.extend(_alias_requests(str(text), aliases or {}, policy))
    amounts: dict[str, int] = {}
    for key, value in sorted(extra_specs.items()):
        match = _RESOURCES_KEY.match(key)
        if match is None:
            continue
        rc = match.group(2)
        if rc in _HOST_CLASSES or rc.startswith(PAGE_RC_PREFIX):
            continue
        try:
            amount = int(str(value))
        except ValueError:
            continue         # the NUMA request refuses it, naming the key
        if amount > 0:
            amounts[rc] = amounts.get(rc, 0) + amount
    for rc, amount in sorted(amounts.items()):
        found.append(DeviceRequest(f"resources:{rc}", rc, amount,
                                   policy=policy or LEGACY))
    return tuple(found)


def _alias_requests(text: str, aliases: Mapping[str, PciAlias],
                    policy: str | None) -> list[DeviceRequest]:
    found = []
    for part in text.split(","):
        name, sep, count = part.partition(":")
        name = name.strip()
        if not sep or not count.strip().isdigit():
            raise InvalidDeviceRequest([Problem(
                f"flavor {ALIAS_KEY}={text!r}: {part.strip()!r} is not "
                "NAME:COUNT; write e.g. gpu:1,nic:2", {ALIAS_KEY: text})])
        number = int(count)
        if not 1 <= number <= MAX_COUNT:
            raise InvalidDeviceRequest([Problem(
                f"flavor {ALIAS_KEY}={text!r}: count {number} of {name!r} "
                f"is not 1 to {MAX_COUNT}", {ALIAS_KEY: text})])
        alias = aliases.get(name)
        if alias is None:
            known = ", ".join(sorted(aliases)) or "none"
            raise InvalidDeviceRequest([Problem(
                f"flavor {ALIAS_KEY}={text!r}: alias {name!r} is not "
                f"defined by [pci] alias (defined: {known}); define it or "
                "fix the flavor", {ALIAS_KEY: text})])
        required, forbidden = set(alias.required), set()
        if alias.device_type == TYPE_PCI:
            forbidden.add(os_traits.HW_NIC_SRIOV)
        elif alias.device_type in (TYPE_PF, TYPE_VF):
            required.add(os_traits.HW_NIC_SRIOV)
        chosen = policy or alias.numa_policy or LEGACY
        for i in range(number):
            found.append(DeviceRequest(
                f"alias {name} #{i + 1}", alias.resource_class, 1,
                frozenset(required), frozenset(forbidden), chosen,
                alias.device_type))
    return found


def _clip(text: str) -> str:
    return repr(text if len(text) <= 80 else text[:60] + "…")
