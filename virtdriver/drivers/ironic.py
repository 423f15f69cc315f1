"""IronicDriver: many bare-metal nodes from an inventory file, one root each.

Nodes come from a JSON or YAML inventory (see
:mod:`virtdriver.drivers.ironic_inventory` for the format).  Each node is
its own root provider, **named and identified by the node's uuid**, as
Nova's ironic driver does: a node renamed in the inventory keeps its
provider, and the human name stays in :meth:`IronicDriver.node_capabilities`
facts and in trait evidence.  A node's name is accepted wherever a node is
asked for, as an alias of its uuid.

Per node the driver sets:

* **inventory** — one unit of ``CUSTOM_<RESOURCE_CLASS>``, reserved (1)
  while the node is unavailable (maintenance, or a provision state other
  than ``available``/``active``), 0 otherwise;
* **traits** — what the node's inspection data says (a full list, or
  add/remove changes): those names, and only those, are owned on that node
  (:meth:`IronicDriver.ownership_for`), so traits others set survive; plus
  the ``COMPUTE_*`` traits of :data:`IRONIC_CAPABILITIES`, owned on every
  node.  A trait the driver set on an earlier update that the inspection
  data no longer names is removed on the next update (it is still owned for
  that one update), then forgotten.

The file is re-read when it changed: each per-node call stats it (O(1))
and parses it again only when its identity, size or modification time
differ from the last read, so updating every node after one change costs
one parse plus O(1) per node.  ``get_available_nodes(refresh=True)``
re-reads unconditionally.  A failed read changes nothing: the last good
inventory stays, and the call raises :class:`InventoryReadError` without
touching the tree (fail safe: a failed read removes nothing).
"""

from __future__ import annotations

import os
import pathlib
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from oslo_config import cfg

from virtdriver.capabilities.traits.apply import apply_report
from virtdriver.capabilities.traits.derive import TraitReport
from virtdriver.capabilities.traits.ownership import Ownership
from virtdriver.conf.reader import ConfigError, OptionReader
from virtdriver.drivers.base import (
    ComputeDriver, DriverError, NodeCapabilities, NodeNotFoundError,
    ProviderTreeLike)
from virtdriver.drivers.ironic_inventory import (
    BareMetalNode, FileWatch, InventoryError, load_inventory)
from virtdriver.drivers.ironic_report import (
    CAPABILITY_TRAITS, FAMILY, IRONIC_CAPABILITIES, NodeReports)
from virtdriver.drivers.undo import UndoLog

__all__ = ["CAPABILITY_TRAITS", "FAMILY", "IRONIC_CAPABILITIES",
           "InventoryReadError", "IronicDriver", "node_inventory"]

_NONE: frozenset[str] = frozenset()

class InventoryReadError(DriverError):
    """The node inventory file could not be read, or is not valid.

    Nothing was changed: the driver keeps the last inventory it read
    successfully, and the provider tree was not touched.

    Attributes:
        path: the inventory file.
        reason: what is wrong, naming the node and field where there is one.
    """

    def __init__(self, path: pathlib.Path, reason: str) -> None:
        self.path = path
        self.reason = reason
        super().__init__(
            f"ironic driver: node inventory {path} is unusable: {reason}.  "
            "Nothing was changed (the last good inventory is kept); fix the "
            "file and the next update reads it again")


@dataclass(frozen=True, slots=True)
class _Inventory:
    """One successful read: nodes by uuid, names → uuids, sorted uuids."""

    by_uuid: Mapping[str, BareMetalNode]
    by_name: Mapping[str, str]
    nodenames: tuple[str, ...]


