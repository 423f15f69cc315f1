"""Node devices (``virNodeDevice``): handles on a host's node devices.

A handle holds only the connection and the name, as libvirt's does; each
call reads the device as it is now (:mod:`.nodedev_state`), so a device
unplugged since it was listed answers ``VIR_ERR_NO_NODE_DEVICE``.  Each
call passes the connection's fault plan twice: as ``nodeDevice.<method>``
(every device) and ``nodeDevice.<method>:<name>`` (that device), so a test
can fail the 3rd ``XMLDesc`` of a listing or one device's ``listCaps``.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any

from lxml import etree

from virtdriver.fakelibvirt import constants as c
from virtdriver.fakelibvirt.api_table import Unsupported
from virtdriver.fakelibvirt.constants import VIR_FROM_NODEDEV
from virtdriver.fakelibvirt.nodedev_errors import check_flags
from virtdriver.fakelibvirt.nodedev_state import table_for
from virtdriver.fakelibvirt.hostdev import NodeDeviceHostdev

if TYPE_CHECKING:
    from virtdriver.fakelibvirt.connection import virConnect

#: ``listAllDevices`` flag -> the ``<capability type=...>`` it selects.
CAPABILITY_FLAGS = {
    c.VIR_CONNECT_LIST_NODE_DEVICES_CAP_SYSTEM: "system",
    c.VIR_CONNECT_LIST_NODE_DEVICES_CAP_PCI_DEV: "pci",
    c.VIR_CONNECT_LIST_NODE_DEVICES_CAP_USB_DEV: "usb_device",
    c.VIR_CONNECT_LIST_NODE_DEVICES_CAP_USB_INTERFACE: "usb",
    c.VIR_CONNECT_LIST_NODE_DEVICES_CAP_NET: "net",
    c.VIR_CONNECT_LIST_NODE_DEVICES_CAP_SCSI_HOST: "scsi_host",
    c.VIR_CONNECT_LIST_NODE_DEVICES_CAP_SCSI_TARGET: "scsi_target",
    c.VIR_CONNECT_LIST_NODE_DEVICES_CAP_SCSI: "scsi",
    c.VIR_CONNECT_LIST_NODE_DEVICES_CAP_STORAGE: "storage",
    c.VIR_CONNECT_LIST_NODE_DEVICES_CAP_FC_HOST: "fc_host",
    c.VIR_CONNECT_LIST_NODE_DEVICES_CAP_VPORTS: "vports",
    c.VIR_CONNECT_LIST_NODE_DEVICES_CAP_SCSI_GENERIC: "scsi_generic",
    c.VIR_CONNECT_LIST_NODE_DEVICES_CAP_DRM: "drm",
    c.VIR_CONNECT_LIST_NODE_DEVICES_CAP_MDEV_TYPES: "mdev_types",
    c.VIR_CONNECT_LIST_NODE_DEVICES_CAP_MDEV: "mdev",
    c.VIR_CONNECT_LIST_NODE_DEVICES_CAP_CCW_DEV: "ccw",
    c.VIR_CONNECT_LIST_NODE_DEVICES_CAP_CSS_DEV: "css",
    c.VIR_CONNECT_LIST_NODE_DEVICES_CAP_VDPA: "vdpa",
    c.VIR_CONNECT_LIST_NODE_DEVICES_CAP_AP_CARD: "ap_card",
    c.VIR_CONNECT_LIST_NODE_DEVICES_CAP_AP_QUEUE: "ap_queue",
    c.VIR_CONNECT_LIST_NODE_DEVICES_CAP_AP_MATRIX: "ap_matrix",
    c.VIR_CONNECT_LIST_NODE_DEVICES_CAP_VPD: "vpd",
}
#: The capability names ``listDevices(cap)`` knows (libvirt's
#: ``virNodeDevCapType`` strings); any other selects nothing.
CAPABILITY_NAMES = frozenset(CAPABILITY_FLAGS.values())
#: Every flag ``listAllDevices`` accepts (libvirt's ``..._FILTERS_ALL``).
LIST_ALL_FLAGS = (functools.reduce(int.__or__, CAPABILITY_FLAGS)
                  | c.VIR_CONNECT_LIST_NODE_DEVICES_ACTIVE
                  | c.VIR_CONNECT_LIST_NODE_DEVICES_INACTIVE)
#: Capabilities nested in another that libvirt's node device driver still
#: lists and selects as the device's own (``scsi_host`` holding
#: ``fc_host``, ``pci`` holding ``mdev_types``...), by their XML type.
_NESTED_LISTED = {"fc_host": "fc_host", "vport_ops": "vports",
                  "mdev_types": "mdev_types", "vpd": "vpd"}


@functools.lru_cache(maxsize=4096)
def capabilities_of(xml: str) -> tuple[str, ...]:
    """``listCaps()`` of a device document: the top-level capability
    types, then the nested ones libvirt's node device driver also lists
    (``fc_host``, ``vports``, ``mdev_types``, ``vpd``; ``test:///default``
    lists only the top-level ones)."""
    root = etree.fromstring(xml.encode())
    top = [e.get("type") for e in root.findall("capability")]
    nested = [e.get("type") for e in root.iterfind("capability//capability")]
    return tuple([t for t in top if t] + [
        _NESTED_LISTED[t] for t in dict.fromkeys(nested)
        if t in _NESTED_LISTED])


@functools.lru_cache(maxsize=4096)
def parent_of(xml: str) -> str | None:
    """The ``<parent>`` a device document names, if any."""
    return etree.fromstring(xml.encode()).findtext("parent")


def _device_call(function: str, flags_allowed: int | None = None):
    """Guard a device method as libvirt's C call ``function``: the
    connection's state and fault plan, then the flags it accepts."""

    def decorate(method):
        @functools.wraps(method)
        def guarded(self: virNodeDevice, *args: Any, **kwargs: Any) -> Any:
            key = f"nodeDevice.{method.__name__}"
            self._conn._guard(key, function, VIR_FROM_NODEDEV)
            self._conn._guard(f"{key}:{self._name}", function,
                              VIR_FROM_NODEDEV)
            if flags_allowed is not None:
                flags = args[0] if args else kwargs.get("flags", 0)
                check_flags(flags, flags_allowed,
                            "node" + function.removeprefix("virNode"))
            return method(self, *args, **kwargs)

        return guarded

    return decorate


