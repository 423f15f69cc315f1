"""Bare-metal node inventories (JSON or YAML), as the ironic-like driver reads them.

A file holds ``{"nodes": [...]}`` (or a bare list); each node::

    uuid: 1be26c0b-03f2-4d2e-ae87-c02d7f33c123
    name: rack1-u07                  # default: the uuid
    resource_class: baremetal.gold   # -> CUSTOM_BAREMETAL_GOLD
    properties: {cpus: 64, memory_mb: 262144}
    provision_state: available       # available and active are usable
    maintenance: false
    traits: [CUSTOM_RAID5, HW_CPU_X86_AVX2]      # inspection: full list
    # or
    trait_changes: {add: [CUSTOM_GPU], remove: [CUSTOM_RAID5]}

The traits a node's inspection data names — the full list, or every name
added or removed — are the traits the driver manages (owns) on that node;
everything else on its provider belongs to someone else.
"""

from __future__ import annotations

import pathlib
import uuid as uuidlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

import os_resource_classes

from virtdriver.capabilities.traits.names import invalid_reason
from virtdriver.drivers.data_files import check_fields, load_data_file

#: Provision states in which a node can take (or holds) an instance.
USABLE_STATES = frozenset({"available", "active"})
_KEYS = {"uuid", "name", "resource_class", "properties", "provision_state",
         "maintenance", "traits", "trait_changes"}


class InventoryError(ValueError):
    """A node inventory is not usable; the message names file, node, field."""


@dataclass(frozen=True, slots=True)
class BareMetalNode:
    """One validated node."""

    uuid: str
    name: str
    resource_class: str
    properties: Mapping[str, Any]
    provision_state: str
    maintenance: bool
    asserted_traits: frozenset[str]
    removed_traits: frozenset[str]

    @property
    def placement_resource_class(self) -> str:
        """``CUSTOM_<RESOURCE_CLASS>``, normalised as Placement does."""
        return _resource_class(self.resource_class)

    @property
    def available(self) -> bool:
        """Usable: not in maintenance, and available or active."""
        return not self.maintenance and \
            self.provision_state in USABLE_STATES

    @property
    def managed_traits(self) -> frozenset[str]:
        """Traits the driver owns on this node (asserted or removed)."""
        return self.asserted_traits | self.removed_traits


def _resource_class(name: str) -> str:
    # normalize_name() would turn an already custom name into CUSTOM_CUSTOM_.
    if os_resource_classes.is_custom(name.upper()):
        name = name[len("CUSTOM_"):]
    return os_resource_classes.normalize_name(name)


def parse_inventory(data: Any, source: str) -> tuple[BareMetalNode, ...]:
    """Validate an inventory document; cost is linear in the nodes.

    Raises:
        InventoryError: naming ``source``, the node (index and uuid) and
            the field, for the first problem found.
    """
    nodes = data.get("nodes") if isinstance(data, Mapping) else data
    if not isinstance(nodes, list):
        raise InventoryError(f"{source}: expected a list of nodes, or a "
                             "mapping with a 'nodes' list")
    parsed = []
    seen: dict[str, int] = {}
    names: dict[str, int] = {}
    for index, raw in enumerate(nodes):
        node = _node(raw, f"{source}: node {index}")
        for key, table, what in ((node.uuid, seen, "uuid"),
                                 (node.name, names, "name")):
            if key in table:
                raise InventoryError(
                    f"{source}: node {index} repeats {what} {key!r} of node "
                    f"{table[key]}; every node needs its own")
            table[key] = index
        parsed.append(node)
    return tuple(parsed)


def load_inventory(path: str | pathlib.Path) -> tuple[BareMetalNode, ...]:
    """Read and validate an inventory file (``.json``, else YAML).

    Raises:
        InventoryError: the file is missing, malformed or invalid.
    """
    data = load_data_file(path, "node inventory", InventoryError)
    return parse_inventory(data, str(path))


def _node(raw: Any, where: str) -> BareMetalNode:
    check_fields(raw, _KEYS, where, "a node", InventoryError)
    node_uuid = raw.get("uuid")
    try:
        node_uuid = str(uuidlib.UUID(str(node_uuid)))
    except ValueError:
        raise InventoryError(f"{where}: uuid {node_uuid!r} is not a UUID") \
            from None
    where = f"{where} ({node_uuid})"
    rc = raw.get("resource_class")
    if not isinstance(rc, str) or not rc.strip():
        raise InventoryError(f"{where}: resource_class is required (e.g. "
                             "'baremetal.gold')")
    if "traits" in raw and "trait_changes" in raw:
        raise InventoryError(f"{where}: give either traits (the full list) "
                             "or trait_changes, not both")
    if "trait_changes" in raw:
        changes = raw["trait_changes"]
        if not isinstance(changes, Mapping) or set(changes) - {"add",
                                                               "remove"}:
            raise InventoryError(f"{where}: trait_changes must be a mapping "
                                 "with 'add' and/or 'remove' lists")
        added = _traits(changes.get("add", ()), f"{where}: trait_changes.add")
        removed = _traits(changes.get("remove", ()),
                          f"{where}: trait_changes.remove")
        both = added & removed
        if both:
            raise InventoryError(f"{where}: trait_changes both adds and "
                                 f"removes {', '.join(sorted(both))}")
    else:
        added = _traits(raw.get("traits", ()), f"{where}: traits")
        removed = frozenset()
    properties = raw.get("properties", {})
    if not isinstance(properties, Mapping):
        raise InventoryError(f"{where}: properties must be a mapping")
    maintenance = raw.get("maintenance", False)
    if not isinstance(maintenance, bool):
        raise InventoryError(f"{where}: maintenance must be true or false")
    return BareMetalNode(
        uuid=node_uuid, name=str(raw.get("name") or node_uuid),
        resource_class=rc.strip(),
        properties=MappingProxyType(dict(properties)),
        provision_state=str(raw.get("provision_state", "available")),
        maintenance=maintenance, asserted_traits=added,
        removed_traits=removed)


def _traits(values: Iterable[Any], where: str) -> frozenset[str]:
    if isinstance(values, str) or not isinstance(values, Iterable):
        raise InventoryError(f"{where} must be a list of trait names")
    names = frozenset(values)
    for name in sorted(map(str, names)):
        reason = invalid_reason(name)
        if reason:
            raise InventoryError(f"{where}: {name!r} is not a valid trait "
                                 f"name ({reason})")
    return names
