"""A fake host's node devices at runtime: which exist, active or only
defined, and the lifecycle events their changes send.

A host's :class:`~.documents.HostDocuments` stay as they were built; the
first node device call on a host copies its ``node_devices`` into a
:class:`NodeDeviceTable` (one per host, :func:`table_for`), and from then
on mdevs made, started, stopped or undefined and devices unplugged or
replaced change the table, as they change a real host, for every
connection to it.

Events go to the callbacks connections registered
(``nodeDeviceEventRegisterAny``), after the change, on the thread that
made it — as fakelibvirt runs close callbacks; libvirt runs both from its
event loop.
"""

from __future__ import annotations

import itertools
import threading
import uuid as uuid_module
import weakref
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from lxml import etree

from virtdriver.fakelibvirt import constants as c
from virtdriver.fakelibvirt import event_loop
from virtdriver.fakelibvirt import nodedev_errors as errors
from virtdriver.fakelibvirt import nodedev_mdev as mdev
from virtdriver.fakelibvirt.errors import no_node_device
from virtdriver.fakelibvirt.nodedev_builder import NodeDevice
from virtdriver.fakelibvirt.nodedev_check import check_sriov, sriov_links

if TYPE_CHECKING:
    from virtdriver.fakelibvirt.connection import FakeHost, virConnect

#: The root device libvirt's node device driver reports as persistent.
ROOT = "computer"


@dataclass(frozen=True)
class DeviceState:
    """One device: its document, whether it is active / defined and
    started at boot (``autostart``)."""

    xml: str
    active: bool = True
    persistent: bool = False
    autostart: bool = False


@dataclass(frozen=True)
class _Listener:
    conn: virConnect
    callback_id: int
    device: str | None
    event_id: int
    callback: Callable[..., Any]
    opaque: Any


