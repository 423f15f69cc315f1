"""Domain XML in and out: what a guest's definition asks of the host, and
the XML ``XMLDesc`` gives back.

:func:`parse_domain` reads the parts fakelibvirt acts on — name, uuid,
memory, vCPUs, CPU pinning, the NUMA nodes memory is bound to, host
devices — and refuses XML libvirt refuses at define time, with libvirt's
codes and words.  The definition keeps the whole document, so
``XMLDesc`` returns what was defined with libvirt's fill-ins: ``<uuid>``,
``<currentMemory>``, memory in KiB, and ``id`` while running.
"""

from __future__ import annotations

import copy
import re
import uuid as uuid_module
from dataclasses import dataclass, field

from lxml import etree

from virtdriver.cpuset import parse_cpuset
from virtdriver.fakelibvirt.constants import (
    VIR_ERR_INTERNAL_ERROR, VIR_ERR_NO_NAME, VIR_ERR_XML_DETAIL,
    VIR_ERR_XML_ERROR, VIR_FROM_DOMAIN, VIR_FROM_XML)
from virtdriver.fakelibvirt.errors import libvirtError, make_error

#: Memory units libvirt accepts, in KiB (``virScaleInteger``).
_UNITS = {"b": 1 / 1024, "bytes": 1 / 1024, "k": 1, "kib": 1, "kb": 1000 / 1024,
          "m": 1024, "mib": 1024, "mb": 1000**2 / 1024, "g": 1024**2,
          "gib": 1024**2, "gb": 1000**3 / 1024, "t": 1024**3, "tib": 1024**3,
          "tb": 1000**4 / 1024}


@dataclass(frozen=True)
class Hostdev:
    """A ``<hostdev>``: ``kind`` ``pci`` (``key`` its address,
    ``DDDD:BB:SS.F``) or ``mdev`` (``key`` its uuid)."""

    kind: str
    key: str
    managed: bool = field(compare=False)
    xml: str = field(compare=False)


@dataclass
class DomainDef:
    """One domain definition (live or persistent); :attr:`root` is the
    whole document, kept up to date by the methods that change it."""

    root: etree._Element

    @property
    def name(self) -> str:
        return self.root.findtext("name")

    @property
    def uuid(self) -> str:
        return self.root.findtext("uuid")

    @property
    def max_memory_kib(self) -> int:
        return int(self.root.findtext("memory"))

    @property
    def memory_kib(self) -> int:
        return int(self.root.findtext("currentMemory"))

    def set_memory_kib(self, kib: int) -> None:
        self.root.find("currentMemory").text = str(kib)

    @property
    def max_vcpus(self) -> int:
        return int(self.root.findtext("vcpu"))

    @property
    def vcpus(self) -> int:
        return int(self.root.find("vcpu").get("current", self.max_vcpus))

    @property
    def cpuset(self) -> frozenset[int] | None:
        """The CPUs every vCPU may run on (``<vcpu cpuset>``), if set."""
        text = self.root.find("vcpu").get("cpuset")
        return None if text is None else frozenset(parse_cpuset(text))

    def vcpu_pins(self) -> dict[int, frozenset[int]]:
        """``<cputune><vcpupin>``: vCPU -> its CPUs."""
        return {int(pin.get("vcpu")): frozenset(parse_cpuset(pin.get("cpuset")))
                for pin in self.root.iterfind("cputune/vcpupin")}

    def pinned_cpus(self) -> frozenset[int]:
        """Every host CPU the definition names (vcpu, vcpupin, emulatorpin)."""
        cpus = set(self.cpuset or ())
        for pins in self.vcpu_pins().values():
            cpus |= pins
        for pin in self.root.iterfind("cputune/emulatorpin"):
            cpus |= set(parse_cpuset(pin.get("cpuset")))
        return frozenset(cpus)

    def memory_nodes(self) -> frozenset[int] | None:
        """Host NUMA nodes memory is bound to (``<numatune>``), if any."""
        nodes: set[int] = set()
        for element in (*self.root.iterfind("numatune/memory"),
                        *self.root.iterfind("numatune/memnode")):
            if element.get("nodeset"):
                nodes |= set(parse_cpuset(element.get("nodeset")))
        return frozenset(nodes) if nodes else None

    def hostdevs(self) -> list[Hostdev]:
        return [hostdev_of(e) for e in self.root.iterfind("devices/hostdev")]

    def add_device(self, element: etree._Element) -> None:
        devices = self.root.find("devices")
        if devices is None:
            devices = etree.SubElement(self.root, "devices")
        devices.append(copy.deepcopy(element))

    def remove_hostdev(self, wanted: Hostdev) -> etree._Element | None:
        """Remove the ``<hostdev>`` for the same device; the one removed."""
        for element in self.root.iterfind("devices/hostdev"):
            if hostdev_of(element) == wanted:
                element.getparent().remove(element)
                return element
        return None

    def copy(self) -> DomainDef:
        return DomainDef(copy.deepcopy(self.root))

    def to_xml(self, domain_id: int | None) -> str:
        root = copy.deepcopy(self.root)
        if domain_id is not None and domain_id >= 0:
            root.set("id", str(domain_id))
        etree.indent(root, space="  ")
        return single_quoted(etree.tostring(root, encoding="unicode")) + "\n"


