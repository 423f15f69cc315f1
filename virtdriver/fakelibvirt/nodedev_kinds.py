"""Build node devices other than PCI: vDPA, and the s390 mdev parents
(a CSS subchannel, the AP matrix) with their AP cards and queues.

Shapes as libvirt 9.0 formats them (and its ``nodedev.rng`` accepts):
``vdpa_<name>`` with its ``<chardev>``; ``css_<cssid>_<ssid>_<devno>``
with hex ``0x`` ids; ``ap_matrix``; ``ap_card<NN>``; ``ap_<NN>_<DDDD>``.
"""

from __future__ import annotations

from collections.abc import Sequence

from lxml import etree

from virtdriver.fakelibvirt._builder_xml import sub, to_xml
from virtdriver.fakelibvirt.nodedev_builder import (
    MdevType, NodeDevice, mdev_types_element)


def vdpa_device(name: str = "vdpa0", *, parent: str = "computer",
                chardev: str | None = None,
                driver: str = "vhost_vdpa") -> NodeDevice:
    """A vDPA device (``<capability type='vdpa'>``), e.g. on a VF.

    ``chardev`` defaults to ``/dev/vhost-<name>`` (``/dev/vhost-vdpa-0``
    for ``vdpa0``, as the kernel numbers them).
    """
    number = name.removeprefix("vdpa")
    root = etree.Element("device")
    sub(root, "name", f"vdpa_{name}")
    sub(root, "path", f"/sys/devices/{name}")
    sub(root, "parent", parent)
    sub(sub(root, "driver"), "name", driver)
    cap = sub(root, "capability", type="vdpa")
    sub(cap, "chardev", chardev or f"/dev/vhost-vdpa-{number}")
    return NodeDevice(f"vdpa_{name}", to_xml(root), ("vdpa",), parent)


def css_device(cssid: int, ssid: int, devno: int, *,
               mdev_types: Sequence[MdevType] = (),
               channel_devno: int | None = None,
               driver: str | None = None) -> NodeDevice:
    """A channel subsystem subchannel (``<capability type='css'>``); with
    ``mdev_types`` (``vfio_ccw-io``) it is an mdev parent at the bus id
    ``<cssid>.<ssid>.<devno>``; ``channel_devno`` adds the device it
    serves (``<channel_dev_addr>``)."""
    bus_id = f"{cssid:x}.{ssid:x}.{devno:04x}"
    name = f"css_{cssid:x}_{ssid:x}_{devno:04x}"
    root = etree.Element("device")
    sub(root, "name", name)
    sub(root, "path", f"/sys/devices/css{cssid:x}/{bus_id}")
    sub(root, "parent", "computer")
    if driver:
        sub(sub(root, "driver"), "name", driver)
    cap = sub(root, "capability", type="css")
    _ccw_address(cap, cssid, ssid, devno)
    if channel_devno is not None:
        _ccw_address(sub(cap, "channel_dev_addr"), cssid, ssid,
                     channel_devno)
    caps = ["css"]
    if mdev_types:
        mdev_types_element(cap, mdev_types)
        caps.append("mdev_types")
    return NodeDevice(name, to_xml(root), tuple(caps), "computer")


def ap_matrix_device(mdev_types: Sequence[MdevType] = (
        MdevType("vfio_ap-passthrough", "VFIO AP Passthrough Device",
                 65536, "vfio-ap"),)) -> NodeDevice:
    """The AP matrix (``ap_matrix``), the s390 crypto mdev parent; libvirt
    hands mdevctl the address ``matrix``."""
    root = etree.Element("device")
    sub(root, "name", "ap_matrix")
    sub(root, "path", "/sys/devices/vfio_ap/matrix")
    sub(root, "parent", "computer")
    cap = sub(root, "capability", type="ap_matrix")
    caps = ["ap_matrix"]
    if mdev_types:
        mdev_types_element(cap, mdev_types)
        caps.append("mdev_types")
    return NodeDevice("ap_matrix", to_xml(root), tuple(caps), "computer")


def ap_card_device(adapter: int) -> NodeDevice:
    """An AP card (``ap_card<NN>``, adapter number in hex)."""
    name = f"ap_card{adapter:02x}"
    root = etree.Element("device")
    sub(root, "name", name)
    sub(root, "path", f"/sys/devices/ap/card{adapter:02x}")
    sub(root, "parent", "computer")
    cap = sub(root, "capability", type="ap_card")
    sub(cap, "ap-adapter", f"0x{adapter:02x}")
    return NodeDevice(name, to_xml(root), ("ap_card",), "computer")


def ap_queue_device(adapter: int, domain: int) -> NodeDevice:
    """An AP queue (``ap_<NN>_<DDDD>``) of card ``adapter``."""
    name = f"ap_{adapter:02x}_{domain:04x}"
    card = f"ap_card{adapter:02x}"
    root = etree.Element("device")
    sub(root, "name", name)
    sub(root, "path", f"/sys/devices/ap/card{adapter:02x}/"
        f"{adapter:02x}.{domain:04x}")
    sub(root, "parent", card)
    cap = sub(root, "capability", type="ap_queue")
    sub(cap, "ap-adapter", f"0x{adapter:02x}")
    sub(cap, "ap-domain", f"0x{domain:04x}")
    return NodeDevice(name, to_xml(root), ("ap_queue",), card)


def _ccw_address(parent: etree._Element, cssid: int, ssid: int,
                 devno: int) -> None:
    sub(parent, "cssid", f"0x{cssid:x}")
    sub(parent, "ssid", f"0x{ssid:x}")
    sub(parent, "devno", f"0x{devno:04x}")