class NodeDeviceTable:
    """The node devices of one host, changed only under its lock."""

    def __init__(self, devices: Mapping[str, str]) -> None:
        self._lock = threading.Lock()
        # The daemon reports its root persistent and autostarted.
        self._devices = {name: DeviceState(xml, persistent=name == ROOT,
                                           autostart=name == ROOT)
                         for name, xml in devices.items()}
        self._listeners: list[_Listener] = []
        self._ids: weakref.WeakKeyDictionary[Any, itertools.count] = \
            weakref.WeakKeyDictionary()
        self._iommu = itertools.count(1000)

    # -- reading ---------------------------------------------------------

    def names(self) -> list[str]:
        """Every device name, sorted."""
        with self._lock:
            return sorted(self._devices)

    def get(self, name: str) -> DeviceState | None:
        """The device's state now, ``None`` once it is gone."""
        with self._lock:
            return self._devices.get(name)

    def require(self, name: str) -> DeviceState:
        """The device's state, or libvirt's ``VIR_ERR_NO_NODE_DEVICE``."""
        state = self.get(name)
        if state is None:
            raise no_node_device(name)
        return state

    # -- a host that changes under the driver ------------------------------

    def add(self, device: NodeDevice) -> None:
        """Plug ``device`` in (``CREATED``).

        Raises:
            ValueError: a device of that name is already there, or it
                contradicts a PF or VF present (see :func:`.check_sriov`).
        """
        with self._lock:
            if device.name in self._devices:
                raise ValueError(f"node device {device.name!r} already "
                                 "exists; replace() it or remove() it first")
            self._check_with(device)
            self._devices[device.name] = DeviceState(device.xml)
        self._emit(device.name, c.VIR_NODE_DEVICE_EVENT_CREATED)

    def remove(self, name: str) -> None:
        """Unplug ``name`` and the devices below it: its children (mdevs,
        net devices...) and a PF's VFs (``DELETED`` for each, children
        first, as the kernel removes them).

        Raises:
            KeyError: no such device.
        """
        with self._lock:
            if name not in self._devices:
                raise KeyError(f"no node device {name!r} to remove")
            gone = self._subtree(name)
            for child in gone:
                del self._devices[child]
        for child in gone:
            self._emit(child, c.VIR_NODE_DEVICE_EVENT_DELETED)

    def replace(self, device: NodeDevice) -> None:
        """Swap the device of ``device.name`` for ``device`` (a GPU of
        another type, a NIC of another vendor in the same slot): the old
        one is unplugged with what is below it (``DELETED`` for each, as
        :meth:`remove`), the new one plugged in (``CREATED``).

        Raises:
            KeyError: no device of that name to replace.
            ValueError: it contradicts a PF or VF left on the host.
        """
        with self._lock:
            if device.name not in self._devices:
                raise KeyError(f"no node device {device.name!r} to replace")
            gone = self._subtree(device.name)
            kept = {n: s for n, s in self._devices.items() if n not in gone}
            self._check_with(device, kept)
            self._devices = {**kept, device.name: DeviceState(device.xml)}
        for name in gone:
            self._emit(name, c.VIR_NODE_DEVICE_EVENT_DELETED)
        self._emit(device.name, c.VIR_NODE_DEVICE_EVENT_CREATED)

    # -- the mdev lifecycle (what mdevctl does for libvirt) ----------------

    def create_mdev(self, xml: str, *, persistent: bool) -> str:
        """``nodeDeviceCreateXML`` (a transient, active mdev) or
        ``nodeDeviceDefineXML`` (a persistent, inactive one); its name."""
        request = mdev.parse_request(xml)
        with self._lock:
            parent = self._devices.get(request.parent)
            if parent is None:
                raise errors.config_unsupported(
                    f"invalid parent device '{request.parent}'")
            addr = mdev.parent_address(parent.xml)
            if addr is None:
                raise errors.parse_failed("Unable to find address for "
                                          f"parent device '{request.parent}'")
            uuid = request.uuid or str(uuid_module.uuid4())
            name = mdev.mdev_name(uuid, addr)
            existing = self._devices.get(name)
            if persistent:
                if existing is not None and existing.persistent:
                    raise errors.internal(
                        f"Unable to define mediated device: Device {uuid} "
                        f"on {addr} already defined")
                xml_out = (existing.xml if existing is not None else
                           mdev.mdev_document(name, request, uuid, addr,
                                              active=False))
                self._devices[name] = DeviceState(
                    xml_out, active=existing is not None, persistent=True)
                event = c.VIR_NODE_DEVICE_EVENT_DEFINED
            else:
                if existing is not None and existing.active:
                    raise errors.internal("Unable to start mediated "
                                          "device: Device already exists")
                self._take_instance(request.parent, request.type_id, addr,
                                    "Unable to start mediated device")
                # Starting a defined one this way keeps it defined.
                self._devices[name] = DeviceState(
                    self._active_document(name, request, uuid, addr),
                    persistent=existing is not None and existing.persistent,
                    autostart=existing is not None and existing.autostart)
                event = c.VIR_NODE_DEVICE_EVENT_CREATED
        self._emit(name, event)
        return name

    def start(self, name: str) -> None:
        """``virNodeDevice.create()``: start a defined mdev."""
        with self._lock:
            state = self._require_locked(name)
            if state.active:
                raise errors.operation_invalid("Device is already active")
            request, uuid, addr = self._mdev_of(state)
            self._take_instance(request.parent, request.type_id, addr,
                                "Unable to create mediated device")
            self._devices[name] = replace(state, active=True,
                                          xml=self._active_document(
                                              name, request, uuid, addr))
        self._emit(name, c.VIR_NODE_DEVICE_EVENT_CREATED)

    def stop(self, name: str) -> None:
        """``virNodeDevice.destroy()``: stop an active mdev; a transient
        one is gone, a defined one stays, inactive."""
        with self._lock:
            state = self._require_locked(name)
            request, uuid, addr = self._mdev_of(state)
            if not state.active:
                raise errors.operation_invalid(
                    f"Device '{name}' is not active")
            parent = self._devices.get(request.parent)
            if parent is not None:
                self._devices[request.parent] = replace(
                    parent, xml=mdev.with_available_instances(
                        parent.xml, request.type_id, +1))
            if state.persistent:
                self._devices[name] = DeviceState(
                    mdev.mdev_document(name, request, uuid, addr,
                                       active=False),
                    active=False, persistent=True)
            else:
                del self._devices[name]
        self._emit(name, c.VIR_NODE_DEVICE_EVENT_DELETED)

    def undefine(self, name: str) -> None:
        """``virNodeDevice.undefine()``: forget a defined mdev's
        definition; an inactive one is gone, an active one stays,
        transient."""
        with self._lock:
            state = self._require_locked(name)
            if not state.persistent:
                raise errors.operation_invalid(
                    f"Node device '{name}' is not defined")
            self._mdev_of(state)
            if state.active:
                self._devices[name] = replace(state, persistent=False,
                                              autostart=False)
            else:
                del self._devices[name]
        self._emit(name, c.VIR_NODE_DEVICE_EVENT_UNDEFINED)

    def set_autostart(self, name: str, autostart: bool) -> None:
        """``virNodeDevice.setAutostart()``: defined mdevs only."""
        with self._lock:
            state = self._require_locked(name)
            if mdev.mdev_facts(state.xml) == (None, None):
                raise errors.operation_unsupported("Unsupported device type")
            if not state.persistent:
                raise errors.operation_invalid(
                    "cannot set autostart for transient device")
            self._devices[name] = replace(state, autostart=autostart)

    # -- events ----------------------------------------------------------

    def register(self, conn: virConnect, device: str | None, event_id: int,
                 callback: Callable[..., Any], opaque: Any) -> int:
        """Add a callback for ``conn``; its id (0, 1, ... per connection,
        never reused).

        Raises:
            libvirtError: ``VIR_ERR_INVALID_ARG`` "event callback already
                tracked" for a second callback of the same event and
                device on one connection (libvirt-python passes libvirt
                one dispatcher and the connection for every callback, so
                libvirt sees the same one twice); ``VIR_ERR_INTERNAL_ERROR``
                without a registered event loop (:mod:`.event_loop`), which
                delivers the events.
        """
        event_loop.require()   # events come through the loop, as libvirt's
        with self._lock:
            if any(entry.conn is conn and entry.event_id == event_id
                   and entry.device == device for entry in self._listeners):
                raise errors.invalid_arg("event callback already tracked")
            ids = self._ids.setdefault(conn, itertools.count())
            listener = _Listener(conn, next(ids), device, event_id,
                                 callback, opaque)
            self._listeners.append(listener)
        return listener.callback_id

    def deregister(self, conn: virConnect, callback_id: int) -> None:
        """Remove ``conn``'s callback ``callback_id``.

        Raises:
            libvirtError: ``VIR_ERR_INVALID_ARG`` for an id not registered.
        """
        with self._lock:
            for listener in self._listeners:
                if listener.conn is conn and \
                        listener.callback_id == callback_id:
                    self._listeners.remove(listener)
                    return
        raise errors.invalid_arg(
            f"event callback id {callback_id} not registered")

    def _emit(self, name: str, event: int) -> None:
        # nodedev imports this module; the device class is needed only here.
        from virtdriver.fakelibvirt.nodedev import virNodeDevice

        with self._lock:
            listeners = [entry for entry in self._listeners
                         if entry.device in (None, name)
                         and not entry.conn.closed
                         and not entry.conn._dropped]
        # Only lifecycle callbacks fire: no change here is an UPDATE (a
        # device whose document changed while it stayed).
        listeners = [entry for entry in listeners
                     if entry.event_id == c.VIR_NODE_DEVICE_EVENT_ID_LIFECYCLE]
        for entry in listeners:
            event_loop.dispatch(entry.callback, entry.conn,
                                virNodeDevice(entry.conn, name), event, 0,
                                entry.opaque)

    # -- helpers (lock held) ---------------------------------------------

    def _require_locked(self, name: str) -> DeviceState:
        state = self._devices.get(name)
        if state is None:
            raise no_node_device(name)
        return state

    def _check_with(self, device: NodeDevice,
                    devices: Mapping[str, DeviceState] | None = None) -> None:
        """Refuse a device that would contradict the SR-IOV links of
        ``devices`` (the host's; a VF naming a PF that does not list
        it...)."""
        devices = self._devices if devices is None else devices
        others = [NodeDevice(n, s.xml, ()) for n, s in devices.items()
                  if n != device.name]
        check_sriov([*others, device], complete=False)

    def _subtree(self, name: str) -> list[str]:
        # Below a device: its children, and a PF's VFs (the kernel removes
        # them with it, though their <parent> is a bridge).
        parents = {n: _parent_of(s.xml) for n, s in self._devices.items()}
        links = {n: sriov_links(s.xml) for n, s in self._devices.items()}
        found = [name]
        for item in found:
            vfs = links[item][1]
            found.extend(n for n in self._devices if n not in found and (
                parents[n] == item or links[n][0] in vfs))
        return list(reversed(found))

    def _mdev_of(self, state: DeviceState):
        type_id, uuid = mdev.mdev_facts(state.xml)
        parent = _parent_of(state.xml)
        parent_state = self._devices.get(parent or "")
        addr = parent_state and mdev.parent_address(parent_state.xml)
        if type_id is None or uuid is None:
            raise errors.config_unsupported("Unsupported device type")
        return (mdev.MdevRequest(parent or "", type_id, uuid,
                                 _attrs_of(state.xml)), uuid,
                addr or _parent_addr_of(state.xml) or "")

    def _take_instance(self, parent_name: str, type_id: str, addr: str,
                       prefix: str) -> None:
        parent = self._devices.get(parent_name)
        if parent is None:
            raise errors.internal(
                f"unable to find parent device '{parent_name}'")
        if not mdev.has_mdev_types(parent.xml):
            raise errors.internal(f"{prefix}: Parent {addr} is not "
                                  "currently registered for mdev support")
        left = mdev.available_instances(parent.xml, type_id)
        if left is None:
            raise errors.internal(f"{prefix}: Parent {addr} does not "
                                  f"support mdev type {type_id}")
        if left <= 0:
            raise errors.internal(f"{prefix}: No available instances of "
                                  f"{type_id} on {addr}")
        self._devices[parent_name] = replace(
            parent, xml=mdev.with_available_instances(parent.xml, type_id,
                                                      -1))

    def _active_document(self, name: str, request: mdev.MdevRequest,
                         uuid: str, addr: str) -> str:
        parent = self._devices.get(request.parent)
        return mdev.mdev_document(
            name, request, uuid, addr, active=True,
            iommu_group=next(self._iommu),
            parent_path=_path_of(parent.xml) if parent else None)


