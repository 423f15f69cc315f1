"""Bare-metal node inventories (JSON or YAML), as the ironic-like driver reads them.

A file holds ``{"nodes": [...]}`` (or a bare list) of nodes::

    nodes:
      - uuid: 1be26c0b-03f2-4d2e-ae87-c02d7f33c123
        name: rack1-u07                  # default: the uuid
        resource_class: baremetal.gold   # -> CUSTOM_BAREMETAL_GOLD
        properties: {cpus: 64, memory_mb: 262144}
        provision_state: available       # available and active are usable
        maintenance: false
        traits: [CUSTOM_RAID5, HW_CPU_X86_AVX2]   # inspection: full list
      - uuid: 5d9a3c2e-8f7b-4e61-9a0d-2b4c6e8f1a3d
        resource_class: baremetal.gold
        trait_changes: {add: [CUSTOM_GPU], remove: [CUSTOM_RAID5]}  # or this

Checked strictly (each refusal an :class:`InventoryError` naming file,
node, field and value): ``uuid`` a UUID string; ``name`` printable text
of at most 255 characters; ``resource_class`` a string with letters or
digits; ``provision_state`` one of :data:`PROVISION_STATES`;
``maintenance`` a real boolean; ``traits`` and ``trait_changes``'
``add``/``remove`` lists of valid trait names (os-traits or ``CUSTOM_``),
never both ``traits`` and ``trait_changes``.  Files are read by
:func:`~virtdriver.drivers.data_files.load_data_file` (UTF-8, size and
nesting limits).

The traits a node's inspection data names — the full list, or every name
added or removed — are the traits the driver manages (owns) on that node;
everything else on its provider belongs to someone else.
"""

from __future__ import annotations

import difflib
import functools
import hashlib
import os
import pathlib
import time
import uuid as uuidlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

import os_resource_classes

from virtdriver.drivers.data_files import (
    MAX_FILE_BYTES, check_fields, check_trait_list, kind_of, load_data_file)
from virtdriver.regular_file import read_regular

#: Provision states in which a node can take (or holds) an instance.
USABLE_STATES = frozenset({"available", "active"})
#: Every provision state ironic has (``ironic.common.states.ALL_STATES``).
PROVISION_STATES = frozenset({
    "active", "adopt failed", "adopting", "available", "clean failed",
    "clean hold", "clean wait", "cleaning", "deleted", "deleting",
    "deploy complete", "deploy failed", "deploy hold", "deploying", "enroll",
    "error", "inspect failed", "inspect wait", "inspecting", "manageable",
    "rescue", "rescue failed", "rescue wait", "rescuing", "service failed",
    "service hold", "service wait", "servicing", "unrescue failed",
    "unrescuing", "verifying", "wait call-back"})
#: Ironic's limit on a node name.
MAX_NODE_NAME_LENGTH = 255
#: Placement's limit on a resource class name.
MAX_RESOURCE_CLASS_LENGTH = 255
_CUSTOM = "CUSTOM_"
_KEYS = {"uuid", "name", "resource_class", "properties", "provision_state",
         "maintenance", "traits", "trait_changes"}


class InventoryError(ValueError):
    """A node inventory is not usable; the message names file, node, field."""


@dataclass(frozen=True, slots=True)
class BareMetalNode:
    """One validated node.

    ``placement_resource_class`` (``CUSTOM_<RESOURCE_CLASS>``, normalised
    as Placement does) and ``managed_traits`` (the traits the driver owns
    on this node: asserted or removed) are computed once, at construction.
    """

    uuid: str
    name: str
    resource_class: str
    properties: Mapping[str, Any]
    provision_state: str
    maintenance: bool
    asserted_traits: frozenset[str]
    removed_traits: frozenset[str]
    placement_resource_class: str = field(init=False, compare=False)
    managed_traits: frozenset[str] = field(init=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "placement_resource_class",
                           _resource_class(self.resource_class))
        object.__setattr__(self, "managed_traits",
                           self.asserted_traits | self.removed_traits)

    @property
    def available(self) -> bool:
        """Usable: not in maintenance, and available or active."""
        return not self.maintenance and \
            self.provision_state in USABLE_STATES