class IronicDriver(ComputeDriver):
    """Bare-metal nodes from an inventory file, each its own root provider.

    Args:
        inventory_path: the JSON (``.json``) or YAML inventory file.
        conf: options; ``[compute] image_type_exclude_list`` turns image
            type traits off as for any driver.

    Raises:
        DriverError: no ``inventory_path``, or ``conf`` has a bad value.
    """

    capabilities = IRONIC_CAPABILITIES

    def __init__(self, *, inventory_path: str | os.PathLike[str] | None = None,
                 conf: cfg.ConfigOpts | None = None) -> None:
        if inventory_path is None or not str(inventory_path):
            raise DriverError(
                "ironic driver: no node inventory file; pass "
                "inventory_path='/etc/virtdriver/nodes.yaml' (on the command "
                "line: --inventory FILE), JSON or YAML, see "
                "`virtdriver help ironic-driver`")
        self._path = pathlib.Path(inventory_path)
        self._reports = NodeReports(_image_type_exclude_list(conf),
                                    str(self._path))
        self._lock = threading.RLock()
        self._watch = FileWatch(self._path)
        self._inventory: _Inventory | None = None
        # Why the last read failed (the file as the watch last saw it).
        self._failed: str | None = None
        # node uuid -> inspection traits this driver asserted last update;
        # changed only undoably (self._undo), see begin_update().
        self._set_before: dict[str, frozenset[str]] = {}
        self._undo = UndoLog()
        # (inventory, memory version) -> the union ownership, computed once.
        self._memory_version = 0
        self._union: tuple[object, int, Ownership] | None = None
        # (node, stale, (ownership, report)) of the node last asked about.
        self._last: tuple[BareMetalNode, frozenset[str],
                          tuple[Ownership, TraitReport]] | None = None

    # --- the contract ----------------------------------------------------

    @property
    def ownership(self) -> Ownership:
        """The union over all nodes: capability traits, plus every trait
        some node's inspection data manages (or that the driver set before
        and will remove at that node's next update).

        Reconcile a provider with :meth:`ownership_for` its node, never
        with this: a trait one node manages is foreign on the others.
        """
        with self._lock:
            inventory = self._inventory
            cached = self._union
            if (cached is not None and cached[0] is inventory
                    and cached[1] == self._memory_version):
                return cached[2]
            names = set(CAPABILITY_TRAITS)
            for node in (inventory.by_uuid.values() if inventory else ()):
                names |= node.managed_traits
            for traits in self._set_before.values():
                names |= traits
            union = Ownership(frozenset(names))
            self._union = (inventory, self._memory_version, union)
            return union

    def root_uuid_for(self, nodename: str) -> None:
        """``None``: the driver creates each root itself, named and
        identified by the node's own uuid (``nodename`` may be an alias)."""
        return None

    def ownership_for(self, nodename: str) -> Ownership:
        """What the driver owns on ``nodename``'s provider: the capability
        traits, the traits its inspection data names now, and those the
        driver set on an earlier update and will remove at the next.

        Raises:
            NodeNotFoundError: not one of the driver's nodes.
        """
        with self._lock:
            node = self._node(nodename)
            return self._derived(node, self._stale(node))[0]

    def node_stamp(self, nodename: str) -> object | None:
        """What the driver writes and reports for ``nodename``, as one
        value (:meth:`ComputeDriver.node_stamp`): the node's record in the
        inventory (the same object until the file changes, then compared
        by value) and the traits it set before that the inspection data
        no longer names (removed at the node's next update).

        No I/O: the inventory as last read.  The tracker's cycle begins
        with ``get_available_nodes(refresh=True)``, which reads the file
        if it changed; a change after that is seen by the next cycle.
        ``None`` — do the full update, which says what is wrong — when
        the node is unknown or the last read of the file failed.
        """
        with self._lock:
            inventory = self._inventory
            node = inventory.by_uuid.get(nodename) if inventory else None
            if node is None or self._failed is not None:
                return None
            before = self._set_before.get(nodename)
            if before is None or before <= node.managed_traits:
                return (node, _NONE)
            return (node, before - node.managed_traits)

    def begin_update(self) -> int:
        """Open a transaction over what the driver remembers it set."""
        with self._lock:
            return self._undo.begin()

    def commit_update(self, token: object) -> None:
        """Keep what the driver learnt or forgot since ``token``."""
        with self._lock:
            self._undo.commit(token)

    def rollback_update(self, token: object) -> None:
        """Remember again exactly what the driver had set at ``token``."""
        with self._lock:
            self._undo.rollback(token)
            self._memory_version += 1

    def init_host(self, host: str) -> None:
        """Read the inventory (``host``, the conductor, is not needed).

        Raises:
            InventoryReadError: the file is missing, malformed or invalid.
        """
        with self._lock:
            self._refresh(force=True)

    def get_available_nodes(self, refresh: bool = False) -> list[str]:
        """The nodes' uuids, sorted; ``refresh`` re-reads the file first.

        A node gone from the file is gone from this list; the driver does
        not remove its provider (the tracker removes providers of nodes no
        longer listed), and asking it to update that node raises
        :class:`NodeNotFoundError`.

        Raises:
            InventoryReadError: with ``refresh``, the file could not be
                read; the last good list stands and is not returned, so a
                caller cannot mistake a failed read for removed nodes.
        """
        with self._lock:
            if refresh:
                self._refresh(force=True)
            return list(self._current().nodenames)

    def node_capabilities(self, nodename: str) -> NodeCapabilities:
        """The node's trait report and its facts, from the file as it is
        now (re-read if it changed).

        Raises:
            NodeNotFoundError: not one of the driver's nodes.
            InventoryReadError: the file changed and cannot be read.
        """
        with self._lock:
            self._refresh(force=False)
            node = self._node(nodename)
            report = self._derived(node, self._stale(node))[1]
        facts = {
            "uuid": node.uuid, "name": node.name,
            "resource_class": node.resource_class,
            "placement_resource_class": node.placement_resource_class,
            "provision_state": node.provision_state,
            "maintenance": node.maintenance, "available": node.available,
            "properties": dict(node.properties),
            "inventory_file": str(self._path),
        }
        return NodeCapabilities(nodename=node.uuid, traits=report,
                                facts=facts)

    def update_provider_tree(
            self, tree: ProviderTreeLike, nodename: str,
            allocations: Mapping[str, Any] | None = None) -> None:
        """Root provider named and identified by the node's uuid, with one
        unit of its resource class and its traits applied by ownership.

        The file is re-read first if it changed.  Cost is O(1) in the
        number of nodes (plus one parse when the file changed).

        Raises:
            NodeNotFoundError: not one of the driver's nodes.
            InventoryReadError: the file changed and cannot be read; the
                tree is not touched.
        """
        with self._lock:
            self._refresh(force=False)
            node = self._node(nodename)
            report = self._derived(node, self._stale(node))[1]
            if not tree.exists(node.uuid):
                tree.new_root(node.uuid, node.uuid)
            tree.update_inventory(node.uuid, node_inventory(node))
            tree.update_traits(node.uuid, apply_report(
                tree.record(node.uuid).traits, report))
            self._remember(node)

    # --- reading the file ------------------------------------------------

    def _current(self) -> _Inventory:
        if self._inventory is None:
            raise DriverError("ironic driver: call init_host(host) before "
                              "asking for nodes")
        return self._inventory

    def _refresh(self, force: bool) -> None:
        """Re-read the file if it changed since the last read.

        One ``stat`` decides; ``force`` (``get_available_nodes(refresh=
        True)``) also compares the content's digest while the last change
        is too recent for the stat to be trusted (:class:`FileWatch`).  A
        read that failed is not retried until the file changes again, so
        a broken file costs one stat per call, not one parse.
        """
        if not force and self._inventory is None:
            self._current()
        try:
            signature = self._watch.stat()
        except OSError as exc:
            raise InventoryReadError(
                self._path, f"cannot read it: {exc.strerror}") from None
        if self._watch.unchanged(signature, verify=force):
            if self._failed is not None:
                raise InventoryReadError(self._path, self._failed)
            return
        self._watch.reading(signature)
        try:
            nodes = load_inventory(self._path)
            _check_no_capability_traits(nodes, self._path)
        except InventoryError as exc:
            self._failed = str(exc).removeprefix(f"{self._path}: ")
            raise InventoryReadError(self._path, self._failed) from None
        self._failed = None
        self._install(nodes)

    def _install(self, nodes: Iterable[BareMetalNode]) -> None:
        # A node whose entry did not change keeps its record object, so
        # its node_stamp stays identical (compared in O(1)), not just equal.
        old = self._inventory.by_uuid if self._inventory else {}
        by_uuid = {}
        for node in nodes:
            before = old.get(node.uuid)
            by_uuid[node.uuid] = before if (
                before == node and _same(before.properties, node.properties)
            ) else node
        by_name = {node.name: node.uuid for node in by_uuid.values()}
        for uuid in [u for u in self._set_before if u not in by_uuid]:
            self._set_memory(uuid, frozenset())
        self._inventory = _Inventory(
            MappingProxyType(by_uuid), MappingProxyType(by_name),
            tuple(sorted(by_uuid)))

    # --- per node ----------------------------------------------------------

    def _node(self, nodename: str) -> BareMetalNode:
        """The node with uuid ``nodename``, else the one with that name."""
        inventory = self._current()
        node = inventory.by_uuid.get(nodename)
        if node is None:
            node = inventory.by_uuid.get(inventory.by_name.get(nodename, ""))
        if node is None:
            raise NodeNotFoundError(nodename, inventory.nodenames)
        return node

    def _stale(self, node: BareMetalNode) -> frozenset[str]:
        """Traits the driver set on ``node`` that its inspection data no
        longer names."""
        before = self._set_before.get(node.uuid)
        if before is None or before <= node.managed_traits:
            return _NONE
        return before - node.managed_traits

    def _derived(self, node: BareMetalNode, stale: frozenset[str]
                 ) -> tuple[Ownership, TraitReport]:
        """The node's ownership and trait report, built once for the
        tracker's several calls about one node (a one-entry cache: both
        follow from ``node`` and ``stale`` alone)."""
        cached = self._last
        if cached is not None and cached[0] is node and cached[1] == stale:
            return cached[2]
        owned = Ownership(CAPABILITY_TRAITS | node.managed_traits | stale)
        derived = (owned, self._reports.report(node, stale, owned))
        self._last = (node, stale, derived)
        return derived

    def _remember(self, node: BareMetalNode) -> None:
        """Record that ``node``'s asserted traits are what the driver set
        (stale traits were removed by this update: the node stops owning
        them)."""
        self._set_memory(node.uuid, node.asserted_traits)

    def _set_memory(self, uuid: str, traits: frozenset[str]) -> None:
        """Remember ``traits`` as set on node ``uuid``, undoably."""
        before = self._set_before.get(uuid)
        if before == traits or (before is None and not traits):
            return
        if traits:
            self._set_before[uuid] = traits
        else:
            del self._set_before[uuid]
        self._memory_version += 1
        self._undo.record(_put_memory, self._set_before, uuid, before)


