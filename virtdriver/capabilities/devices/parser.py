"""Read libvirt node-device XML (``virNodeDeviceGetXMLDesc``) into the model.

One ``<device>`` document at a time (:func:`parse_node_device`), a
listing of them (:func:`parse_node_devices`), or several documents written
one after another (:func:`parse_node_device_stream`, as mdevctl's listing
in libvirt's tests).  Documents are parsed by :mod:`..xmlsafe` (no DTD,
no entities, a size limit) and every value the model keeps is checked;
anything that does not fit is refused with :class:`CapabilityXMLError`
naming the document, the element and its line.  What libvirt itself
refuses, we refuse (a CCW/CSS device number past ``0xffff``); what
libvirt accepts but cannot be a PCI function (``<bus>4294967295</bus>``
in its own test data) is read, and left out of :class:`HostDevices`
with a reason (:attr:`HostDevices.ignored`).

Only what the device model needs is read: PCI functions, mdev parents
(PCI, AP matrix, CSS) and mdevs.  Other devices (net, storage, USB, the
``computer`` root...) are checked for being well-formed ``<device>``
documents and otherwise ignored.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from lxml import etree

from virtdriver.capabilities.devices.model import (
    MAX_DOMAIN, HostDevices, Mdev, MdevParent, MdevType, PCIAddress,
    PCIDevice, check_pci_address)
from virtdriver.capabilities.errors import CapabilityXMLError
from virtdriver.capabilities.xmlsafe import (
    DEFAULT_MAX_BYTES, MAX_DIGITS, ValueReader, parse_document)
from virtdriver.frozen import frozen_builder

#: Upper bound on one ``<device>`` document, in bytes.  libvirt's largest
#: (a PF listing 256 VFs, a VPD block) are a few tens of KiB.
MAX_DEVICE_BYTES = 1024 * 1024

_PCIDevice = frozen_builder(PCIDevice)
_MdevType = frozen_builder(MdevType)
_Mdev = frozen_builder(Mdev)
_MdevParent = frozen_builder(MdevParent)
_Address = frozen_builder(PCIAddress)

_UUID = re.compile(r"[0-9a-f]{8}(?:[-_][0-9a-f]{4}){3}[-_][0-9a-f]{12}")
#: s390 device numbers are 16-bit (libvirt: virCCWDeviceAddressIsValid).
_MAX_CSSID, _MAX_SSID, _MAX_DEVNO = 0xFE, 0x3, 0xFFFF
#: Non-PCI devices that can parent mdevs, by their capability type.
_OTHER_PARENTS = ("ap_matrix", "css")

NodeDevice = PCIDevice | MdevParent | Mdev | None


def parse_node_device(xml: str | bytes, source: str = "<string>", *,
                      max_bytes: int = MAX_DEVICE_BYTES) -> NodeDevice:
    """Read one ``<device>`` document.

    Returns:
        the :class:`PCIDevice`, :class:`MdevParent` (an AP matrix or CSS
        device offering mdev types) or :class:`Mdev` it describes, or
        ``None`` for a device the model does not hold (net, storage, ...).

    Raises:
        CapabilityXMLError: malformed, hostile or oversized XML, not a
            ``<device>``, or a value that does not fit its element.
    """
    root = parse_document(xml, source=source, root_tag="device",
                          max_bytes=max_bytes)
    return _DeviceReader(source).read(root)


def parse_node_device_stream(xml: str | bytes, source: str = "<string>", *,
                             max_bytes: int = DEFAULT_MAX_BYTES
                             ) -> list[NodeDevice]:
    """Read ``<device>`` documents written one after the other.

    Raises:
        CapabilityXMLError: as :func:`parse_node_device`; also when the
            text holds something other than ``<device>`` elements.
    """
    data = xml.encode("utf-8") if isinstance(xml, str) else bytes(xml)
    if data.lstrip().startswith(b"<?xml"):
        raise CapabilityXMLError(
            source, "a stream of <device> documents cannot start with an "
            "XML declaration", line=1,
            hint="pass the documents as libvirt writes them, or one by one")
    root = parse_document(b"<devices>" + data + b"</devices>", source=source,
                          root_tag="devices", max_bytes=max_bytes + 19)
    reader = _DeviceReader(source)
    found = []
    for el in root:
        if el.tag != "device":
            raise CapabilityXMLError(
                source, f"<{el.tag}> where a <device> document was expected",
                line=el.sourceline, hint="pass only node-device XML")
        found.append(reader.read(el))
    if not found:
        raise CapabilityXMLError(source, "no <device> document found")
    return found


def parse_node_devices(documents: Iterable[tuple[str, str | bytes]], *,
                       source: str = "", vanished: Iterable[str] = (),
                       max_bytes: int = MAX_DEVICE_BYTES) -> HostDevices:
    """Read a whole listing: ``(source, xml)`` per device, into one reading.

    ``source`` names the listing (a URI); ``vanished`` names devices
    listed but gone before their XML was read.

    Raises:
        CapabilityXMLError: a document does not parse (see
            :func:`parse_node_device`), or two documents describe the same
            PCI address or the same device name.
    """
    return collect_node_devices(
        ((doc_source, parse_node_device(xml, doc_source,
                                        max_bytes=max_bytes))
         for doc_source, xml in documents),
        source=source, vanished=vanished)


def collect_node_devices(devices: Iterable[tuple[str, NodeDevice]], *,
                         source: str = "", vanished: Iterable[str] = ()
                         ) -> HostDevices:
    """One reading of parsed devices, each with the source it came from.

    Raises:
        CapabilityXMLError: two devices have the same name or PCI address.
    """
    pci: list[PCIDevice] = []
    others: list[MdevParent] = []
    mdevs: list[Mdev] = []
    ignored: list[tuple[str, str]] = []
    names: dict[str, str] = {}
    addresses: dict[PCIAddress, str] = {}
    for doc_source, device in devices:
        if device is None:
            continue
        name = device.name
        if name in names:
            raise _duplicate(doc_source, f"device name {name!r}", names[name])
        names[name] = doc_source
        if type(device) is PCIDevice:
            at = device.address
            if at.bus > 0xFF or at.slot > 0x1F or at.function > 0x7:
                ignored.append((name, _address_problem(at)))
                continue
            first = addresses.get(device.address)
            if first is not None:
                raise _duplicate(doc_source, f"PCI address {device.address}",
                                 first)
            addresses[device.address] = doc_source
            pci.append(device)
        elif type(device) is Mdev:
            mdevs.append(device)
        else:
            others.append(device)
    return HostDevices.build(pci, others, mdevs, source=source,
                             vanished=vanished, ignored=ignored)


def _duplicate(source: str, what: str, first: str) -> CapabilityXMLError:
    return CapabilityXMLError(
        source, f"{what} is described twice (first by {first})",
        hint="a listing names each device once; read the host again")


def _address_problem(address: PCIAddress) -> str:
    try:
        check_pci_address(address.domain, address.bus, address.slot,
                          address.function)
    except ValueError as exc:
        return f"not a usable PCI function: {exc}"
    return "not a usable PCI function"


def _text(el: etree._Element | None) -> str | None:
    if el is None or not el.text:
        return None
    return el.text.strip() or None


class _DeviceReader(ValueReader):
    __slots__ = ()

    def read(self, root: etree._Element) -> NodeDevice:
        name = parent = driver = None
        caps = []
        for el in root:
            tag = el.tag
            if tag == "capability":
                caps.append(el)
            elif tag == "name":
                name = _text(el)
            elif tag == "parent":
                parent = _text(el)
            elif tag == "driver":
                driver = _text(el.find("name"))
        if not name:
            raise CapabilityXMLError(
                self.source, "<device> has no <name>", line=root.sourceline,
                hint="every node device has a name; re-read it from libvirt")
        for cap in caps:
            kind = cap.get("type")
            if kind == "pci":
                return self._pci(cap, name, parent, driver)
            if kind == "mdev":
                return self._mdev(cap, name, parent)
            if kind in _OTHER_PARENTS:
                return self._other_parent(cap, kind, name, parent)
            if kind == "ccw":
                self._css_address(cap)  # refused as libvirt refuses it
            elif kind is None:
                raise self.error(cap, "required attribute type is missing")
        return None

    # -- PCI -------------------------------------------------------------

    def _pci(self, cap: etree._Element, name: str, parent: str | None,
             driver: str | None) -> PCIDevice:
        parts: dict[str, int] = {}
        vendor = product = vendor_name = product_name = None
        class_code = numa = group = pf = max_vfs = serial = None
        vfs: tuple[PCIAddress, ...] = ()
        types: tuple[MdevType, ...] = ()
        for el in cap:
            tag = el.tag
            if tag in _ADDRESS_PARTS:
                if tag in parts:
                    raise self.error(el, "given twice")
                text = el.text or ""
                parts[tag] = (int(text) if text.isdigit() and text.isascii()
                              and len(text) <= 10
                              and int(text) <= MAX_DOMAIN
                              else self._uint(el, text, "text", MAX_DOMAIN))
            elif tag == "vendor" or tag == "product":
                # "0x10de" is libvirt's spelling: its digits are the id
                match = _HEX4.fullmatch(el.get("id") or "")
                found = match.group(1) if match else self._id(el)
                text = el.text
                label = text.strip() or None if text else None
                if tag == "vendor":
                    vendor, vendor_name = found, label
                else:
                    product, product_name = found, label
            elif tag == "class":
                text = el.text or ""
                class_code = (int(text, 16) if _HEX6.fullmatch(text)
                              else self._uint(el, text, "text", 0xFFFFFF,
                                              base=16))
            elif tag == "numa":
                value = el.get("node") or ""
                numa = (int(value) if value.isdigit() and value.isascii()
                        and len(value) <= 5 and int(value) <= 0xFFFF
                        else self._numa(el))
            elif tag == "iommuGroup":
                value = el.get("number") or ""
                group = (int(value) if value.isdigit() and value.isascii()
                         and len(value) <= MAX_DIGITS
                         else self.required_int(el, "number"))
            elif tag == "capability":
                kind = el.get("type")
                if kind == "phys_function":
                    found = self._addresses(el)
                    if len(found) != 1:
                        raise self.error(el, "phys_function names "
                                         f"{len(found)} addresses, not one")
                    pf = found[0]
                elif kind == "virt_functions":
                    vfs = tuple(self._addresses(el))
                    max_vfs = self.int_attr(el, "maxCount")
                    if max_vfs is None:
                        max_vfs = len(vfs)
                elif kind == "mdev_types":
                    types = self._mdev_types(el)
                elif kind == "vpd":
                    serial = self._vpd_serial(el)
        if len(parts) != 4:
            missing = [tag for tag in _ADDRESS_PARTS if tag not in parts]
            raise self.error(cap, f"PCI address has no <{missing[0]}>")
        if vendor is None or product is None:
            raise self.error(cap, "PCI device has no <vendor id> or "
                                  "<product id>")
        address = _Address(parts["domain"], parts["bus"], parts["slot"],
                           parts["function"])
        return _PCIDevice(name, address, vendor, product, class_code, numa,
                          group, pf, vfs, max_vfs, types, serial,
                          vendor_name, product_name, driver, parent,
                          self.source)

    def _id(self, el: etree._Element) -> str:
        value = el.get("id")
        if value is None:
            raise self.error(el, "required attribute id is missing")
        return f"{self._uint(el, value, 'attribute id', 0xFFFF, base=16):04x}"

    def _numa(self, el: etree._Element) -> int | None:
        value = el.get("node")
        if value is None or value.strip() == "-1":  # libvirt: no NUMA node
            return None
        return self._uint(el, value, "attribute node", 0xFFFF)

    def _addresses(self, el: etree._Element) -> list[PCIAddress]:
        found = []
        for address in el.iterchildren("address"):
            # libvirt's own spelling, all four at once; else one by one
            match = _HEX_ADDRESS.fullmatch(" ".join(address.values()))
            if match is not None and address.keys() == _ADDRESS_PARTS_L:
                parts = [int(part, 16) for part in match.groups()]
                if parts[2] <= 0x1F:
                    found.append(_Address(*parts))
                    continue
            values = []
            for part, limit in (("domain", MAX_DOMAIN), ("bus", 0xFF),
                                ("slot", 0x1F), ("function", 0x7)):
                value = address.get(part)
                if value is None:
                    raise self.error(address,
                                     f"required attribute {part} is missing")
                values.append(self._uint(address, value, f"attribute {part}",
                                         limit, base=0))
            found.append(_Address(*values))
        return found

    def _vpd_serial(self, el: etree._Element) -> str | None:
        for fields in el.iterchildren("fields"):
            if fields.get("access") == "readonly":
                return _text(fields.find("serial_number"))
        return None

    # -- mdev types and mdevs -------------------------------------------

    def _mdev_types(self, el: etree._Element) -> tuple[MdevType, ...]:
        found = []
        seen = set()
        for type_el in el.iterchildren("type"):
            type_id = type_el.get("id", "").strip()
            if not type_id:
                raise self.error(type_el, "required attribute id is missing")
            if type_id in seen:
                raise self.error(type_el, f"mdev type {type_id!r} is listed "
                                          "twice")
            seen.add(type_id)
            available = None
            available_el = type_el.find("availableInstances")
            if available_el is not None:
                available = self.int_text(available_el)
            found.append(_MdevType(type_id, _text(type_el.find("name")),
                                   _text(type_el.find("deviceAPI")),
                                   available))
        return tuple(found)

    def _mdev(self, cap: etree._Element, name: str,
              parent: str | None) -> Mdev:
        type_el = cap.find("type")
        type_id = type_el.get("id", "").strip() if type_el is not None else ""
        if not type_id:
            raise self.error(cap, "mdev has no <type id>")
        uuid = _text(cap.find("uuid"))
        if uuid is not None:
            if _UUID.fullmatch(uuid.lower()) is None or "_" in uuid:
                raise self.error(cap.find("uuid"),
                                 f"{uuid[:40]!r} is not a UUID")
            uuid = uuid.lower()
        else:  # older libvirt: only the name holds it
            match = _UUID.match(name.lower(), 5) if name.startswith(
                "mdev_") else None
            uuid = match.group().replace("_", "-") if match else None
        group_el = cap.find("iommuGroup")
        group = (self.required_int(group_el, "number")
                 if group_el is not None else None)
        return _Mdev(uuid, type_id, parent, name, group)

    # -- s390 ------------------------------------------------------------

    def _other_parent(self, cap: etree._Element, kind: str, name: str,
                      parent: str | None) -> MdevParent | None:
        address = self._css_address(cap) if kind == "css" else None
        types_el = next((el for el in cap.iterchildren("capability")
                         if el.get("type") == "mdev_types"), None)
        if types_el is None:
            return None  # not an mdev parent (vfio_ccw/vfio_ap not bound)
        return _MdevParent(name, kind, self._mdev_types(types_el), address,
                           parent, self.source)

    def _css_address(self, cap: etree._Element) -> str:
        values = []
        for part, limit in (("cssid", _MAX_CSSID), ("ssid", _MAX_SSID),
                            ("devno", _MAX_DEVNO)):
            el = cap.find(part)
            if el is None:
                raise self.error(cap, f"{cap.get('type')} device has no "
                                      f"<{part}>")
            values.append(self._uint(el, el.text or "", "text", limit,
                                     base=16))
        channel = cap.find("channel_dev_addr")
        if channel is not None:
            self._css_address(channel)
        return f"{values[0]:x}.{values[1]:x}.{values[2]:04x}"

    # -- integers --------------------------------------------------------

    def _uint(self, el: etree._Element, value: str, what: str, limit: int,
              *, base: int = 10) -> int:
        """``value`` as libvirt reads it, at most ``limit``.

        ``base`` 10: decimal digits; 16: hex digits, ``0x`` optional; 0:
        hex with ``0x``, else decimal (libvirt would read a leading zero
        as octal, which it never writes: refused as ambiguous).
        """
        # Fast paths: what libvirt writes ("131", "0x10de"), checked in C.
        if value.isdigit():
            if (value.isascii() and len(value) <= MAX_DIGITS
                    and (base != 0 or value[0] != "0" or len(value) == 1)):
                number = int(value, 16 if base == 16 else 10)
                if number <= limit:
                    return number
        elif base != 10 and value[:2] == "0x":
            digits = value[2:]
            if (digits.isalnum() and digits.isascii()
                    and len(digits) <= MAX_DIGITS):
                try:
                    number = int(digits, 16)
                except ValueError:
                    number = limit + 1  # not hex: the checks below say so
                if number <= limit:
                    return number
        text = value.strip()
        digits, radix = text, base
        if base != 10 and text[:2] in ("0x", "0X"):
            digits, radix = text[2:], 16
        elif base == 0:
            radix = 10
        number = None
        if (digits.isascii() and digits.isalnum()
                and 0 < len(digits) <= MAX_DIGITS
                and not (base == 0 and radix == 10 and len(digits) > 1
                         and digits[0] == "0")):
            try:
                number = int(digits, radix)
            except ValueError:
                pass
        if number is None:
            kind = "hexadecimal " if radix == 16 else ""
            raise self.error(el, f"{what} {_clip(value)} is not a {kind}"
                                 "non-negative integer")
        if number > limit:
            raise self.error(el, f"{what} {_clip(value)} is out of range "
                                 f"(at most {limit:#x})")
        return number


_ADDRESS_PARTS = ("domain", "bus", "slot", "function")
_ADDRESS_PARTS_L = list(_ADDRESS_PARTS)
_HEX4 = re.compile(r"0x([0-9a-f]{4})")
_HEX6 = re.compile(r"0x[0-9a-f]{6}")
#: ``<address domain='0x0000' bus='0x82' slot='0x10' function='0x4'/>``
_HEX_ADDRESS = re.compile(
    r"0x([0-9a-f]{1,8}) 0x([0-9a-f]{1,2}) 0x([0-9a-f]{1,2}) 0x([0-7])")


def _clip(value: str, limit: int = 40) -> str:
    if len(value) <= limit:
        return repr(value)
    return repr(value[:limit]) + f"… ({len(value)} characters)"
