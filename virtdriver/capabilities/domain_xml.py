"""Read domain capabilities XML into :class:`~.domain.DomainCapabilities`.

Every ``<enum>`` is read from the direct children of the element it
describes, never by searching the whole document, so the ``usb`` of
``<redirdev><enum name='bus'>`` can never turn into a disk bus.

Reading is eager (every value is checked here) and kept cheap: models are
built by :func:`virtdriver.frozen.frozen_builder` constructors, positionally;
what a document leaves out is a shared default instance, and so is an
element with only a ``supported`` flag (one per flag; models are
immutable).  See ``docs/capabilities.md``, performance.
"""

from __future__ import annotations

from dataclasses import fields

from lxml import etree

from virtdriver.capabilities.domain import (
    CPUCaps, CPUFeaturePolicy, CPUModel, CustomCPUModes, Devices,
    DomainCapabilities, Features, HostModelCPU, LoaderCaps, NOT_REPORTED,
    OSCaps, SEVCaps, SGXCaps, SGXSection, Support)
from virtdriver.capabilities.xmlsafe import (
    DEFAULT_MAX_BYTES, YES_NO, ValueReader, parse_document,
    yes_no)
from virtdriver.frozen import frozen_builder

_DEVICE_TAGS = tuple(f.name for f in fields(Devices))
_DEVICE_AT = {tag: at for at, tag in enumerate(_DEVICE_TAGS)}
# Features read as plain Support, keyed by dataclass field, valued by tag.
_SIMPLE_FEATURES = {
    "gic": "gic", "vmcoreinfo": "vmcoreinfo", "genid": "genid",
    "backing_store_input": "backingStoreInput", "backup": "backup",
    "async_teardown": "async-teardown", "s390_pv": "s390-pv", "ps2": "ps2",
    "tdx": "tdx", "hyperv": "hyperv", "launch_security": "launchSecurity",
}
_FEATURE_FIELDS = tuple(f.name for f in fields(Features))
# Position in Features of each simple feature's tag, and of sev and sgx.
_FEATURE_AT = {_SIMPLE_FEATURES.get(name, name): at
               for at, name in enumerate(_FEATURE_FIELDS)}
_SEV_AT, _SGX_AT = _FEATURE_AT.pop("sev"), _FEATURE_AT.pop("sgx")

_CPUCaps = frozen_builder(CPUCaps)
_CPUModel = frozen_builder(CPUModel)
_Custom = frozen_builder(CustomCPUModes)
_Devices = frozen_builder(Devices)
_DomainCaps = frozen_builder(DomainCapabilities)
_Features = frozen_builder(Features)
_HostModel = frozen_builder(HostModelCPU)
_Loader = frozen_builder(LoaderCaps)
_OSCaps = frozen_builder(OSCaps)
_Policy = frozen_builder(CPUFeaturePolicy)
_SEV = frozen_builder(SEVCaps)
_SGX = frozen_builder(SGXCaps)
_Section = frozen_builder(SGXSection)
_Support = frozen_builder(Support)
# What an absent element reads as (the dataclass defaults, shared).
_NO_OS, _NO_LOADER, _NO_DEVICES, _NO_FEATURES = (
    OSCaps(), LoaderCaps(), Devices(), Features())
_NO_HOST_MODEL, _NO_CUSTOM, _NO_SEV, _NO_SGX = (
    HostModelCPU(), CustomCPUModes(), SEVCaps(), SGXCaps())
#: What yes_no gives for each spelling of usable libvirt writes ("unknown"
#: is a fifth of the corpus's models); anything else goes to yes_no.
_USABLE = {**YES_NO, "unknown": None}
_ODD = object()
_MODE_AT = {"host-passthrough": 0, "maximum": 1, "host-model": 2,
            "custom": 3}
# Elements with a flag and no enums (a third of a document's): shared, as
# models are immutable.  Not NOT_REPORTED itself: the element is there.
_FLAG_ONLY = {flag: Support(flag) for flag in (True, False, None)}
_HOST_MODEL_FLAG_ONLY = {flag: HostModelCPU(flag) for flag in _FLAG_ONLY}
_CUSTOM_FLAG_ONLY = {flag: CustomCPUModes(flag) for flag in _FLAG_ONLY}
_SEV_FLAG_ONLY = {flag: SEVCaps(flag) for flag in _FLAG_ONLY}
_SGX_FLAG_ONLY = {flag: SGXCaps(flag) for flag in _FLAG_ONLY}
_POLICY_NAME = ["policy", "name"]
_USABLE_ONLY = ["usable"]
_USABLE_VENDOR = ["usable", "vendor"]
_USABLE_VENDOR_CANONICAL = ["usable", "vendor", "canonical"]


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
    # Plain iteration with a tag check: iterchildren("value") costs more
    # than it saves on lists this short (3-4 values an enum).
    values = []
    for value in el:
        if value.tag == "value":
            text = value.text
            values.append(text.strip() if text else "")
    return tuple(values)