@functools.lru_cache(maxsize=1024)  # a few classes, named by many nodes
def _resource_class(name: str) -> str:
    # normalize_name() would turn an already custom name into CUSTOM_CUSTOM_.
    if os_resource_classes.is_custom(name.upper()):
        name = name[len(_CUSTOM):]
    return os_resource_classes.normalize_name(name)


def parse_inventory(data: Any, source: str) -> tuple[BareMetalNode, ...]:
    """Validate an inventory document; cost is linear in the nodes.

    Raises:
        InventoryError: naming ``source``, the node (index and uuid) and
            the field, for the first problem found.
    """
    if isinstance(data, Mapping):
        check_fields(data, {"nodes"}, source, "an inventory", InventoryError)
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


#: ``(device, inode, size, mtime, ctime)`` of a file, nanoseconds.
Signature = tuple[int, int, int, int, int]
#: How long after a file's last change (its ``ctime``, which no one can
#: set back) a matching signature is not trusted alone: a write in place
#: within one timestamp tick of a read keeps size and times (the "racy
#: clean" problem git knows).  Two seconds cover coarse clocks and FAT.
RACY_NS = 2_000_000_000


class FileWatch:
    """Whether a file still holds what was last read from it, cheaply.

    :meth:`reading` records, before a parse, the file's signature and a
    digest of its bytes.  :meth:`unchanged` compares a later signature:
    a different one means changed; the same one means unchanged, except
    while the file's ``ctime`` was within :data:`RACY_NS` of that read,
    when ``verify=True`` also compares the digest (one read, no parse).
    """

    def __init__(self, path: pathlib.Path) -> None:
        self.path = path
        self._name = os.fspath(path)
        self._signature: Signature | None = None
        self._digest: bytes | None = None
        self._racy = True

    def stat(self) -> Signature:
        """The file's signature now.

        Raises:
            OSError: it cannot be stat'ed.
        """
        info = os.stat(self._name)
        return (info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns,
                info.st_ctime_ns)

    def unchanged(self, signature: Signature, *, verify: bool) -> bool:
        """Whether the file (now ``signature``) holds what was last read."""
        if signature != self._signature:
            return False
        if not (verify and self._racy):
            return True
        start = time.time_ns()
        digest = self._read_digest()
        if digest is None or digest != self._digest:
            return False
        self._racy = signature[4] + RACY_NS > start
        return True

    def reading(self, signature: Signature) -> None:
        """Record that the file, ``signature`` just before, is being read
        now (call before parsing it: content it gets after this digest is
        caught by the next :meth:`unchanged`)."""
        start = time.time_ns()
        self._signature = signature
        self._digest = self._read_digest()
        self._racy = (self._digest is None
                      or signature[4] + RACY_NS > start)

    def _read_digest(self) -> bytes | None:
        try:
            # No more than a parse would read (a bigger file fails it);
            # nothing from a FIFO or device (the parse refuses them).
            data = read_regular(self._name, MAX_FILE_BYTES + 1)
        except OSError:
            return None  # the parse says why; a None digest never matches
        return hashlib.sha256(data).digest()


