"""The fakelibvirt builders: round trip, libvirt's schemas, real libvirt.

* Round trip: what a builder is told comes back out of our parsers.
* RelaxNG: every shape validates against libvirt 9.0's own schemas
  (``/usr/share/libvirt/schemas``; skipped without them, failed under CI).
* Fidelity: ``test:///default`` and a HostBuilder of the same topology
  parse to the same cells, CPUs, siblings, memory and pages.
"""

from __future__ import annotations

import pathlib

import pytest
from lxml import etree

from virtdriver.capabilities import (
    parse_domain_capabilities, parse_host_capabilities)
from virtdriver.capabilities.host import CellCPU, Pages
from virtdriver.fakelibvirt.builders import (
    SEV, Cell, CPUModelSpec, DomainCapsBuilder, GuestSpec, HostBuilder,
    HostModel, MdevType, host_documents, mdev_device, pci_device)
from virtdriver.fakelibvirt.documents import DomainCapsKey

SCHEMAS = pathlib.Path("/usr/share/libvirt/schemas")

# -- host shapes ---------------------------------------------------------------

HOSTS = {
    "1cell-4c": HostBuilder(cores=4),
    "2cell-ht-offline": HostBuilder(
        cells=2, cores=4, threads=2, memory_mb_per_cell=16384,
        pages={2048: 512, 1048576: 2}, offline_cpus={3, 12},
        cpu_model="Haswell", vendor="Intel", features=("vmx", "aes", "avx2"),
        uuid="2e6a7f4c-1b1e-4d8a-9a8e-0c3c1e2f4a5b", iommu=True),
    "4cell-2socket-aarch64": HostBuilder(
        arch="aarch64", cells=4, sockets_per_cell=2, cores=2, threads=1,
        huge_page_sizes_kib=(2048, 524288, 1048576), pages={524288: 1},
        cpu_model="cortex-a57", features=("fp", "asimd")),
    "3cell-adjacent-ht": HostBuilder(
        cells=3, cores=2, threads=2, numbering="adjacent",
        offline_cpus={5}, cpu_model="EPYC", vendor="AMD",
        distances=((10, 16, 32), (16, 10, 16), (32, 16, 10))),
    "2cell-unequal": HostBuilder(
        cells=[Cell(memory_mb=4096), Cell(memory_mb=8192, pages={2048: 8},
                                          base_page_kib=64)],
        cores=2, guests=[("x86_64", ("kvm",), ("pc", ("q35", "pc-q35-7.2")))]),
}


def _expected_cpus(b: HostBuilder) -> dict[int, tuple[CellCPU, ...]]:
    """What each cell should list, worked out from the knobs alone."""
    cores_total = len(b.cells) * b.sockets_per_cell * b.cores
    by_cell: dict[int, list[CellCPU]] = {i: [] for i in range(len(b.cells))}
    for core in range(cores_total):
        if b.numbering == "interleaved":
            ids = [core + t * cores_total for t in range(b.threads)]
        else:
            ids = [core * b.threads + t for t in range(b.threads)]
        online = frozenset(ids) - b.offline_cpus
        socket = core // b.cores
        for cpu_id in sorted(online):
            by_cell[socket // b.sockets_per_cell].append(
                CellCPU(cpu_id, socket, 0, None, core % b.cores, online))
    return {cell: tuple(sorted(cpus, key=lambda c: c.id))
            for cell, cpus in by_cell.items()}