_TAG = re.compile(r"<[^<>]+>")
_ATTRIBUTE = re.compile(r'(\s[^\s=]+)="([^"]*)"')


def single_quoted(xml: str) -> str:
    """``xml`` with its attributes in single quotes, as libvirt writes
    them (lxml writes double quotes; inside tags ``<`` and ``>`` are
    always escaped, so a tag ends at the first ``>``)."""
    def tag(match: re.Match) -> str:
        return _ATTRIBUTE.sub(
            lambda a: f"{a.group(1)}='{a.group(2).replace(chr(39), '&apos;')}'"
            .replace("&quot;", '"'), match.group(0))
    return _TAG.sub(tag, xml)


def parse_domain(xml: str) -> DomainDef:
    """A definition from domain XML, with libvirt's fill-ins.

    Raises:
        libvirtError: what libvirt's parser says for XML that is not
            well formed, not a ``<domain>``, or lacks what it needs.
    """
    root = parse_xml(xml, "domain_definition", "domain")
    if root.get("type") is None:
        raise _internal("missing domain type attribute")
    name = (root.findtext("name") or "").strip()
    if not name:
        raise make_error(VIR_ERR_NO_NAME, VIR_FROM_DOMAIN,
                         "missing name information",
                         str1="missing name information")
    uuid_el = root.find("uuid")
    if uuid_el is None:
        uuid_el = etree.Element("uuid")
        root.find("name").addnext(uuid_el)
        uuid_el.text = str(uuid_module.uuid4())
    else:
        try:
            uuid_el.text = str(uuid_module.UUID(uuid_el.text.strip()))
        except (ValueError, AttributeError):
            raise _internal("malformed uuid element") from None
    if root.find("os/type") is None:
        raise _xml_error("an os <type> must be specified")
    memory = root.find("memory")
    if memory is None:
        raise _xml_error("Memory size must be specified via <memory> or "
                         "in the <numa> configuration")
    max_kib = _kib(memory, "memory")
    current = root.find("currentMemory")
    current_kib = max_kib if current is None else min(
        _kib(current, "currentMemory"), max_kib)
    _set_kib(memory, max_kib)
    if current is None:
        current = etree.Element("currentMemory")
        memory.addnext(current)
    _set_kib(current, current_kib)
    vcpu = root.find("vcpu")
    if vcpu is None:
        vcpu = etree.Element("vcpu")
        vcpu.text = "1"
        current.addnext(vcpu)
    attributes = dict(vcpu.attrib)
    vcpu.attrib.clear()
    vcpu.set("placement", attributes.pop("placement", "static"))
    for key, value in attributes.items():
        vcpu.set(key, value)
    definition = DomainDef(root)
    try:
        definition.pinned_cpus()
        definition.memory_nodes()
        definition.hostdevs()
        definition.vcpus  # noqa: B018 - parsed to refuse bad numbers
    except (ValueError, TypeError) as exc:
        raise _xml_error(str(exc)) from None
    return definition


