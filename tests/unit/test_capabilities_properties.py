"""Property tests for the capability parsers.

Two families:

* **Round trips.**  Hypothesis generates a *model* (the frozen dataclasses
  the parsers return), renders it to libvirt-style XML with lxml — sibling
  sets as ranges and commas, sizes in KiB, MiB or GiB, awkward text such as
  ``&``, ``<`` and non-ASCII, serialised as ``str``, UTF-8 or ASCII with
  character references — parses it back and demands the very same model.
* **Mutations.**  Every corpus document, damaged at the byte level (flips,
  inserts, deletes, truncation, duplicated ranges, spliced DTDs, entities,
  huge or negative numbers, reversed CPU ranges), must either parse or raise
  :class:`CapabilityXMLError` naming its source — never anything else.

All tests are derandomized so CI sees the same examples on every run.
"""

from __future__ import annotations

import random
import re

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from lxml import etree

from tests.corpus import MISSING, corpus_files
from virtdriver.capabilities import (
    CapabilityXMLError, DomainCapabilities, HostCapabilities,
    parse_domain_capabilities, parse_host_capabilities)
from virtdriver.capabilities.domain import (
    CPUCaps, CPUFeaturePolicy, CPUModel, CustomCPUModes, Devices, Features,
    HostModelCPU, LoaderCaps, OSCaps, SEVCaps, SGXCaps, SGXSection, Support)
from virtdriver.capabilities.host import (
    CacheBank, CellCPU, CPUTopology, Guest, GuestDomain, GuestMachine,
    HostCPU, NUMACell, Pages)
from virtdriver.cpuset import cpu_runs, format_cpuset, parse_cpuset

ROUND_TRIP = settings(max_examples=100, deadline=None, derandomize=True,
                      database=None,
                      suppress_health_check=[HealthCheck.too_slow,
                                             HealthCheck.data_too_large])
MUTATION = settings(max_examples=175, deadline=None, derandomize=True,
                    database=None,
                    suppress_health_check=[HealthCheck.too_slow])

# --------------------------------------------------------------------------
# Text: what libvirt could put in element text or attributes, including the
# characters XML must escape and some non-ASCII (BMP and astral).  Leading
# and trailing whitespace is excluded: the parsers strip text on purpose.

_CHARS = ("abcdefghijklmnopqrstuvwxyzABCDEFXYZ0123456789"
          "-_.:/+=,;()[]{}!?#%* &<>\"'"
          "\u00e9\u00fc\u00df\u2603\u4e2d\u03bb\U0001d11e\U0001f600")
TRICKY = ["a&b", "<model>", "]]>", "&amp;", "x'y\"z", "caf\u00e9",
          "\u2603 snow", "\U0001d11e", "pc-q35-&<>", "a > b < c"]


def _clean(value: str) -> str:
    return value.strip()


texts = st.one_of(
    st.sampled_from(TRICKY),
    st.text(st.sampled_from(_CHARS), min_size=1, max_size=12)
    .map(_clean).filter(bool))
idents = st.text(st.sampled_from("abcdefghijklmnopqrstuvwxyz0123456789-_"),
                 min_size=1, max_size=10)
small_ints = st.integers(min_value=0, max_value=2 ** 16)
big_ints = st.one_of(small_ints, st.integers(min_value=0,
                                             max_value=2 ** 62))

# Units the parsers must convert exactly: name -> KiB per unit.
_KIB_UNITS = {"KiB": 1, "k": 1, "K": 1}
_MIB_UNITS = {"MiB": 1024, "M": 1024, "m": 1024}
_GIB_UNITS = {"GiB": 1024 ** 2, "G": 1024 ** 2}

#: sizes in KiB: arbitrary, or whole MiB / GiB so those units get used.
sizes_kib = st.one_of(
    st.integers(min_value=0, max_value=2 ** 40),
    st.integers(min_value=0, max_value=2 ** 30).map(lambda n: n * 1024),
    st.integers(min_value=0, max_value=2 ** 20).map(lambda n: n * 1024 ** 2),
    st.sampled_from([4, 64, 2048, 16384, 524288, 1048576]))


