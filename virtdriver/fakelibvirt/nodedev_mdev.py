"""Mediated devices as libvirt's node device driver makes them: the
request document, the parent's address, the name, the served document and
the parent's ``availableInstances``.

Pure functions over XML; the lifecycle (who may start what, events) is in
:mod:`.nodedev_state`.  libvirt names an mdev ``mdev_<uuid>_<parent
address>`` with every character that is not a letter or digit made
``_`` (``nodeDeviceGenerateName``, libvirt >= 7.3), so one UUID can live
under two parents: ``mdev_3627463d_b7f0_4fea_b468_f1da537d301b_0000_00_02_0``
for a PCI parent, ``..._0_0_0052`` for a CSS one, ``..._matrix`` for the
AP matrix.
"""

from __future__ import annotations

import re
import uuid as uuid_module
from dataclasses import dataclass

from lxml import etree

from virtdriver.capabilities.errors import CapabilityXMLError
from virtdriver.capabilities.xmlsafe import parse_document
from virtdriver.fakelibvirt import nodedev_errors as errors
from virtdriver.fakelibvirt._builder_xml import sub, to_xml

_NOT_ALNUM = re.compile(r"[^A-Za-z0-9]")
_UUID = re.compile(r"^[0-9a-fA-F]{8}(-?[0-9a-fA-F]{4}){3}-?[0-9a-fA-F]{12}$")


@dataclass(frozen=True)
class MdevRequest:
    """What ``nodeDeviceCreateXML``/``DefineXML`` asked for."""

    parent: str
    type_id: str
    uuid: str | None
    attrs: tuple[tuple[str, str], ...] = ()


def mdev_name(uuid: str, parent_address: str) -> str:
    """libvirt's name for the mdev ``uuid`` on the parent at
    ``parent_address`` (``0000:00:02.0``, ``0.0.0052``, ``matrix``)."""
    return _NOT_ALNUM.sub("_", f"mdev_{uuid}_{parent_address}")


def parse_request(xml: str) -> MdevRequest:
    """Read an mdev device document as libvirt's create/define does.

    Raises:
        libvirtError: malformed XML (``VIR_ERR_XML_DETAIL``), no
            ``<parent>`` (``VIR_ERR_CONFIG_UNSUPPORTED`` "missing parent
            device"), a device that is not an mdev ("Unsupported device
            type"), a bad ``<uuid>`` or no ``<type id>``.
    """
    try:
        root = parse_document(xml, source="node device definition",
                              root_tag="device")
    except CapabilityXMLError as exc:
        raise errors.xml_detail(exc.line or 1, exc.reason) from None
    cap = root.find("capability[@type='mdev']")
    if cap is None:
        raise errors.config_unsupported("Unsupported device type")
    parent = (root.findtext("parent") or "").strip()
    if not parent:
        raise errors.config_unsupported("missing parent device")
    type_id = (cap.find("type").get("id") if cap.find("type") is not None
               else None)
    if not type_id:
        raise errors.internal("missing type id attribute for 'new device'")
    uuid = (cap.findtext("uuid") or "").strip() or None
    if uuid is not None:
        if not _UUID.match(uuid):
            raise errors.internal(f"malformed uuid element for "
                                  f"'new device': {uuid}")
        uuid = str(uuid_module.UUID(uuid))
    attrs = tuple((a.get("name", ""), a.get("value", ""))
                  for a in cap.findall("attr"))
    return MdevRequest(parent, type_id, uuid, attrs)


def parent_address(parent_xml: str) -> str | None:
    """The address libvirt hands mdevctl for a parent device: its PCI
    address, CSS bus id, ``matrix`` for the AP matrix; ``None`` for a
    device of another kind."""
    root = etree.fromstring(parent_xml.encode())
    for cap in root.findall("capability"):
        kind = cap.get("type")
        if kind == "pci":
            parts = [_int(cap.findtext(t)) for t in
                     ("domain", "bus", "slot", "function")]
            return "{:04x}:{:02x}:{:02x}.{:x}".format(*parts)
        if kind == "css":
            parts = [_int(cap.findtext(t)) for t in ("cssid", "ssid", "devno")]
            return "{:x}.{:x}.{:04x}".format(*parts)
        if kind == "ap_matrix":
            return "matrix"
    return None


def mdev_document(name: str, request: MdevRequest, uuid: str,
                  parent_addr: str, *, active: bool, iommu_group: int = 0,
                  parent_path: str | None = None) -> str:
    """The mdev's ``XMLDesc()``: an active one has a sysfs path (under
    its parent's), the ``vfio_mdev`` driver and its IOMMU group; a
    defined-only one none of them but group 0, as libvirt writes it."""
    root = etree.Element("device")
    sub(root, "name", name)
    if active:
        sub(root, "path", f"{parent_path}/{uuid}" if parent_path
            else f"/sys/bus/mdev/devices/{uuid}")
    sub(root, "parent", request.parent)
    if active:
        sub(sub(root, "driver"), "name", "vfio_mdev")
    cap = sub(root, "capability", type="mdev")
    sub(cap, "type", id=request.type_id)
    sub(cap, "uuid", uuid)
    sub(cap, "parent_addr", parent_addr)
    sub(cap, "iommuGroup", number=iommu_group if active else 0)
    for attr_name, value in request.attrs:
        sub(cap, "attr", name=attr_name, value=value)
    return to_xml(root)


def available_instances(parent_xml: str, type_id: str) -> int | None:
    """The parent's ``availableInstances`` of ``type_id``; ``None`` when it
    offers no such type."""
    type_el = _type_element(etree.fromstring(parent_xml.encode()), type_id)
    if type_el is None:
        return None
    return _int(type_el.findtext("availableInstances"))


def has_mdev_types(parent_xml: str) -> bool:
    """Whether the device offers mediated device types at all."""
    root = etree.fromstring(parent_xml.encode())
    return root.find(".//capability[@type='mdev_types']") is not None


def with_available_instances(parent_xml: str, type_id: str,
                             delta: int) -> str:
    """``parent_xml`` with ``availableInstances`` of ``type_id`` moved by
    ``delta`` (the kernel's count after an mdev is made or removed)."""
    root = etree.fromstring(parent_xml.encode())
    type_el = _type_element(root, type_id)
    if type_el is None:
        return parent_xml
    count = type_el.find("availableInstances")
    count.text = str(max(_int(count.text) + delta, 0))
    return etree.tostring(root, encoding="unicode") + "\n"


def mdev_facts(xml: str) -> tuple[str | None, str | None]:
    """``(type id, uuid)`` of an mdev device document."""
    root = etree.fromstring(xml.encode())
    cap = root.find("capability[@type='mdev']")
    if cap is None:
        return None, None
    type_el = cap.find("type")
    return (type_el.get("id") if type_el is not None else None,
            (cap.findtext("uuid") or "").strip() or None)


def _type_element(root: etree._Element, type_id: str):
    for type_el in root.iterfind(".//capability[@type='mdev_types']/type"):
        if type_el.get("id") == type_id:
            return type_el
    return None


def _int(text: str | None) -> int:
    text = (text or "0").strip()
    return int(text, 16) if text.lower().startswith("0x") else int(text)