def _same(one: Any, other: Any) -> bool:
    """Equal, and of the same types throughout (``1``, ``1.0`` and
    ``True`` are equal, but a fact should show what the file says)."""
    if type(one) is not type(other):
        return False
    if isinstance(one, Mapping):
        return one.keys() == other.keys() and all(
            _same(one[key], other[key]) for key in one)
    if isinstance(one, list):
        return len(one) == len(other) and all(
            _same(a, b) for a, b in zip(one, other, strict=True))
    return one == other


def _put_memory(memory: dict[str, frozenset[str]], uuid: str,
                traits: frozenset[str] | None) -> None:
    """Undo one change to the driver's memory of what it set."""
    if traits is None:
        memory.pop(uuid, None)
    else:
        memory[uuid] = traits


def node_inventory(node: BareMetalNode) -> dict[str, dict[str, Any]]:
    """One unit of the node's resource class, reserved while unavailable."""
    return {node.placement_resource_class: {
        "total": 1, "reserved": 0 if node.available else 1,
        "min_unit": 1, "max_unit": 1, "step_size": 1,
        "allocation_ratio": 1.0}}


def _image_type_exclude_list(conf: cfg.ConfigOpts | None) -> tuple[str, ...]:
    if conf is None:
        return ()
    reader = OptionReader(conf)
    excluded = reader.get("compute", "image_type_exclude_list", tuple)
    try:
        reader.check()
    except ConfigError as exc:
        raise DriverError(f"ironic driver: {exc}") from None
    return excluded or ()


def _check_no_capability_traits(nodes: Iterable[BareMetalNode],
                                path: pathlib.Path) -> None:
    for index, node in enumerate(nodes):
        clash = node.managed_traits & CAPABILITY_TRAITS
        if clash:
            raise InventoryError(
                f"{path}: node {index} ({node.uuid}): traits name "
                f"{', '.join(sorted(clash))}, which follow the driver's "
                "capabilities on every node; remove them from the node's "
                "inspection data")