def render_size(rnd: random.Random, el: etree._Element, kib: int,
                attr: str | None = None) -> None:
    """Write ``kib`` on ``el`` in a unit chosen at random (exactly).

    With ``attr`` the number goes to that attribute, else into the text.
    The ``unit`` attribute is sometimes left out when the unit is KiB, the
    parsers' default.
    """
    choices = list(_KIB_UNITS.items())
    if kib % 1024 == 0:
        choices += list(_MIB_UNITS.items())
    if kib % 1024 ** 2 == 0:
        choices += list(_GIB_UNITS.items())
    unit, factor = rnd.choice(choices)
    if factor == 1 and rnd.random() < 0.3:
        unit = None
    number = str(kib // factor)
    if attr is None:
        el.text = number
    else:
        el.set(attr, number)
    if unit is not None:
        el.set("unit", unit)


def render_cpuset(rnd: random.Random, cpus: frozenset[int]) -> str:
    """Render like libvirt (``0-3``, ``0,4``), with random range folding."""
    parts: list[str] = []
    for first, last in cpu_runs(cpus):
        if last > first and rnd.random() < 0.7:
            parts.append(f"{first}-{last}")
        else:
            parts.extend(str(n) for n in range(first, last + 1))
    return ",".join(parts)


def serialise(rnd: random.Random, root: etree._Element) -> str | bytes:
    """The document as ``str`` or as bytes in UTF-8 or (escaped) ASCII."""
    pretty = rnd.random() < 0.5
    how = rnd.randrange(3)
    if how == 0:
        return etree.tostring(root, encoding="unicode", pretty_print=pretty)
    if how == 1:
        return etree.tostring(root, encoding="UTF-8", pretty_print=pretty,
                              xml_declaration=rnd.random() < 0.5)
    # Every non-ASCII character becomes a character reference.
    return etree.tostring(root, encoding="us-ascii", pretty_print=pretty)


def sub(parent: etree._Element, tag: str, text: str | None = None,
        **attrs: str) -> etree._Element:
    el = etree.SubElement(parent, tag, **attrs)
    if text is not None:
        el.text = text
    return el


def yes_no_text(rnd: random.Random, value: bool) -> str:
    """libvirt writes yes/no; the parsers also accept on/off."""
    if rnd.random() < 0.8:
        return "yes" if value else "no"
    return "on" if value else "off"


# --------------------------------------------------------------------------
# Host capabilities: models


machines = st.builds(
    GuestMachine, name=texts, canonical=st.none() | texts,
    max_cpus=st.none() | small_ints, deprecated=st.booleans())
guest_feature_tags = st.frozensets(st.sampled_from(
    ["pae", "nonpae", "acpi", "apic", "cpuselection", "deviceboot",
     "disksnapshot", "externalSnapshot", "ia64_be"]), max_size=4)
guests = st.builds(
    Guest, os_type=st.sampled_from(["hvm", "xen", "exe", "linux"]),
    arch=st.sampled_from(["x86_64", "i686", "aarch64", "ppc64le",
                          "s390x", "riscv64", "armv7l"]) | idents,
    wordsize=st.none() | st.sampled_from([32, 64]),
    emulator=st.none() | texts,
    machines=st.lists(machines, max_size=3).map(tuple),
    domains=st.lists(st.builds(
        GuestDomain, type=st.sampled_from(["qemu", "kvm", "hvf", "xen"]),
        emulator=st.none() | texts,
        machines=st.lists(machines, max_size=2).map(tuple)),
        max_size=3).map(tuple),
    features=guest_feature_tags)
host_cpus = st.builds(
    HostCPU, arch=st.none() | st.sampled_from(["x86_64", "aarch64"]) | texts,
    model=st.none() | texts, vendor=st.none() | texts,
    features=st.frozensets(texts, max_size=5),
    topology=st.none() | st.builds(
        CPUTopology, sockets=st.none() | small_ints,
        dies=st.none() | small_ints, clusters=st.none() | small_ints,
        cores=st.none() | small_ints, threads=st.none() | small_ints),
    page_sizes_kib=st.lists(sizes_kib, max_size=3).map(tuple))
cpu_blocks = st.builds(lambda start, length: frozenset(range(start,
                                                        start + length)),
                     st.integers(min_value=0, max_value=300),
                     st.integers(min_value=1, max_value=12))
#: CPU sets with scattered ids and with runs (which render as ranges).
cpu_id_sets = st.one_of(
    st.frozensets(st.integers(min_value=0, max_value=300), max_size=8),
    st.lists(cpu_blocks, max_size=3).map(lambda runs: frozenset().union(*runs)))


@st.composite
def numa_cells(draw) -> tuple[NUMACell, ...]:
    count = draw(st.integers(min_value=0, max_value=4))
    all_ids = draw(st.lists(st.integers(min_value=0, max_value=511),
                            unique=True, max_size=count * 6))
    cells = []
    for cell_id in range(count):
        ids = all_ids[cell_id::count] if count else []
        cpus = tuple(draw(st.builds(
            CellCPU, id=st.just(cpu_id),
            socket_id=st.none() | small_ints, die_id=st.none() | small_ints,
            cluster_id=st.none() | small_ints,
            core_id=st.none() | small_ints,
            siblings=st.one_of(cpu_id_sets,
                               st.just(frozenset({cpu_id})),
                               st.just(frozenset({cpu_id, cpu_id + 1})))))
            for cpu_id in ids)
        cells.append(NUMACell(
            id=cell_id,
            memory_kib=draw(st.none() | sizes_kib),
            pages=tuple(draw(st.lists(st.builds(
                Pages, size_kib=sizes_kib, count=big_ints), max_size=3))),
            distances=tuple(
                (other, draw(st.integers(min_value=10, max_value=255)))
                for other in range(count)) if draw(st.booleans()) else (),
            cpus=cpus))
    return tuple(cells)


cache_banks = st.builds(
    CacheBank, id=small_ints, level=st.integers(min_value=1, max_value=4),
    type=st.sampled_from(["both", "code", "data"]), size_kib=sizes_kib,
    cpus=cpu_id_sets)
host_models = st.builds(
    HostCapabilities, source=st.sampled_from(["<string>", "gen/host.xml",
                                              "qemu:///system caps"]),
    uuid=st.none() | st.uuids().map(str), cpu=host_cpus,
    iommu=st.none() | st.booleans(), cells=numa_cells(),
    cache=st.lists(cache_banks, max_size=3).map(tuple),
    guests=st.lists(guests, max_size=3).map(tuple))


# --------------------------------------------------------------------------
# Host capabilities: rendering


def render_machines(rnd: random.Random, parent: etree._Element,
                    machines_: tuple[GuestMachine, ...]) -> None:
    for machine in machines_:
        el = sub(parent, "machine", machine.name)
        if machine.max_cpus is not None:
            el.set("maxCpus", str(machine.max_cpus))
        if machine.canonical is not None:
            el.set("canonical", machine.canonical)
        if machine.deprecated:
            el.set("deprecated", "yes")
        elif rnd.random() < 0.3:
            el.set("deprecated", "no")


def render_host(rnd: random.Random, model: HostCapabilities) -> str | bytes:
    root = etree.Element("capabilities")
    host = sub(root, "host")
    if model.uuid is not None:
        sub(host, "uuid", model.uuid)
    cpu = model.cpu
    if cpu != HostCPU() or rnd.random() < 0.5:
        cpu_el = sub(host, "cpu")
        for tag in ("arch", "model", "vendor"):
            if getattr(cpu, tag) is not None:
                sub(cpu_el, tag, getattr(cpu, tag))
        if cpu.topology is not None:
            topo = sub(cpu_el, "topology")
            for name in ("sockets", "dies", "clusters", "cores", "threads"):
                value = getattr(cpu.topology, name)
                if value is not None:
                    topo.set(name, str(value))
        for name in sorted(cpu.features):
            sub(cpu_el, "feature", name=name)
        for size in cpu.page_sizes_kib:
            render_size(rnd, sub(cpu_el, "pages"), size, attr="size")
    if model.iommu is not None:
        sub(host, "iommu", support=yes_no_text(rnd, model.iommu))
    if model.cells or rnd.random() < 0.3:
        cells_el = sub(sub(host, "topology"), "cells",
                       num=str(len(model.cells)))
        for cell in model.cells:
            cell_el = sub(cells_el, "cell", id=str(cell.id))
            if cell.memory_kib is not None:
                render_size(rnd, sub(cell_el, "memory"), cell.memory_kib)
            for pages in cell.pages:
                el = sub(cell_el, "pages", str(pages.count))
                render_size(rnd, el, pages.size_kib, attr="size")
            if cell.distances:
                dist = sub(cell_el, "distances")
                for other, value in cell.distances:
                    sub(dist, "sibling", id=str(other), value=str(value))
            cpus_el = sub(cell_el, "cpus", num=str(len(cell.cpus)))
            for cpu_ in cell.cpus:
                el = sub(cpus_el, "cpu", id=str(cpu_.id))
                for name in ("socket_id", "die_id", "cluster_id", "core_id"):
                    value = getattr(cpu_, name)
                    if value is not None:
                        el.set(name, str(value))
                if cpu_.siblings or rnd.random() < 0.5:
                    el.set("siblings", render_cpuset(rnd, cpu_.siblings))
    if model.cache:
        cache_el = sub(host, "cache")
        for bank in model.cache:
            el = sub(cache_el, "bank", id=str(bank.id),
                     level=str(bank.level), type=bank.type)
            render_size(rnd, el, bank.size_kib, attr="size")
            el.set("cpus", render_cpuset(rnd, bank.cpus))
    for guest in model.guests:
        guest_el = sub(root, "guest")
        sub(guest_el, "os_type", guest.os_type)
        arch = sub(guest_el, "arch", name=guest.arch)
        if guest.wordsize is not None:
            sub(arch, "wordsize", str(guest.wordsize))
        if guest.emulator is not None:
            sub(arch, "emulator", guest.emulator)
        render_machines(rnd, arch, guest.machines)
        for domain in guest.domains:
            dom = sub(arch, "domain", type=domain.type)
            if domain.emulator is not None:
                sub(dom, "emulator", domain.emulator)
            render_machines(rnd, dom, domain.machines)
        if guest.features or rnd.random() < 0.5:
            feats = sub(guest_el, "features")
            for tag in sorted(guest.features):
                sub(feats, tag, default="on", toggle="yes")
    return serialise(rnd, root)


# --------------------------------------------------------------------------
# Domain capabilities: models

enum_lists = st.lists(
    st.tuples(idents, st.lists(texts, max_size=4).map(tuple)),
    max_size=3, unique_by=lambda pair: pair[0]).map(tuple)
supports = st.one_of(
    st.just(Support()),
    st.builds(Support, supported=st.none() | st.booleans(),
              enums=enum_lists))
flag_supports = st.one_of(   # features that are just supported yes/no
    st.just(Support()),
    st.builds(Support, supported=st.booleans()))
loaders = st.builds(
    LoaderCaps, supported=st.none() | st.booleans(),
    paths=st.lists(texts.map(lambda t: "/usr/share/" + t),
                   max_size=3).map(tuple),
    types=st.lists(st.sampled_from(["rom", "pflash"]), max_size=2,
                   unique=True).map(tuple),
    readonly=st.lists(st.sampled_from(["yes", "no"]), max_size=2,
                      unique=True).map(tuple),
    secure=st.lists(st.sampled_from(["yes", "no"]), max_size=2,
                    unique=True).map(tuple))
oses = st.one_of(st.just(OSCaps()), st.builds(
    OSCaps, supported=st.none() | st.booleans(),
    firmware=st.lists(st.sampled_from(["bios", "efi"]) | texts,
                      max_size=3).map(tuple),
    firmware_features=supports, loader=loaders))


@st.composite
def host_model_cpus(draw) -> HostModelCPU:
    if draw(st.booleans()):
        return HostModelCPU()
    model = draw(st.none() | texts)
    return HostModelCPU(
        supported=draw(st.none() | st.booleans()), model=model,
        fallback=None if model is None else draw(
            st.none() | st.sampled_from(["forbid", "allow"])),
        vendor=draw(st.none() | texts),
        features=tuple(draw(st.lists(st.builds(
            CPUFeaturePolicy, name=texts,
            policy=st.sampled_from(["require", "disable", "optional",
                                    "force", "forbid"])), max_size=5))))


customs = st.one_of(st.just(CustomCPUModes()), st.builds(
    CustomCPUModes, supported=st.none() | st.booleans(),
    models=st.lists(st.builds(
        CPUModel, name=texts, usable=st.none() | st.booleans(),
        vendor=st.none() | st.sampled_from(["Intel", "AMD", "unknown"]) |
        texts,
        deprecated=st.booleans(), canonical=st.none() | texts),
        max_size=5).map(tuple)))
cpu_caps = st.builds(CPUCaps, host_passthrough=supports, maximum=supports,
                     host_model=host_model_cpus(), custom=customs)

DISK_BUSES = ["ide", "fdc", "scsi", "virtio", "xen", "sata", "sd", "nvme"]


@st.composite
def device_caps(draw) -> Devices:
    """Devices, with the trap: redirdev offers bus 'usb', disk does not."""
    values = {name: draw(supports) for name in Devices.__dataclass_fields__}
    disk_extra = draw(enum_lists.map(
        lambda enums: tuple(e for e in enums if e[0] != "bus")))
    buses = tuple(draw(st.lists(st.sampled_from(DISK_BUSES), unique=True,
                                max_size=5)))
    values["disk"] = Support(supported=draw(st.none() | st.booleans()),
                             enums=(("bus", buses),) + disk_extra)
    values["redirdev"] = Support(supported=True,
                                 enums=(("bus", ("usb",)),))
    return Devices(**values)


sev_caps = st.one_of(st.just(SEVCaps()), st.builds(
    SEVCaps, supported=st.none() | st.booleans(),
    cbitpos=st.none() | st.integers(min_value=0, max_value=63),
    reduced_phys_bits=st.none() | st.integers(min_value=0, max_value=63),
    max_guests=st.none() | big_ints, max_es_guests=st.none() | big_ints))
sgx_caps = st.one_of(st.just(SGXCaps()), st.builds(
    SGXCaps, supported=st.none() | st.booleans(),
    flc=st.none() | st.booleans(), sgx1=st.none() | st.booleans(),
    sgx2=st.none() | st.booleans(),
    section_size_kib=st.none() | sizes_kib,
    sections=st.lists(st.builds(SGXSection, node=st.none() | small_ints,
                                size_kib=sizes_kib), max_size=3).map(tuple)))
launch_securities = st.one_of(
    st.just(Support()),
    st.builds(Support, supported=st.booleans(), enums=st.lists(
        st.sampled_from(["sev", "s390-pv", "tdx", "cca"]), unique=True,
        max_size=3).map(lambda v: (("sectype", tuple(v)),))))
features_caps = st.builds(
    Features, gic=supports, vmcoreinfo=flag_supports, genid=flag_supports,
    backing_store_input=flag_supports, backup=flag_supports,
    async_teardown=flag_supports, s390_pv=flag_supports, ps2=flag_supports,
    tdx=flag_supports, sev=sev_caps, sgx=sgx_caps, hyperv=supports,
    launch_security=launch_securities)
domain_models = st.builds(
    DomainCapabilities,
    source=st.sampled_from(["<string>", "gen/domcaps.xml",
                            "qemu:///system getDomainCapabilities"]),
    path=st.none() | texts.map(lambda t: "/usr/bin/" + t),
    virt_type=st.none() | st.sampled_from(["kvm", "qemu", "hvf", "xen"]),
    machine=st.none() | texts, arch=st.none() | idents,
    vcpu_max=st.none() | small_ints, iothreads=st.none() | st.booleans(),
    os=oses, cpu=cpu_caps, memory_backing=supports,
    devices=device_caps(), features=features_caps)


# --------------------------------------------------------------------------
# Domain capabilities: rendering


def render_enums(parent: etree._Element,
                 enums: tuple[tuple[str, tuple[str, ...]], ...]) -> None:
    for name, values in enums:
        enum = sub(parent, "enum", name=name)
        for value in values:
            sub(enum, "value", value)


def render_support(rnd: random.Random, parent: etree._Element, tag: str,
                   support: Support, **attrs: str) -> etree._Element | None:
    """Render a Support; an all-default one is sometimes left out."""
    if support == Support() and rnd.random() < 0.7:
        return None
    el = sub(parent, tag, **attrs)
    if support.supported is not None:
        el.set("supported", yes_no_text(rnd, support.supported))
    render_enums(el, support.enums)
    return el


def render_domain(rnd: random.Random,
                  model: DomainCapabilities) -> str | bytes:
    root = etree.Element("domainCapabilities")
    for tag, value in (("path", model.path), ("domain", model.virt_type),
                       ("machine", model.machine), ("arch", model.arch)):
        if value is not None:
            sub(root, tag, value)
    if model.vcpu_max is not None:
        sub(root, "vcpu", max=str(model.vcpu_max))
    if model.iothreads is not None:
        sub(root, "iothreads",
            supported=yes_no_text(rnd, model.iothreads))
    render_domain_os(rnd, root, model.os)
    render_domain_cpu(rnd, root, model.cpu)
    render_support(rnd, root, "memoryBacking", model.memory_backing)

    devices = sub(root, "devices")
    order = list(Devices.__dataclass_fields__)
    rnd.shuffle(order)   # the parser must not depend on element order
    for tag in order:
        render_support(rnd, devices, tag, getattr(model.devices, tag))

    feats = sub(root, "features")
    tags = {"backing_store_input": "backingStoreInput",
            "async_teardown": "async-teardown", "s390_pv": "s390-pv",
            "launch_security": "launchSecurity"}
    for name in Features.__dataclass_fields__:
        value = getattr(model.features, name)
        if name == "sev":
            render_sev(rnd, feats, value)
        elif name == "sgx":
            render_sgx(rnd, feats, value)
        else:
            render_support(rnd, feats, tags.get(name, name), value)
    return serialise(rnd, root)


def render_domain_os(rnd: random.Random, root: etree._Element,
                     os_: OSCaps) -> None:
    if os_ == OSCaps() and rnd.random() < 0.5:
        return
    os_el = sub(root, "os")
    if os_.supported is not None:
        os_el.set("supported", yes_no_text(rnd, os_.supported))
    if os_.firmware or rnd.random() < 0.3:
        render_enums(os_el, (("firmware", os_.firmware),))
    render_support(rnd, os_el, "firmwareFeatures", os_.firmware_features)
    loader = os_.loader
    if loader == LoaderCaps() and rnd.random() < 0.5:
        return
    loader_el = sub(os_el, "loader")
    if loader.supported is not None:
        loader_el.set("supported", yes_no_text(rnd, loader.supported))
    for path in loader.paths:
        sub(loader_el, "value", path)
    render_enums(loader_el, tuple(
        (name, values) for name, values in (
            ("type", loader.types), ("readonly", loader.readonly),
            ("secure", loader.secure))
        if values or rnd.random() < 0.3))


def render_domain_cpu(rnd: random.Random, root: etree._Element,
                      cpu: CPUCaps) -> None:
    cpu_el = sub(root, "cpu")
    render_support(rnd, cpu_el, "mode", cpu.host_passthrough,
                   name="host-passthrough")
    render_support(rnd, cpu_el, "mode", cpu.maximum, name="maximum")
    hm = cpu.host_model
    if hm != HostModelCPU() or rnd.random() < 0.3:
        mode = sub(cpu_el, "mode", name="host-model")
        if hm.supported is not None:
            mode.set("supported", yes_no_text(rnd, hm.supported))
        if hm.model is not None:
            model_el = sub(mode, "model", hm.model)
            if hm.fallback is not None:
                model_el.set("fallback", hm.fallback)
        if hm.vendor is not None:
            sub(mode, "vendor", hm.vendor)
        sub(mode, "maxphysaddr", mode="passthrough", limit="64")
        for feature in hm.features:
            el = sub(mode, "feature", name=feature.name)
            if feature.policy != "require" or rnd.random() < 0.7:
                el.set("policy", feature.policy)
    custom = cpu.custom
    if custom != CustomCPUModes() or rnd.random() < 0.3:
        mode = sub(cpu_el, "mode", name="custom")
        if custom.supported is not None:
            mode.set("supported", yes_no_text(rnd, custom.supported))
        for model in custom.models:
            el = sub(mode, "model", model.name)
            if model.usable is None:
                if rnd.random() < 0.7:
                    el.set("usable", "unknown")
            else:
                el.set("usable", "yes" if model.usable else "no")
            if model.vendor is not None:
                el.set("vendor", model.vendor)
            if model.deprecated:
                el.set("deprecated", "yes")
            if model.canonical is not None:
                el.set("canonical", model.canonical)
            if model.usable is False and rnd.random() < 0.5:
                blockers = sub(mode, "blockers", model=model.name)
                sub(blockers, "feature", name="hle")


def render_sev(rnd: random.Random, feats: etree._Element,
               sev: SEVCaps) -> None:
    if sev == SEVCaps() and rnd.random() < 0.5:
        return
    el = sub(feats, "sev")
    if sev.supported is not None:
        el.set("supported", yes_no_text(rnd, sev.supported))
    for tag, value in (("cbitpos", sev.cbitpos),
                       ("reducedPhysBits", sev.reduced_phys_bits),
                       ("maxGuests", sev.max_guests),
                       ("maxESGuests", sev.max_es_guests)):
        if value is not None:
            sub(el, tag, str(value))
    if sev.supported:
        sub(el, "cpu0Id", "BlAwmcr4Ruya3YvEGe2EBxuWjMAf==")


def render_sgx(rnd: random.Random, feats: etree._Element,
               sgx: SGXCaps) -> None:
    if sgx == SGXCaps() and rnd.random() < 0.5:
        return
    el = sub(feats, "sgx")
    if sgx.supported is not None:
        el.set("supported", yes_no_text(rnd, sgx.supported))
    for tag in ("flc", "sgx1", "sgx2"):
        value = getattr(sgx, tag)
        if value is not None:
            sub(el, tag, yes_no_text(rnd, value))
    if sgx.section_size_kib is not None:
        render_size(rnd, sub(el, "section_size"), sgx.section_size_kib)
    if sgx.sections:
        sections = sub(el, "sections")
        for section in sgx.sections:
            section_el = sub(sections, "section")
            if section.node is not None:
                section_el.set("node", str(section.node))
            render_size(rnd, section_el, section.size_kib, attr="size")


# --------------------------------------------------------------------------
# Round-trip properties


def _field_diff(expected: object, actual: object) -> str:
    """First differing field, for a readable assertion message."""
    for name in getattr(expected, "__dataclass_fields__", ()):
        want, got = getattr(expected, name), getattr(actual, name)
        if want != got:
            return f"{name}: expected {want!r}, parsed {got!r}"
    return f"expected {expected!r}, parsed {actual!r}"


@ROUND_TRIP
@given(model=host_models, rnd=st.randoms(use_true_random=False))
def test_generated_host_capabilities_round_trip(model, rnd):
    xml = render_host(rnd, model)
    parsed = parse_host_capabilities(xml, model.source)
    assert parsed == model, _field_diff(model, parsed)
    # Derived views agree with the generated model too.
    assert parsed.cpu_ids == frozenset(
        cpu.id for cell in model.cells for cpu in cell.cpus)
    for cell in model.cells:
        for other, value in cell.distances:
            assert parsed.cell(cell.id).distance_to(other) == value


@ROUND_TRIP
@given(model=domain_models, rnd=st.randoms(use_true_random=False))
def test_generated_domain_capabilities_round_trip(model, rnd):
    xml = render_domain(rnd, model)
    parsed = parse_domain_capabilities(xml, model.source)
    assert parsed == model, _field_diff(model, parsed)
    # The trap: redirdev's bus 'usb' must never become a disk bus.
    assert parsed.devices.redirdev.values("bus") == ("usb",)
    assert "usb" not in parsed.disk_buses
    expected_buses = (model.devices.disk.values("bus")
                      if model.devices.disk.supported else ())
    assert parsed.disk_buses == expected_buses


@ROUND_TRIP
@given(rnd=st.randoms(use_true_random=False),
       cpus=st.frozensets(st.integers(min_value=0, max_value=4096),
                          max_size=40))
def test_cpuset_rendering_round_trips(rnd, cpus):
    assert parse_cpuset(render_cpuset(rnd, cpus)) == cpus
    assert parse_cpuset(format_cpuset(cpus)) == cpus


@ROUND_TRIP
@given(rnd=st.randoms(use_true_random=False), kib=sizes_kib)
def test_memory_units_convert_exactly(rnd, kib):
    root = etree.Element("capabilities")
    cell = sub(sub(sub(sub(root, "host"), "topology"), "cells"), "cell",
               id="0")
    memory = sub(cell, "memory")
    render_size(rnd, memory, kib)
    parsed = parse_host_capabilities(etree.tostring(root))
    assert parsed.cells[0].memory_kib == kib, etree.tostring(memory)


# --------------------------------------------------------------------------
# Mutations of the real corpus

HOST_FILES = corpus_files("hostcaps")
DOMAIN_FILES = corpus_files("domcaps")
CORPUS_FILES = [(path, parse_host_capabilities) for path in HOST_FILES] + [
    (path, parse_domain_capabilities) for path in DOMAIN_FILES]
_BYTES = {path: path.read_bytes() for path, _ in CORPUS_FILES}

needs_corpus = pytest.mark.skipif(not CORPUS_FILES, reason=MISSING)

#: Byte strings that make trouble when spliced anywhere.
SPLICES = [
    b"<!DOCTYPE capabilities>",
    b"<!DOCTYPE x [<!ENTITY a 'aaaaaaaaaa'>]>",
    b"<!ENTITY e SYSTEM 'file:///etc/passwd'>",
    b"&ent;", b"&a;", b"&amp;", b"&#0;", b"&#x10FFFF;", b"&#xD800;",
    b"<![CDATA[5-1]]>", b"<!-- comment -->", b"<?pi data?>",
    b"<", b">", b"&", b"'", b'"', b"]]>", b"\x00", b"\xff\xfe", b"\xc3",
    b"<cell id='0'><memory>1</memory></cell>",
    b"<cpu id='x' siblings='5-1'/>",
    b"<enum name='bus'><value>usb</value></enum>",
    b"<pages size='-1'>1</pages>",
    b"<?xml version='1.0' encoding='UTF-16'?>",
    b"<?xml version='1.0' encoding='nonsense'?>",
]
#: Values that make trouble inside an attribute or as element text.
#: "Huge" here means far past 64 bits; pathological lengths have their
#: own tests below.
VALUES = [
    "-1", "", " ", "x", "1.5", "0x10", "1e3", "+1", "\u0661", "\u00b2",
    "5-1", "0-65536", "0-4000000000", "1,,2", "^", "0-", "-", "3,^3",
    "18446744073709551616", "9" * 40, "1" + "0" * 30,
    "yes", "maybe", "furlong", "TiB", "b", "KB", "tb", "&amp;", "0,4",
]

_ATTR = re.compile(rb"""(\w+)=(['"])([^'"]*)\2""")
_TEXT = re.compile(rb">([^<>]+)<")


@st.composite
def mutations(draw, data: bytes) -> bytes:
    """Apply one to three random byte-level mutations to ``data``."""
    buf = bytearray(data)
    for _ in range(draw(st.integers(min_value=1, max_value=3))):
        op = draw(st.sampled_from([
            "flip", "insert", "delete", "replace", "truncate", "duplicate",
            "splice", "attr", "attr", "text", "text"]))
        n = len(buf)
        at = draw(st.integers(min_value=0, max_value=max(n - 1, 0)))
        if op == "flip" and n:
            buf[at] ^= 1 << draw(st.integers(min_value=0, max_value=7))
        elif op == "insert":
            buf[at:at] = draw(st.binary(min_size=1, max_size=8))
        elif op == "delete":
            del buf[at:at + draw(st.integers(min_value=1, max_value=64))]
        elif op == "replace" and n:
            buf[at] = draw(st.integers(min_value=0, max_value=255))
        elif op == "truncate":
            del buf[at:]
        elif op == "duplicate":
            length = draw(st.integers(min_value=1, max_value=256))
            where = draw(st.integers(min_value=0, max_value=n))
            buf[where:where] = buf[at:at + length]
        elif op == "splice":
            buf[at:at] = draw(st.sampled_from(SPLICES))
        elif op in ("attr", "text"):
            pattern, group = (_ATTR, 3) if op == "attr" else (_TEXT, 1)
            found = list(pattern.finditer(bytes(buf)))
            if found:
                match = draw(st.sampled_from(found))
                value = draw(st.sampled_from(VALUES)).encode("utf-8")
                buf[match.start(group):match.end(group)] = value
    return bytes(buf)


@st.composite
def mutated_documents(draw, files):
    path, parser = draw(st.sampled_from(files))
    doc = draw(mutations(_BYTES[path]))
    if draw(st.booleans()):
        # As libvirt-python hands it over: a str (always valid Unicode).
        doc = doc.decode("utf-8", errors="replace")
    return path, parser, doc


def _check_parse_or_capability_error(path, parser,
                                     doc: str | bytes) -> None:
    source = str(path)
    try:
        result = parser(doc, source)
    except Exception as exc:  # noqa: BLE001 - the point of the test
        assert isinstance(exc, CapabilityXMLError), (
            f"{type(exc).__name__} escaped: {exc!r}")
        assert exc.source == source
        assert source in str(exc)
        assert exc.reason and str(exc).strip()
        assert exc.line is None or (
            isinstance(exc.line, int) and exc.line >= 1), exc.line
        if exc.line is not None:
            raw = doc.encode("utf-8") if isinstance(doc, str) else doc
            lines = raw.count(b"\n") + raw.count(b"\r") + 1
            assert exc.line <= lines, (exc.line, lines)
    else:
        expected = (HostCapabilities if parser is parse_host_capabilities
                    else DomainCapabilities)
        assert isinstance(result, expected)
        assert result.source == source


@needs_corpus
@MUTATION
@given(case=mutated_documents(
    [(p, parse_host_capabilities) for p in HOST_FILES] or [(None, None)]))
def test_mutated_host_documents_parse_or_raise_capability_error(case):
    path, parser, doc = case
    _check_parse_or_capability_error(path, parser, doc)


@needs_corpus
@MUTATION
@given(case=mutated_documents(
    [(p, parse_domain_capabilities) for p in DOMAIN_FILES] or [(None, None)]))
def test_mutated_domain_documents_parse_or_raise_capability_error(case):
    path, parser, doc = case
    _check_parse_or_capability_error(path, parser, doc)


# Numbers too long for Python's int() (over 4300 digits) or for a float
# (unit factors such as 1/1024 for 'b', 1000/1024 for 'KB') once escaped as
# ValueError / OverflowError; they must raise CapabilityXMLError.
_CELL = ("<capabilities><host><topology><cells><cell id='0'>{}</cell>"
         "</cells></topology></host></capabilities>")
_OVER_LONG_NUMBERS = [
    (parse_host_capabilities, _CELL.format(
        "<memory unit='b'>" + "9" * 400 + "</memory>")),
    (parse_host_capabilities, _CELL.format(
        "<pages unit='KB' size='" + "9" * 400 + "'>1</pages>")),
    (parse_host_capabilities, _CELL.format(
        "<memory>" + "9" * 5000 + "</memory>")),
    (parse_host_capabilities, _CELL.format(
        "<cpus><cpu id='" + "1" * 5000 + "'/></cpus>")),
    (parse_host_capabilities, _CELL.format(
        "<cpus><cpu id='0' siblings='" + "1" * 5000 + "'/></cpus>")),
    (parse_host_capabilities, _CELL.format(
        "<cpus><cpu id='0' siblings='0-" + "1" * 5000 + "'/></cpus>")),
    (parse_domain_capabilities, "<domainCapabilities><vcpu max='"
     + "1" * 5000 + "'/></domainCapabilities>"),
    (parse_domain_capabilities, "<domainCapabilities><features><sgx>"
     "<section_size unit='GB'>" + "9" * 400 + "</section_size></sgx>"
     "</features></domainCapabilities>"),
]


@pytest.mark.parametrize("parser, doc", _OVER_LONG_NUMBERS, ids=[
    "memory-bytes-400-digits", "pages-KB-400-digits",
    "memory-5000-digits", "cpu-id-5000-digits", "siblings-5000-digits",
    "siblings-range-5000-digits", "vcpu-max-5000-digits",
    "sgx-section-GB-400-digits"])
def test_over_long_numbers_raise_capability_error(parser, doc):
    _check_parse_or_capability_error("over-long.xml", parser,
                                     doc.encode())


@pytest.mark.parametrize("parser, root", [
    (parse_host_capabilities, "capabilities"),
    (parse_domain_capabilities, "domainCapabilities")])
def test_str_with_lone_surrogate_raises_capability_error(parser, root):
    # What bytes.decode(..., "surrogateescape") makes of an invalid byte.
    doc = f"<{root}><path>\udcff</path></{root}>"
    _check_parse_or_capability_error("over-long.xml", parser, doc)


@needs_corpus
@settings(max_examples=60, deadline=None, derandomize=True, database=None)
@given(index=st.integers(min_value=0, max_value=10 ** 6),
       value=st.sampled_from(VALUES))
def test_every_attribute_value_in_the_corpus_is_guarded(index, value):
    """Replace one attribute of one corpus file with a hostile value."""
    path, parser = CORPUS_FILES[index % len(CORPUS_FILES)]
    data = _BYTES[path]
    found = list(_ATTR.finditer(data))
    assume(found)
    match = found[(index // len(CORPUS_FILES)) % len(found)]
    doc = data[:match.start(3)] + value.encode() + data[match.end(3):]
    _check_parse_or_capability_error(path, parser, doc)