def _support(el: etree._Element | None) -> Support:
    if el is None:
        return NOT_REPORTED
    supported = el.get("supported")
    flag = YES_NO.get(supported)  # type: ignore[arg-type]
    if flag is None and supported is not None:
        flag = yes_no(supported)
    if not len(el):  # <gic supported='no'/>: one shared model per flag
        return _FLAG_ONLY[flag]
    enums = []
    # Loops written out: a comprehension and a _values() call per enum
    # cost a tenth of a device's read.
    for enum in el:
        if enum.tag == "enum":
            values = []
            for value in enum:
                if value.tag == "value":
                    text = value.text
                    values.append(text.strip() if text else "")
            enums.append((enum.get("name", ""), tuple(values)))
    return _Support(flag, tuple(enums))


def _cpu_model(el: etree._Element) -> CPUModel:
    """One named CPU model, whatever its attributes.

    ``items()`` reads only the attributes present, in one call.
    """
    usable = vendor = canonical = None
    deprecated = False
    for name, value in el.items():
        if name == "usable":
            usable = _USABLE.get(value, _ODD)
            if usable is _ODD:
                usable = yes_no(value)
        elif name == "vendor":
            vendor = value
        elif name == "canonical":
            canonical = value
        elif name == "deprecated":
            deprecated = value == "yes"
    text = el.text
    return _CPUModel(text.strip() if text else "", usable, vendor,
                     deprecated, canonical)


