"""Node devices (``virNodeDevice``) served from their ``XMLDesc`` XML."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from virtdriver.capabilities.xmlsafe import parse_document
from virtdriver.fakelibvirt import constants as c
from virtdriver.fakelibvirt.api_table import Unsupported
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
#: Capabilities nested in another that libvirt's node device driver still
#: lists and selects as the device's own (``scsi_host`` holding
#: ``fc_host``, ``pci`` holding ``mdev_types``...), by their XML type.
_NESTED_LISTED = {"fc_host": "fc_host", "vport_ops": "vports",
                  "mdev_types": "mdev_types", "vpd": "vpd"}


class virNodeDevice(NodeDeviceHostdev, Unsupported):  # noqa: N801
    """One node device, answering from its XML (assignment calls:
    :class:`.hostdev.NodeDeviceHostdev`)."""

    LIBVIRT_CLASS = "virNodeDevice"

    def __init__(self, conn: virConnect, name: str, xml: str) -> None:
        self._conn = conn
        self._name = name
        self._xml = xml
        root = parse_document(xml, source=f"node device {name}",
                              root_tag="device")
        self._parent = root.findtext("parent")
        top = [e.get("type") for e in root.findall("capability")]
        nested = [e.get("type") for e in root.iterfind("capability//capability")]
        self._caps = [t for t in top if t] + [
            _NESTED_LISTED[t] for t in dict.fromkeys(nested)
            if t in _NESTED_LISTED]

    def connect(self) -> virConnect:
        return self._conn

    def name(self) -> str:
        return self._name

    def XMLDesc(self, flags: int = 0) -> str:  # noqa: N802
        return self._xml

    def parent(self) -> str | None:
        """The ``<parent>`` name (``None`` for the root, ``computer``)."""
        return self._parent

    def listCaps(self) -> list[str]:  # noqa: N802
        """Capability types: the top-level ones, then the nested ones
        libvirt's node device driver also lists (``fc_host``, ``vports``,
        ``mdev_types``, ``vpd``; ``test:///default`` lists only the
        top-level ones)."""
        return list(self._caps)

    def numOfCaps(self) -> int:  # noqa: N802
        return len(self._caps)

    def __eq__(self, other: Any) -> bool:
        return (isinstance(other, virNodeDevice)
                and other._conn is self._conn and other._name == self._name)

    def __hash__(self) -> int:
        return hash(self._name)


def matches_flags(device: virNodeDevice, flags: int) -> bool:
    """Whether ``device`` passes ``listAllDevices(flags)``.

    No capability flag keeps every device; otherwise one of the device's
    capabilities must be named.  Every served device is active, so
    ``..._INACTIVE`` without ``..._ACTIVE`` keeps none.
    """
    active = c.VIR_CONNECT_LIST_NODE_DEVICES_ACTIVE
    inactive = c.VIR_CONNECT_LIST_NODE_DEVICES_INACTIVE
    if flags & inactive and not flags & active:
        return False
    wanted = {cap for flag, cap in CAPABILITY_FLAGS.items() if flags & flag}
    return not wanted or bool(wanted & set(device.listCaps()))