@pytest.mark.parametrize("shape", sorted(HOSTS))
def test_host_round_trip(shape):
    b = HOSTS[shape]
    caps = parse_host_capabilities(b.to_xml(), source=shape)
    expected = _expected_cpus(b)
    assert [c.id for c in caps.cells] == list(range(len(b.cells)))
    for cell, spec in zip(caps.cells, b.cells, strict=True):
        assert cell.cpus == expected[cell.id]
        memory_kib = (spec.memory_mb or b.memory_mb_per_cell) * 1024
        assert cell.memory_kib == memory_kib
        base = spec.base_page_kib or b.base_page_kib
        reserved = b.pages if spec.pages is None else spec.pages
        sizes = sorted(set(b.huge_page_sizes_kib) | set(reserved))
        # libvirt's base page count is the memory the huge pages leave
        # (virNumaGetPageInfo subtracts them).
        huge_kib = sum(size * count for size, count in reserved.items())
        assert cell.pages == (Pages(base, (memory_kib - huge_kib) // base),
                              ) + tuple(Pages(size, reserved.get(size, 0))
                                        for size in sizes)
    assert caps.cpu_ids.isdisjoint(b.offline_cpus)
    assert caps.cpu.arch == b.arch
    assert caps.cpu.model == b.cpu_model
    assert caps.cpu.vendor == b.vendor
    assert caps.cpu.features == frozenset(b.features)
    assert (caps.cpu.topology.sockets, caps.cpu.topology.cores,
            caps.cpu.topology.threads) == (b.sockets_per_cell, b.cores,
                                           b.threads)
    assert caps.uuid == b.uuid
    assert caps.iommu is b.iommu
    assert caps.guest_arches == tuple(g.arch for g in b.guests)


def test_interleaved_siblings_are_written_like_linux():
    xml = HostBuilder(cells=2, cores=4, threads=2).to_xml()
    assert 'siblings="0,8"' in xml and 'siblings="7,15"' in xml
    caps = parse_host_capabilities(xml)
    assert caps.cell(0).cpu_ids == {0, 1, 2, 3, 8, 9, 10, 11}
    assert caps.cell(1).cpu_ids == {4, 5, 6, 7, 12, 13, 14, 15}


def test_adjacent_siblings_are_a_range():
    xml = HostBuilder(cores=2, threads=2, numbering="adjacent").to_xml()
    assert 'siblings="0-1"' in xml and 'siblings="2-3"' in xml


def test_offline_cpu_leaves_cell_and_sibling_lists():
    # Cell 1 holds cores 2 and 3: threads {2, 6} and {3, 7}; 6 is offline.
    b = HostBuilder(cells=2, cores=2, threads=2, offline_cpus={6})
    xml = b.to_xml()
    assert 'id="6"' not in xml
    assert parse_host_capabilities(xml).cell(1).cpus == (
        CellCPU(2, 1, 0, None, 0, frozenset({2})),
        CellCPU(3, 1, 0, None, 1, frozenset({3, 7})),
        CellCPU(7, 1, 0, None, 1, frozenset({3, 7})))
    assert '<cpus num="3">' in xml and '<cpus num="4">' in xml


def test_cpu_map_and_info_follow_online_cpus():
    b = HostBuilder(cells=2, cores=2, threads=2, offline_cpus={1, 6},
                    memory_mb_per_cell=1024, mhz=3000)
    assert b.cpu_map() == (8, (True, False, True, True,
                               True, True, False, True), 6)
    # 2x1x2x2 is not 6 online CPUs: libvirt reports the topology flat.
    assert b.info() == ("x86_64", 2048, 6, 3000, 1, 1, 6, 1)
    assert HostBuilder(cells=2, cores=2, threads=2).info() == (
        "x86_64", 16384, 8, 2400, 2, 1, 2, 2)


@pytest.mark.parametrize("kwargs, message", [
    ({"offline_cpus": {4}}, "CPUs the host does not have: 4"),
    ({"pages": {1048576: 9}}, "huge pages need"),
    ({"cores": 0}, "cores must be at least 1"),
    ({"numbering": "odd"}, "numbering"),
    ({"cells": 2, "distances": ((10,),)}, "2x2 matrix"),
])
def test_host_builder_refuses_impossible_hosts(kwargs, message):
    with pytest.raises(ValueError, match=message):
        HostBuilder(**{"cores": 4, **kwargs})


def test_xml_special_characters_are_escaped():
    b = HostBuilder(cpu_model="A<&>'\"B", guests=[GuestSpec(
        "x86_64", ("kvm",), ("m<1>",), emulator="/opt/q&q")])
    caps = parse_host_capabilities(b.to_xml())
    assert caps.cpu.model == "A<&>'\"B"
    assert caps.guests[0].emulator == "/opt/q&q"
    assert caps.guests[0].machines[0].name == "m<1>"


# -- domain capabilities shapes ------------------------------------------------

DOMCAPS = {
    "x86-q35-kvm-sev": DomainCapsBuilder(
        "x86_64", "pc-q35-7.2", "kvm",
        sev=SEV(max_guests=509, max_es_guests=0, cbitpos=51),
        host_model=("EPYC-Rome", "AMD", ("x2apic", ("svm", "disable"))),
        custom_models=["qemu64", CPUModelSpec("EPYC", False, "AMD", True)]),
    "x86-pc-qemu-bios": DomainCapsBuilder(
        "x86_64", "pc-i440fx-7.2", "qemu", firmware=("bios",),
        disk_buses=("ide", "virtio"), video_models=("cirrus",),
        tpm_models=(), secure_boot=False),
    "aarch64-virt": DomainCapsBuilder(
        "aarch64", "virt-7.2", "kvm", tpm_versions=("1.2", "2.0"),
        host_model=HostModel("cortex-a72")),
    "x86-no-secure-boot": DomainCapsBuilder(
        "x86_64", "pc-q35-7.2", "kvm", secure_boot=False,
        tpm_models=("tpm-crb",), video_models=("virtio", "none")),
}


@pytest.mark.parametrize("shape", sorted(DOMCAPS))
def test_domcaps_round_trip(shape):
    b = DOMCAPS[shape]
    caps = parse_domain_capabilities(b.to_xml(), source=shape)
    assert caps.key == (b.arch, b.machine, b.virt_type)
    assert caps.path == b.emulator
    assert caps.disk_buses == tuple(b.disk_buses)
    assert caps.video_models == tuple(b.video_models)
    assert caps.devices.disk.supported is bool(b.disk_buses)
    assert caps.os.firmware == tuple(b.firmware)
    efi = "efi" in b.firmware
    assert caps.os.loader.supported is efi
    assert caps.os.loader.paths == (tuple(b.loader_paths) if efi else ())
    assert caps.os.loader.secure == (
        () if not efi else ("yes", "no") if b.secure_boot else ("no",))
    assert caps.tpm_models == tuple(b.tpm_models)
    assert caps.devices.tpm.supported is bool(b.tpm_models)
    assert caps.tpm_backend_versions == (tuple(b.tpm_versions)
                                         if b.tpm_models else ())
    sev = caps.features.sev
    assert sev.supported is (b.sev is not None)
    if b.sev is not None:
        assert (sev.max_guests, sev.max_es_guests, sev.cbitpos,
                sev.reduced_phys_bits) == (
            b.sev.max_guests, b.sev.max_es_guests, b.sev.cbitpos,
            b.sev.reduced_phys_bits)
    host_model = caps.cpu.host_model
    assert host_model.supported is (b.host_model is not None)
    if b.host_model is not None:
        assert host_model.model == b.host_model.model
        assert host_model.vendor == b.host_model.vendor
    assert tuple(m.name for m in caps.cpu.custom.models) == tuple(
        m.name for m in b.custom_models)
    # What libvirt 9.0 does not know stays out.
    assert not caps.features.tdx.reported
    assert not caps.features.launch_security.reported
    assert not caps.os.firmware_features.reported


def test_domcaps_cpu_modes_carry_policies_and_usability():
    caps = parse_domain_capabilities(DOMCAPS["x86-q35-kvm-sev"].to_xml())
    assert caps.cpu.host_model.features_with("require") == {"x2apic"}
    assert caps.cpu.host_model.features_with("disable") == {"svm"}
    assert caps.cpu.custom.usable_models == ("qemu64",)
    epyc = caps.cpu.custom.models[1]
    assert (epyc.vendor, epyc.deprecated, epyc.usable) == ("AMD", True, False)
    assert caps.cpu.host_passthrough.supported is True
    tcg = parse_domain_capabilities(DOMCAPS["x86-pc-qemu-bios"].to_xml())
    assert tcg.cpu.host_passthrough.supported is False


def test_domcaps_newer_knobs_emit_tdx_snp_and_firmware_features():
    b = DomainCapsBuilder(tdx=True, sev=SEV(), sev_snp=True,
                          firmware_features=True)
    caps = parse_domain_capabilities(b.to_xml())
    assert caps.features.tdx.supported is True
    assert caps.features.launch_security.values("sectype") == (
        "sev", "sev-snp", "tdx")
    assert caps.os.firmware_features.values("secureBoot") == ("yes", "no")
    off = parse_domain_capabilities(DomainCapsBuilder(tdx=False).to_xml())
    assert off.features.tdx.supported is False
    assert off.features.launch_security.supported is False


def test_aarch64_defaults_follow_the_arch():
    caps = parse_domain_capabilities(DOMCAPS["aarch64-virt"].to_xml())
    assert caps.os.firmware == ("efi",)
    assert caps.features.gic.values("version") == ("2", "3")
    assert "ide" not in caps.disk_buses
    assert caps.features.hyperv.supported is False
    assert caps.path == "/usr/bin/qemu-system-aarch64"


# -- node devices -------------------------------------------------------------

def _pf():
    return pci_device(
        "0000:81:00.0", 0x8086, 0x10fb, numa_node=1, iommu_group=40,
        vendor_name="Intel Corporation", product_name="82599ES <10G>",
        driver="ixgbe", virtual_functions=("0000:81:10.0", "0000:81:10.2"),
        max_vfs=63)


def _gpu():
    return pci_device(
        "0000:06:00.0", 0x10de, 0x13f2, class_id=0x030000, numa_node=0,
        mdev_types=(MdevType("nvidia-35", "GRID M60-2Q", 4),
                    MdevType("nvidia-36", None, 8)))


NODE_DEVICES = {
    "pf": _pf,
    "vf": lambda: pci_device("0000:81:10.0", 0x8086, 0x10ed,
                             physical_function="0000:81:00.0",
                             iommu_group=41),
    "gpu-mdev-types": _gpu,
    "mdev": lambda: mdev_device("4b20d080-1b54-4048-85b3-a6a62d165c01",
                                "nvidia-35", "0000:06:00.0", iommu_group=7),
}


def test_pci_device_shape():
    device = _pf()
    root = etree.fromstring(device.xml)
    assert device.name == root.findtext("name") == "pci_0000_81_00_0"
    assert device.capabilities == ("pci",)
    cap = root.find("capability[@type='pci']")
    assert [cap.findtext(t) for t in ("domain", "bus", "slot", "function")] \
        == ["0", "129", "0", "0"]
    assert cap.find("vendor").get("id") == "0x8086"
    assert cap.find("product").get("id") == "0x10fb"
    assert cap.findtext("product") == "82599ES <10G>"
    assert cap.find("numa").get("node") == "1"
    vfs = cap.find("capability[@type='virt_functions']")
    assert vfs.get("maxCount") == "63"
    assert [a.get("slot") + "." + a.get("function")
            for a in vfs.iter("address")] == ["0x10.0x0", "0x10.0x2"]
    assert [child.tag for child in cap][-3:] == [
        "capability", "iommuGroup", "numa"]


def test_vf_and_mdev_shapes():
    vf = etree.fromstring(NODE_DEVICES["vf"]().xml)
    pf = vf.find("capability/capability[@type='phys_function']/address")
    assert (pf.get("bus"), pf.get("slot")) == ("0x81", "0x00")
    assert vf.find("capability/numa") is None   # no NUMA node: left out
    gpu = _gpu()
    assert gpu.capabilities == ("pci", "mdev_types")
    types = etree.fromstring(gpu.xml).findall(
        "capability/capability[@type='mdev_types']/type")
    assert [(t.get("id"), t.findtext("availableInstances")) for t in types] \
        == [("nvidia-35", "4"), ("nvidia-36", "8")]
    mdev = NODE_DEVICES["mdev"]()
    assert mdev.name == ("mdev_4b20d080_1b54_4048_85b3_a6a62d165c01"
                         "_0000_06_00_0")
    assert mdev.parent == "pci_0000_06_00_0"
    root = etree.fromstring(mdev.xml)
    assert root.find("capability[@type='mdev']/type").get("id") == "nvidia-35"


def test_bad_pci_address_is_named():
    with pytest.raises(ValueError, match="'81:00.0'.*DDDD:BB:SS.F"):
        pci_device("81:00.0", 1, 2)


# -- host_documents -----------------------------------------------------------

def test_host_documents_keys_and_answers():
    host = HostBuilder(cells=2, cores=2, offline_cpus={3})
    q35 = DomainCapsBuilder("x86_64", "pc-q35-7.2", "kvm")
    pc = DomainCapsBuilder("x86_64", "pc-i440fx-7.2", "kvm")
    tcg = DomainCapsBuilder("x86_64", "pc-i440fx-7.2", "qemu")
    docs = host_documents(host=host, domcaps=[q35, pc, tcg],
                          node_devices=[_pf(), _gpu()], version=8002000)
    keys = docs.domain_capabilities
    assert keys[DomainCapsKey("x86_64", "kvm", None)] == q35.to_xml()
    assert keys[DomainCapsKey("x86_64", "kvm", "pc-i440fx-7.2")] == pc.to_xml()
    assert keys[DomainCapsKey("x86_64", "qemu", None)] == tcg.to_xml()
    assert len(keys) == 5
    assert docs.capabilities == host.to_xml()
    assert docs.cpu_map == (4, (True, True, True, False), 3)
    assert docs.info == host.info()
    assert sorted(docs.node_devices) == ["computer", "pci_0000_06_00_0",
                                         "pci_0000_81_00_0"]
    assert (docs.version, docs.lib_version) == (8002000, 9000000)


def test_host_documents_refuses_what_libvirt_would():
    with pytest.raises(ValueError, match="guests offer only"):
        host_documents(host=HostBuilder(),
                       domcaps=[DomainCapsBuilder("aarch64", "virt", "kvm")])
    with pytest.raises(ValueError, match="two domain capabilities"):
        host_documents(domcaps=[DomainCapsBuilder(), DomainCapsBuilder()])
    with pytest.raises(ValueError, match="two node devices"):
        host_documents(node_devices=[_pf(), _pf()])


# -- libvirt's RelaxNG schemas ------------------------------------------------

@pytest.fixture(scope="module")
def schemas(in_ci):
    names = ("capability.rng", "domaincaps.rng", "nodedev.rng")
    missing = [n for n in names if not (SCHEMAS / n).is_file()]
    if missing:
        message = (f"libvirt's RelaxNG schemas {missing} are not in "
                   f"{SCHEMAS}; Debian's libvirt0 package ships them "
                   "(`./run setup` as root installs it)")
        if in_ci:
            pytest.fail(message)
        pytest.skip(message)
    return {n.split(".")[0]: etree.RelaxNG(file=str(SCHEMAS / n))
            for n in names}


def _assert_valid(schema, xml, what):
    if not schema.validate(etree.fromstring(xml.encode())):
        pytest.fail(f"{what} does not validate: {schema.error_log}\n{xml}")


@pytest.mark.parametrize("shape", sorted(HOSTS))
def test_host_capabilities_validate(schemas, shape):
    _assert_valid(schemas["capability"], HOSTS[shape].to_xml(), shape)


@pytest.mark.parametrize("shape", sorted(DOMCAPS))
def test_domain_capabilities_validate(schemas, shape):
    _assert_valid(schemas["domaincaps"], DOMCAPS[shape].to_xml(), shape)


@pytest.mark.parametrize("shape", sorted(NODE_DEVICES))
def test_node_devices_validate(schemas, shape):
    _assert_valid(schemas["nodedev"], NODE_DEVICES[shape]().xml, shape)


def test_fidelity_host_validates(schemas):
    _assert_valid(schemas["capability"], _test_default_builder().to_xml(),
                  "test:///default builder")


@pytest.mark.parametrize("knob", [
    {"tdx": True}, {"sev_snp": True}, {"firmware_features": True}])
def test_newer_knobs_are_outside_the_90_schema(schemas, knob):
    """Why these knobs are off by default: libvirt 9.0 refuses them."""
    xml = DomainCapsBuilder(**knob).to_xml()
    assert not schemas["domaincaps"].validate(etree.fromstring(xml.encode()))


def test_schema_catches_a_broken_document(schemas):
    """The validation above can fail: a cpu without die_id is refused."""
    xml = HostBuilder().to_xml().replace(' die_id="0"', "", 1)
    assert not schemas["capability"].validate(etree.fromstring(xml.encode()))


# -- fidelity against real libvirt (test:///default) --------------------------

def _test_default_builder() -> HostBuilder:
    """test:///default's host from what libvirt's test driver documents.

    ``src/test/test_driver.c``: 2 NUMA cells, each one socket of 8
    single-threaded cores (16 CPUs); cell *i* has (i+1) × 2 GiB of memory
    and counts it in the *i*-th of the driver's page sizes (4 KiB, then
    8 KiB: a quirk of the test driver), plus 2 MiB and 1 GiB pages with
    none reserved; arch i686, no uuid, no NUMA distances; one ``test``
    guest each of OS types ``hvm`` and ``xen`` running ``/usr/bin/test-hv``.
    """
    guest = dict(arch="i686", domain_types=("test",), machines=(),
                 emulator="/usr/bin/test-hv", features=("pae", "nonpae"))
    return HostBuilder(
        arch="i686", cells=[Cell(memory_mb=2048, base_page_kib=4),
                            Cell(memory_mb=4096, base_page_kib=8)],
        sockets_per_cell=1, cores=8, threads=1,
        huge_page_sizes_kib=(2048, 1048576), distances=False,
        topology=False, migration=False,
        guests=[GuestSpec(os_type="hvm", **guest),
                GuestSpec(os_type="xen", **guest)])


@pytest.fixture(scope="module")
def test_default():
    libvirt = pytest.importorskip("libvirt")
    conn = libvirt.openReadOnly("test:///default")
    try:
        yield conn
    finally:
        conn.close()


def test_fidelity_topology_matches_test_default(test_default):
    real = parse_host_capabilities(test_default.getCapabilities(),
                                   source="test:///default")
    fake = parse_host_capabilities(_test_default_builder().to_xml(),
                                   source="builder")
    assert len(real.cells) == 2 and len(real.cpu_ids) == 16
    assert fake.cells == real.cells      # ids, memory, pages, CPUs, siblings
    assert fake.cpu.arch == real.cpu.arch == "i686"
    assert fake.cpu.page_sizes_kib == real.cpu.page_sizes_kib
    assert fake.guests == real.guests


def test_fidelity_cpu_map_matches_test_default(test_default):
    """test:///default's getCPUMap is not its capabilities' topology.

    The test driver answers getCPUMap from a fixed 8-CPU map with CPUs 0,
    2 and 4 online, whatever its capabilities say (16 online CPUs), and
    its getInfo (2 nodes × 2 sockets × 2 cores × 2 threads, 3 GiB) is
    another fixed answer.  So only the CPU map is compared, against a
    builder of that map's shape: 8 CPUs, all but 0, 2 and 4 offline.
    """
    count, flags, online = test_default.getCPUMap()
    builder = HostBuilder(arch="i686", cores=8,
                          offline_cpus={1, 3, 5, 6, 7})
    assert builder.cpu_map() == (count, tuple(flags), online)
    assert test_default.getInfo()[2] == len(
        _test_default_builder().places())