class virNodeDevice(NodeDeviceHostdev, Unsupported):  # noqa: N801
    """A handle on one node device of the connection's host (assigning
    it to guests: :class:`.hostdev.NodeDeviceHostdev`)."""

    LIBVIRT_CLASS = "virNodeDevice"

    def __init__(self, conn: virConnect, name: str) -> None:
        self._conn = conn
        self._name = name

    @property
    def _table(self):
        return table_for(self._conn.host)

    def connect(self) -> virConnect:
        return self._conn

    def name(self) -> str:
        return self._name

    @_device_call("virNodeDeviceGetXMLDesc", 0)
    def XMLDesc(self, flags: int = 0) -> str:  # noqa: N802
        """The device's document now."""
        return self._table.require(self._name).xml

    @_device_call("virNodeDeviceGetParent")
    def parent(self) -> str | None:
        """The ``<parent>`` name; ``None`` for the root (``computer``)
        and for a device gone, as libvirt-python returns for both."""
        state = self._table.get(self._name)
        return None if state is None else parent_of(state.xml)

    @_device_call("virNodeDeviceListCaps")
    def listCaps(self) -> list[str]:  # noqa: N802
        """The capability types (see :func:`capabilities_of`)."""
        return list(capabilities_of(self._table.require(self._name).xml))

    @_device_call("virNodeDeviceNumOfCaps")
    def numOfCaps(self) -> int:  # noqa: N802
        return len(capabilities_of(self._table.require(self._name).xml))

    @_device_call("virNodeDeviceIsActive")
    def isActive(self) -> int:  # noqa: N802
        """1 for a device present (every device but a defined, stopped
        mdev), else 0."""
        return int(self._table.require(self._name).active)

    @_device_call("virNodeDeviceIsPersistent")
    def isPersistent(self) -> int:  # noqa: N802
        """1 for ``computer`` and defined mdevs, 0 for the rest (what
        udev finds is not persistent in libvirt's words)."""
        return int(self._table.require(self._name).persistent)

    @_device_call("virNodeDeviceGetAutostart")
    def autostart(self) -> int:
        """1 when started at boot: ``computer`` and defined mdevs set so."""
        return int(self._table.require(self._name).autostart)

    @_device_call("virNodeDeviceSetAutostart")
    def setAutostart(self, autostart: int) -> int:  # noqa: N802
        """Start a defined mdev at boot or not; 0.  Other devices:
        ``VIR_ERR_OPERATION_UNSUPPORTED``; a transient mdev:
        ``VIR_ERR_OPERATION_INVALID``."""
        self._table.set_autostart(self._name, bool(autostart))
        return 0

    @_device_call("virNodeDeviceCreate", 0)
    def create(self, flags: int = 0) -> int:
        """Start a defined mdev (``Device is already active`` when it
        is, ``Unsupported device type`` for another device); 0."""
        self._table.start(self._name)
        return 0

    @_device_call("virNodeDeviceDestroy")
    def destroy(self) -> int:
        """Stop an mdev (a transient one is gone); 0."""
        self._table.stop(self._name)
        return 0

    @_device_call("virNodeDeviceUndefine", 0)
    def undefine(self, flags: int = 0) -> int:
        """Forget a defined mdev's definition; 0."""
        self._table.undefine(self._name)
        return 0

    def __eq__(self, other: Any) -> bool:
        return (isinstance(other, virNodeDevice)
                and other._conn is self._conn and other._name == self._name)

    def __hash__(self) -> int:
        return hash(self._name)

    def __repr__(self) -> str:
        return f"<virNodeDevice {self._name}>"


def matches_flags(device: virNodeDevice, flags: int) -> bool:
    """Whether ``device`` passes ``listAllDevices(flags)``, as libvirt
    filters: ``..._ACTIVE``/``..._INACTIVE`` keep the devices in either
    state named (none named: both); the capability flags keep a device
    with one of the capabilities named (none named: every device)."""
    state = device._table.get(device.name())
    if state is None:
        return False
    active = c.VIR_CONNECT_LIST_NODE_DEVICES_ACTIVE
    inactive = c.VIR_CONNECT_LIST_NODE_DEVICES_INACTIVE
    if flags & (active | inactive) and not (
            (flags & active and state.active)
            or (flags & inactive and not state.active)):
        return False
    wanted = {cap for flag, cap in CAPABILITY_FLAGS.items() if flags & flag}
    return not wanted or bool(wanted & set(capabilities_of(state.xml)))


def has_capability(xml: str, cap: str | None) -> bool:
    """Whether a device is listed by ``listDevices(cap)``."""
    return cap is None or cap in capabilities_of(xml)
