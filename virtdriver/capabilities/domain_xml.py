"""Read domain capabilities XML into :class:`~.domain.DomainCapabilities`.

Every ``<enum>`` is read from the direct children of the element it
describes, never by searching the whole document, so the ``usb`` of
``<redirdev><enum name='bus'>`` can never turn into a disk bus.
"""

from __future__ import annotations

from dataclasses import fields

from lxml import etree

from virtdriver.capabilities.domain import (
    CPUCaps, CPUFeaturePolicy, CPUModel, CustomCPUModes, Devices,
    DomainCapabilities, Features, HostModelCPU, LoaderCaps, NOT_REPORTED,
    OSCaps, SEVCaps, SGXCaps, SGXSection, Support)
from virtdriver.capabilities.xmlsafe import (
    DEFAULT_MAX_BYTES, ValueReader, parse_document, yes_no)

_DEVICE_TAGS = tuple(f.name for f in fields(Devices))
# Features read as plain Support, keyed by dataclass field, valued by tag.
_SIMPLE_FEATURES = {
    "gic": "gic", "vmcoreinfo": "vmcoreinfo", "genid": "genid",
    "backing_store_input": "backingStoreInput", "backup": "backup",
    "async_teardown": "async-teardown", "s390_pv": "s390-pv", "ps2": "ps2",
    "tdx": "tdx", "hyperv": "hyperv", "launch_security": "launchSecurity",
}


def parse_domain_capabilities(xml: str | bytes, source: str = "<string>", *,
                              max_bytes: int = DEFAULT_MAX_BYTES
                              ) -> DomainCapabilities:
    """Parse a ``<domainCapabilities>`` document.

    Args:
        xml: the document (``virConnectGetDomainCapabilities`` output).
        source: where it came from (file path or URI), named in errors.
        max_bytes: size limit; larger documents are refused.

    Raises:
        CapabilityXMLError: the document is malformed, hostile, too large,
            not ``<domainCapabilities>``, or holds a value that does not fit.
    """
    root = parse_document(xml, source=source, root_tag="domainCapabilities",
                          max_bytes=max_bytes)
    return _DomainReader(source).read(root)


def _children(el: etree._Element | None) -> dict[str, etree._Element]:
    """Direct children of ``el`` by tag (the first of each tag wins)."""
    found: dict[str, etree._Element] = {}
    if el is not None:
        for child in el:
            found.setdefault(child.tag, child)
    return found


def _values(el: etree._Element) -> tuple[str, ...]:
    return tuple([(v.text or "").strip() for v in el.iterchildren("value")])


def _support(el: etree._Element | None) -> Support:
    if el is None:
        return NOT_REPORTED
    enums = [(enum.get("name", ""), _values(enum))
             for enum in el.iterchildren("enum")]
    return Support(yes_no(el.get("supported")), tuple(enums))