def _element_text(xml: str, path: str) -> str | None:
    return etree.fromstring(xml.encode()).findtext(path)


def _parent_of(xml: str) -> str | None:
    return _element_text(xml, "parent")


def _path_of(xml: str) -> str | None:
    return _element_text(xml, "path")


def _parent_addr_of(xml: str) -> str | None:
    return _element_text(xml, "capability[@type='mdev']/parent_addr")


def _attrs_of(xml: str) -> tuple[tuple[str, str], ...]:
    cap = etree.fromstring(xml.encode()).find("capability[@type='mdev']")
    return tuple((a.get("name", ""), a.get("value", ""))
                 for a in (cap.findall("attr") if cap is not None else ()))


_tables_lock = threading.Lock()
_tables: weakref.WeakKeyDictionary[FakeHost, NodeDeviceTable] = \
    weakref.WeakKeyDictionary()


def table_for(host: FakeHost) -> NodeDeviceTable:
    """The host's node device table, made from its documents on first
    use."""
    with _tables_lock:
        table = _tables.get(host)
        if table is None:
            table = _tables[host] = NodeDeviceTable(
                host.documents.node_devices)
        return table


def node_devices(host: FakeHost) -> NodeDeviceTable:
    """The runtime node devices of ``host`` (unplug, replace, plug in)::

        node_devices(host).remove("pci_0000_81_00_0")    # hot-unplug
        node_devices(host).replace(pci_device(...))      # another card
    """
    return table_for(host)