def parse_device(xml: str) -> tuple[etree._Element, Hostdev | None]:
    """A device element for attach/detach; its :class:`Hostdev` if it is
    one."""
    root = parse_xml(xml, "device_definition", None)
    if root.tag != "hostdev":
        return root, None
    try:
        return root, hostdev_of(root)
    except (ValueError, TypeError) as exc:
        raise _xml_error(str(exc)) from None


def parse_xml(xml: str, source: str, root_tag: str | None
              ) -> etree._Element:
    """Parse untrusted XML (no DTD, no entities, no network) as libvirt
    reports its parse errors."""
    parser = etree.XMLParser(resolve_entities=False, no_network=True,
                             load_dtd=False, huge_tree=False,
                             remove_blank_text=True)
    try:
        root = etree.fromstring(xml.encode("utf-8"), parser)
    except etree.XMLSyntaxError as exc:
        line = exc.lineno or 1
        message = re.sub(r", line \d+, column \d+$", "", exc.msg or "")
        text = (xml.splitlines() or [""])[min(line, len(xml.splitlines()) or 1) - 1]
        column = max((exc.offset or 1) - 1, 0)
        detail = f"({source}):{line}: {message}\n{text}\n{'-' * column}^"
        raise make_error(VIR_ERR_XML_DETAIL, VIR_FROM_DOMAIN, detail,
                         str1="%s", str2=detail) from None
    if root.getroottree().docinfo.doctype:
        raise _xml_error("a document type declaration is not accepted")
    if root_tag is not None and root.tag != root_tag:
        detail = f"expecting root element of '{root_tag}', not '{root.tag}'"
        raise make_error(VIR_ERR_XML_ERROR, VIR_FROM_XML,
                         f"XML error: {detail}", str1="XML error: %s",
                         str2=detail)
    return root


def hostdev_of(element: etree._Element) -> Hostdev:
    kind = element.get("type")
    managed = element.get("managed", "no") == "yes"
    xml = etree.tostring(element, encoding="unicode")
    address = element.find("source/address")
    if address is None:
        raise ValueError(f"hostdev of type {kind!r} has no <source><address>")
    if kind == "pci":
        parts = [int(address.get(n, "0"), 0)
                 for n in ("domain", "bus", "slot", "function")]
        key = "{:04x}:{:02x}:{:02x}.{:x}".format(*parts)
    elif kind == "mdev":
        key = str(uuid_module.UUID(address.get("uuid")))
    else:
        key = etree.tostring(address, encoding="unicode")
    return Hostdev(kind, key, managed, xml)


def _kib(element: etree._Element, name: str) -> int:
    unit = (element.get("unit") or "KiB").lower()
    try:
        return int(int((element.text or "").strip()) * _UNITS[unit])
    except (KeyError, ValueError):
        raise _xml_error(f"invalid value for <{name}>: "
                         f"{element.text!r} {element.get('unit')!r}") from None


def _set_kib(element: etree._Element, kib: int) -> None:
    element.attrib.clear()
    element.set("unit", "KiB")
    element.text = str(kib)


def _internal(detail: str) -> libvirtError:
    return make_error(VIR_ERR_INTERNAL_ERROR, VIR_FROM_DOMAIN,
                      f"internal error: {detail}",
                      str1="internal error: %s", str2=detail)


def _xml_error(detail: str) -> libvirtError:
    return make_error(VIR_ERR_XML_ERROR, VIR_FROM_DOMAIN,
                      f"XML error: {detail}", str1="XML error: %s",
                      str2=detail)