class _DomainReader(ValueReader):
    __slots__ = ()

    def read(self, root: etree._Element) -> DomainCapabilities:
        top = _children(root)
        text = self.text
        iothreads = top.get("iothreads")
        return _DomainCaps(
            self.source,
            text(top.get("path")) or None,
            text(top.get("domain")) or None,
            text(top.get("machine")) or None,
            text(top.get("arch")) or None,
            self._vcpu_max(top.get("vcpu")),
            None if iothreads is None else yes_no(iothreads.get("supported")),
            self._os(top.get("os")),
            self._cpu(top.get("cpu")),
            _support(top.get("memoryBacking")),
            self._devices(top.get("devices")),
            self._features(top.get("features")),
        )

    def _vcpu_max(self, vcpu: etree._Element | None) -> int | None:
        return None if vcpu is None else self.int_attr(vcpu, "max")

    def _os(self, os_el: etree._Element | None) -> OSCaps:
        if os_el is None:
            return _NO_OS
        # One loop for the firmware enum and the two children (each the
        # first of its name or tag, as Support.values and _children give).
        firmware = None
        features = loader = None
        for el in os_el:
            tag = el.tag
            if tag == "enum":
                if firmware is None and el.get("name", "") == "firmware":
                    firmware = _values(el)
            elif tag == "loader":
                if loader is None:
                    loader = el
            elif tag == "firmwareFeatures" and features is None:
                features = el
        return _OSCaps(yes_no(os_el.get("supported")), firmware or (),
                       _support(features), self._loader(loader))

    def _loader(self, loader: etree._Element | None) -> LoaderCaps:
        if loader is None:
            return _NO_LOADER
        paths = []
        enums: dict[str, tuple[str, ...]] = {}
        for el in loader:
            tag = el.tag
            if tag == "value":
                text = el.text
                paths.append(text.strip() if text else "")
            elif tag == "enum":
                name = el.get("name", "")
                if name not in enums:
                    enums[name] = _values(el)
        get = enums.get
        return _Loader(yes_no(loader.get("supported")), tuple(paths),
                       get("type", ()), get("readonly", ()),
                       get("secure", ()))

    def _cpu(self, cpu: etree._Element | None) -> CPUCaps:
        # The last <mode> of each name wins.  Plain iteration and a tag
        # check: cheaper than iterchildren("mode") into a dict for four.
        modes: list[etree._Element | None] = [None, None, None, None]
        for mode in () if cpu is None else cpu:
            if mode.tag == "mode":
                at = _MODE_AT.get(mode.get("name"))  # type: ignore[arg-type]
                if at is not None:
                    modes[at] = mode
        passthrough, maximum, host_model, custom = modes
        return _CPUCaps(_support(passthrough), _support(maximum),
                        self._host_model(host_model), self._custom(custom))

    def _host_model(self, mode: etree._Element | None) -> HostModelCPU:
        if mode is None:
            return _NO_HOST_MODEL
        if not len(mode):
            return _HOST_MODEL_FLAG_ONLY[yes_no(mode.get("supported"))]
        model = vendor = None
        features = []
        for el in mode:
            tag = el.tag
            if tag == "feature":
                # libvirt writes policy= then name=: unpacked from values().
                if el.keys() == _POLICY_NAME:
                    policy, name = el.values()
                    features.append(_Policy(name, policy))
                else:
                    get = el.get
                    features.append(_Policy(get("name", ""),
                                            get("policy", "require")))
            elif tag == "model":
                if model is None:
                    model = el
            elif tag == "vendor" and vendor is None:
                vendor = el
        return _HostModel(
            yes_no(mode.get("supported")), self.text(model) or None,
            None if model is None else model.get("fallback"),
            self.text(vendor) or None, tuple(features))

    def _custom(self, mode: etree._Element | None) -> CustomCPUModes:
        if mode is None:
            return _NO_CUSTOM
        if not len(mode):
            return _CUSTOM_FLAG_ONLY[yes_no(mode.get("supported"))]
        models = []
        for el in mode.iterchildren("model"):
            # Once per named CPU model (140 in a q35 document).  libvirt's
            # usual attribute layouts are unpacked from values(); any
            # other is read with items() (only the attributes present).
            keys = el.keys()
            if keys == _USABLE_VENDOR:
                usable, vendor = el.values()
                canonical = None
            elif keys == _USABLE_VENDOR_CANONICAL:
                usable, vendor, canonical = el.values()
            elif keys == _USABLE_ONLY:
                usable, = el.values()
                vendor = canonical = None
            else:
                models.append(_cpu_model(el))
                continue
            flag = _USABLE.get(usable, _ODD)
            text = el.text
            models.append(_CPUModel(
                text.strip() if text else "",
                yes_no(usable) if flag is _ODD else flag, vendor, False,
                canonical))
        return _Custom(yes_no(mode.get("supported")), tuple(models))

    def _devices(self, devices: etree._Element | None) -> Devices:
        if devices is None or not len(devices):
            return _NO_DEVICES  # equal to what an empty <devices> reads as
        args = [NOT_REPORTED] * len(_DEVICE_TAGS)
        device_at = _DEVICE_AT.get
        for el in devices:
            at = device_at(el.tag)
            # The first of each tag wins (a read one is never NOT_REPORTED).
            if at is not None and args[at] is NOT_REPORTED:
                args[at] = (_support(el) if len(el) else
                            _FLAG_ONLY[yes_no(el.get("supported"))])
        return _Devices(*args)

    def _features(self, features: etree._Element | None) -> Features:
        if features is None:
            return _NO_FEATURES
        args = [NOT_REPORTED] * len(_FEATURE_FIELDS)
        sev = sgx = None
        for el in features:
            tag = el.tag
            at = _FEATURE_AT.get(tag)
            if at is not None:
                # The first of each tag wins (a read one is never
                # NOT_REPORTED).  Most are flag-only: _support's first
                # step inline, without the call.
                if args[at] is NOT_REPORTED:
                    args[at] = (_support(el) if len(el) else
                                _FLAG_ONLY[yes_no(el.get("supported"))])
            elif tag == "sev":
                if sev is None:
                    sev = el
            elif tag == "sgx" and sgx is None:
                sgx = el
        # sev before sgx: the order their values are checked in.
        args[_SEV_AT] = self._sev(sev)
        args[_SGX_AT] = self._sgx(sgx)
        return _Features(*args)

    def _sev(self, sev: etree._Element | None) -> SEVCaps:
        if sev is None:
            return _NO_SEV
        if not len(sev):
            return _SEV_FLAG_ONLY[yes_no(sev.get("supported"))]
        kids = _children(sev)
        int_text = self.int_text
        return _SEV(yes_no(sev.get("supported")),
                    int_text(kids.get("cbitpos")),
                    int_text(kids.get("reducedPhysBits")),
                    int_text(kids.get("maxGuests")),
                    int_text(kids.get("maxESGuests")))

    def _sgx(self, sgx: etree._Element | None) -> SGXCaps:
        if sgx is None:
            return _NO_SGX
        if not len(sgx):
            return _SGX_FLAG_ONLY[yes_no(sgx.get("supported"))]
        kids = _children(sgx)
        section_size = kids.get("section_size")
        size = self.int_text(section_size)
        sections = kids.get("sections")
        return _SGX(
            yes_no(sgx.get("supported")),
            yes_no(self.text(kids.get("flc"))),
            yes_no(self.text(kids.get("sgx1"))),
            yes_no(self.text(kids.get("sgx2"))),
            None if size is None else self.kib(section_size, size),
            () if sections is None else tuple([
                self._sgx_section(el)
                for el in sections.iterchildren("section")]))

    def _sgx_section(self, el: etree._Element) -> SGXSection:
        size = self.int_attr(el, "size")
        if size is None:
            raise self.error(el, "SGX section has no size attribute")
        return _Section(self.int_attr(el, "node"), self.kib(el, size))
