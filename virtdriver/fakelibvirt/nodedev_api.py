"""The node device calls of ``virConnect``, as libvirt's node device
driver (``nodedev:///system``) answers them.

:class:`NodeDeviceAPI` is a base of :class:`~.connection.virConnect`; it
uses the connection's ``host`` and ``_guard`` (closed or dropped
connection, planned faults).  Flags are checked as the driver checks them,
with its function names in the error (libvirt-python's ``listDevices``
asks ``numOfDevices`` first, so both name ``nodeNumOfDevices``).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from lxml import etree

from virtdriver.fakelibvirt import constants as c
from virtdriver.fakelibvirt.constants import VIR_FROM_NODEDEV
from virtdriver.fakelibvirt.errors import make_error
from virtdriver.fakelibvirt.nodedev import (
    LIST_ALL_FLAGS, has_capability, matches_flags, virNodeDevice)
from virtdriver.fakelibvirt.nodedev_errors import check_flags, invalid_arg
from virtdriver.fakelibvirt.nodedev_state import NodeDeviceTable, table_for

if TYPE_CHECKING:
    from virtdriver.fakelibvirt.connection import FakeHost

_EVENT_IDS = (c.VIR_NODE_DEVICE_EVENT_ID_LIFECYCLE,
              c.VIR_NODE_DEVICE_EVENT_ID_UPDATE)


def _call(function: str):
    """Guard a node device call as libvirt's C call ``function``."""

    def decorate(method):
        @functools.wraps(method)
        def guarded(self: NodeDeviceAPI, *args: Any, **kwargs: Any) -> Any:
            self._guard(method.__name__, function, VIR_FROM_NODEDEV)
            return method(self, *args, **kwargs)

        return guarded

    return decorate


class NodeDeviceAPI:
    """``virConnect``'s node device calls over the host's devices."""

    host: FakeHost
    _guard: Callable[[str, str, int], None]

    @property
    def _node_devices(self) -> NodeDeviceTable:
        return table_for(self.host)

    @_call("virConnectListAllNodeDevices")
    def listAllDevices(self, flags: int = 0) -> list[virNodeDevice]:  # noqa: N802
        """The host's node devices, sorted by name; ``flags`` keep those
        with a capability named (``VIR_CONNECT_LIST_NODE_DEVICES_CAP_*``)
        and in the state named (``..._ACTIVE``, ``..._INACTIVE``)."""
        check_flags(flags, LIST_ALL_FLAGS, "nodeConnectListAllNodeDevices")
        devices = [virNodeDevice(self, name)  # type: ignore[arg-type]
                   for name in self._node_devices.names()]
        return [d for d in devices if matches_flags(d, flags)]

    @_call("virNodeListDevices")
    def listDevices(self, cap: str | None,  # noqa: N802
                    flags: int = 0) -> list[str]:
        """Names of the devices with capability ``cap`` (every device for
        ``None``; an unknown name selects none, as in libvirt)."""
        check_flags(flags, 0, "nodeNumOfDevices")
        return self._names_with(cap)

    @_call("virNodeNumOfDevices")
    def numOfDevices(self, cap: str | None, flags: int = 0) -> int:  # noqa: N802
        """How many devices :meth:`listDevices` would name."""
        check_flags(flags, 0, "nodeNumOfDevices")
        return len(self._names_with(cap))

    @_call("virNodeDeviceLookupByName")
    def nodeDeviceLookupByName(self, name: str) -> virNodeDevice:  # noqa: N802
        """The device ``name``; ``VIR_ERR_NO_NODE_DEVICE`` if none."""
        self._node_devices.require(name)
        return virNodeDevice(self, name)  # type: ignore[arg-type]

    @_call("virNodeDeviceLookupSCSIHostByWWN")
    def nodeDeviceLookupSCSIHostByWWN(self, wwnn: str, wwpn: str,  # noqa: N802
                                      flags: int = 0) -> virNodeDevice:
        """The ``scsi_host`` whose ``fc_host`` has these WWNs."""
        check_flags(flags, 0, "nodeDeviceLookupSCSIHostByWWN")
        table = self._node_devices
        for name in table.names():
            state = table.get(name)
            if state is None:
                continue
            fc = etree.fromstring(state.xml.encode()).find(
                "capability[@type='scsi_host']/capability[@type='fc_host']")
            if fc is not None and fc.findtext("wwnn") == wwnn and \
                    fc.findtext("wwpn") == wwpn:
                return virNodeDevice(self, name)  # type: ignore[arg-type]
        # libvirt's driver returns no device and records no error here.
        raise make_error(c.VIR_ERR_INTERNAL_ERROR, c.VIR_FROM_NONE,
                         "An error occurred, but the cause is unknown",
                         int1=0, int2=0)

    @_call("virNodeDeviceCreateXML")
    def nodeDeviceCreateXML(self, xmlDesc: str,  # noqa: N802, N803
                            flags: int = 0) -> virNodeDevice:
        """Create and start a transient mdev (see
        :meth:`.NodeDeviceTable.create_mdev`)."""
        check_flags(flags, c.VIR_NODE_DEVICE_CREATE_XML_VALIDATE,
                    "nodeDeviceCreateXML")
        name = self._node_devices.create_mdev(xmlDesc, persistent=False)
        return virNodeDevice(self, name)  # type: ignore[arg-type]

    @_call("virNodeDeviceDefineXML")
    def nodeDeviceDefineXML(self, xmlDesc: str,  # noqa: N802, N803
                            flags: int = 0) -> virNodeDevice:
        """Define a persistent, inactive mdev; start it with
        ``virNodeDevice.create()``."""
        check_flags(flags, c.VIR_NODE_DEVICE_DEFINE_XML_VALIDATE,
                    "nodeDeviceDefineXML")
        name = self._node_devices.create_mdev(xmlDesc, persistent=True)
        return virNodeDevice(self, name)  # type: ignore[arg-type]

    @_call("virConnectNodeDeviceEventRegisterAny")
    def nodeDeviceEventRegisterAny(self, dev: virNodeDevice | None,  # noqa: N802
                                   eventID: int,  # noqa: N803
                                   cb: Callable[..., Any],
                                   opaque: Any) -> int:
        """Call ``cb(conn, dev, event, detail, opaque)`` for lifecycle
        events of ``dev`` (every device for ``None``); returns the
        callback id (0, 1, ... on this connection)."""
        if eventID not in _EVENT_IDS:
            raise invalid_arg(f"eventID in virConnectNodeDeviceEvent"
                              f"RegisterAny must be less than "
                              f"{len(_EVENT_IDS)}")
        return self._node_devices.register(
            self, dev.name() if dev is not None else None, eventID, cb,
            opaque)

    @_call("virConnectNodeDeviceEventDeregisterAny")
    def nodeDeviceEventDeregisterAny(self, callbackID: int) -> None:  # noqa: N802, N803
        """Forget a callback; ``VIR_ERR_INVALID_ARG`` for an unknown id."""
        self._node_devices.deregister(self, callbackID)

    def _names_with(self, cap: str | None) -> list[str]:
        table = self._node_devices
        names = []
        for name in table.names():
            state = table.get(name)
            if state is not None and has_capability(state.xml, cap):
                names.append(name)
        return names