class _DomainReader(ValueReader):
    __slots__ = ()

    def read(self, root: etree._Element) -> DomainCapabilities:
        top = _children(root)
        return DomainCapabilities(
            source=self.source,
            path=self.text(top.get("path")) or None,
            virt_type=self.text(top.get("domain")) or None,
            machine=self.text(top.get("machine")) or None,
            arch=self.text(top.get("arch")) or None,
            vcpu_max=self._vcpu_max(top.get("vcpu")),
            iothreads=(yes_no(top["iothreads"].get("supported"))
                       if "iothreads" in top else None),
            os=self._os(top.get("os")),
            cpu=self._cpu(top.get("cpu")),
            memory_backing=_support(top.get("memoryBacking")),
            devices=self._devices(top.get("devices")),
            features=self._features(top.get("features")),
        )

    def _vcpu_max(self, vcpu: etree._Element | None) -> int | None:
        return None if vcpu is None else self.int_attr(vcpu, "max")

    def _os(self, os_el: etree._Element | None) -> OSCaps:
        if os_el is None:
            return OSCaps()
        os_support = _support(os_el)
        kids = _children(os_el)
        return OSCaps(
            supported=os_support.supported,
            firmware=os_support.values("firmware"),
            firmware_features=_support(kids.get("firmwareFeatures")),
            loader=self._loader(kids.get("loader")),
        )

    def _loader(self, loader: etree._Element | None) -> LoaderCaps:
        if loader is None:
            return LoaderCaps()
        support = _support(loader)
        return LoaderCaps(
            supported=support.supported,
            paths=_values(loader),
            types=support.values("type"),
            readonly=support.values("readonly"),
            secure=support.values("secure"),
        )

    def _cpu(self, cpu: etree._Element | None) -> CPUCaps:
        modes = {mode.get("name"): mode for mode in
                 (cpu.iterchildren("mode") if cpu is not None else ())}
        return CPUCaps(
            host_passthrough=_support(modes.get("host-passthrough")),
            maximum=_support(modes.get("maximum")),
            host_model=self._host_model(modes.get("host-model")),
            custom=self._custom(modes.get("custom")),
        )

    def _host_model(self, mode: etree._Element | None) -> HostModelCPU:
        if mode is None:
            return HostModelCPU()
        kids = _children(mode)
        model = kids.get("model")
        return HostModelCPU(
            supported=yes_no(mode.get("supported")),
            model=self.text(model) or None,
            fallback=None if model is None else model.get("fallback"),
            vendor=self.text(kids.get("vendor")) or None,
            features=tuple([
                CPUFeaturePolicy(el.get("name", ""), el.get("policy", "require"))
                for el in mode.iterchildren("feature")]),
        )

    def _custom(self, mode: etree._Element | None) -> CustomCPUModes:
        if mode is None:
            return CustomCPUModes()
        return CustomCPUModes(
            supported=yes_no(mode.get("supported")),
            models=tuple([
                CPUModel((el.text or "").strip(), yes_no(el.get("usable")),
                         el.get("vendor"), el.get("deprecated") == "yes",
                         el.get("canonical"))
                for el in mode.iterchildren("model")]),
        )

    def _devices(self, devices: etree._Element | None) -> Devices:
        found = _children(devices)
        return Devices(**{tag: _support(found.get(tag))
                          for tag in _DEVICE_TAGS})

    def _features(self, features: etree._Element | None) -> Features:
        found = _children(features)
        return Features(
            sev=self._sev(found.get("sev")),
            sgx=self._sgx(found.get("sgx")),
            **{name: _support(found.get(tag))
               for name, tag in _SIMPLE_FEATURES.items()})

    def _sev(self, sev: etree._Element | None) -> SEVCaps:
        if sev is None:
            return SEVCaps()
        kids = _children(sev)
        return SEVCaps(
            supported=yes_no(sev.get("supported")),
            cbitpos=self.int_text(kids.get("cbitpos")),
            reduced_phys_bits=self.int_text(kids.get("reducedPhysBits")),
            max_guests=self.int_text(kids.get("maxGuests")),
            max_es_guests=self.int_text(kids.get("maxESGuests")),
        )

    def _sgx(self, sgx: etree._Element | None) -> SGXCaps:
        if sgx is None:
            return SGXCaps()
        kids = _children(sgx)
        section_size = kids.get("section_size")
        size = self.int_text(section_size)
        sections = kids.get("sections")
        return SGXCaps(
            supported=yes_no(sgx.get("supported")),
            flc=yes_no(self.text(kids.get("flc"))),
            sgx1=yes_no(self.text(kids.get("sgx1"))),
            sgx2=yes_no(self.text(kids.get("sgx2"))),
            section_size_kib=(None if size is None
                              else self.kib(section_size, size)),
            sections=() if sections is None else tuple(
                self._sgx_section(el)
                for el in sections.iterchildren("section")),
        )

    def _sgx_section(self, el: etree._Element) -> SGXSection:
        size = self.int_attr(el, "size")
        if size is None:
            raise self.error(el, "SGX section has no size attribute")
        return SGXSection(node=self.int_attr(el, "node"),
                          size_kib=self.kib(el, size))