def _node(raw: Any, where: str) -> BareMetalNode:
    check_fields(raw, _KEYS, where, "a node", InventoryError)
    node_uuid = raw.get("uuid")
    if not isinstance(node_uuid, str):
        raise InventoryError(
            f"{where}: uuid " + ("is required" if node_uuid is None else
                                 f"must be a string, not {kind_of(node_uuid)}")
            + "; give the node's ironic uuid")
    try:
        node_uuid = str(uuidlib.UUID(node_uuid))
    except ValueError:
        raise InventoryError(f"{where}: uuid {node_uuid!r} is not a UUID; "
                             "give the node's ironic uuid") from None
    where = f"{where} ({node_uuid})"
    name = raw.get("name")
    if name is not None and (not isinstance(name, str) or not name
                             or not name.isprintable()
                             or len(name) > MAX_NODE_NAME_LENGTH):
        raise InventoryError(
            f"{where}: name must be printable text of 1 to "
            f"{MAX_NODE_NAME_LENGTH} characters, not {kind_of(name)}; quote "
            "it in YAML, or leave it out to use the uuid")
    state = raw.get("provision_state", "available")
    if not isinstance(state, str) or state not in PROVISION_STATES:
        close = (difflib.get_close_matches(state, PROVISION_STATES, n=1)
                 if isinstance(state, str) else [])
        raise InventoryError(
            f"{where}: provision_state {kind_of(state)} is not an ironic "
            "provision state; " + (f"did you mean {close[0]!r}?" if close
                                   else "use one such as 'available', "
                                   "'active', 'manageable' or 'enroll' "
                                   "(`virtdriver help ironic-driver` lists them)"))
    rc = _checked_resource_class(raw.get("resource_class"), where)
    if "traits" in raw and "trait_changes" in raw:
        raise InventoryError(f"{where}: give either traits (the full list) "
                             "or trait_changes, not both")
    if "trait_changes" in raw:
        changes = raw["trait_changes"]
        if not isinstance(changes, Mapping) or set(changes) - {"add",
                                                               "remove"}:
            raise InventoryError(
                f"{where}: trait_changes must be a mapping with 'add' "
                f"and/or 'remove' lists, not {kind_of(changes)}")
        added = _traits(changes.get("add", []), f"{where}: trait_changes.add")
        removed = _traits(changes.get("remove", []),
                          f"{where}: trait_changes.remove")
        both = added & removed
        if both:
            raise InventoryError(f"{where}: trait_changes both adds and "
                                 f"removes {', '.join(sorted(both))}; keep "
                                 "each in one list")
    else:
        added = _traits(raw.get("traits", []), f"{where}: traits")
        removed = frozenset()
    properties = raw.get("properties", {})
    if not isinstance(properties, Mapping):
        raise InventoryError(f"{where}: properties must be a mapping, not "
                             f"{kind_of(properties)}")
    maintenance = raw.get("maintenance", False)
    if not isinstance(maintenance, bool):
        raise InventoryError(f"{where}: maintenance must be true or false, "
                             f"not {kind_of(maintenance)}; write it unquoted")
    return BareMetalNode(
        uuid=node_uuid, name=name or node_uuid, resource_class=rc,
        properties=MappingProxyType(dict(properties)),
        provision_state=state, maintenance=maintenance,
        asserted_traits=added, removed_traits=removed)


def _checked_resource_class(rc: Any, where: str) -> str:
    if not isinstance(rc, str) or not rc.strip():
        raise InventoryError(f"{where}: resource_class is required, a "
                             f"non-empty string, not {kind_of(rc)} (e.g. "
                             "'baremetal.gold')")
    rc = rc.strip()
    placement = _resource_class(rc)
    if not placement[len(_CUSTOM):].strip("_"):
        raise InventoryError(
            f"{where}: resource_class {rc!r} has no letters or digits (it "
            f"would become {placement}); name the class with letters or "
            "digits, e.g. 'baremetal.gold'")
    if len(placement) > MAX_RESOURCE_CLASS_LENGTH:
        raise InventoryError(
            f"{where}: resource_class {rc[:40]!r}... becomes a name longer "
            f"than Placement's {MAX_RESOURCE_CLASS_LENGTH} characters; "
            "shorten it")
    return rc


def _traits(values: Any, where: str) -> frozenset[str]:
    hint = ("; for changes give trait_changes: {add: [...], remove: [...]}"
            if isinstance(values, Mapping) else "")
    return check_trait_list(values, where, InventoryError, hint)
