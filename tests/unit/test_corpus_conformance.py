"""Every real libvirt document in ../shared/corpus parses, with facts per family.

Facts are checked against an independent reading of the same file (plain
lxml, read the obvious way) or against what the file name says it is.
"""

from __future__ import annotations

import pathlib

import pytest
from lxml import etree

from virtdriver.capabilities import (
    parse_domain_capabilities, parse_host_capabilities)
from virtdriver.capabilities.domain import Devices
from virtdriver.cpuset import parse_cpuset

from tests.corpus import corpus_files

HOST_FILES = corpus_files("hostcaps")
DOMAIN_FILES = corpus_files("domcaps")
# Page sizes Linux hosts of the corpus architectures really use, in KiB.
KNOWN_PAGE_SIZES_KIB = {4, 16, 64, 2048, 16384, 32768, 524288, 1048576,
                        2097152, 16777216}


def ids(paths):
    return [p.name for p in paths]


def test_corpus_is_complete(corpus_dir):
    assert len(HOST_FILES) == 40
    assert len(DOMAIN_FILES) == 36


def _host(path: pathlib.Path):
    return parse_host_capabilities(path.read_bytes(), str(path))


def _domain(path: pathlib.Path):
    return parse_domain_capabilities(path.read_bytes(), str(path))


def _file_arch(path: pathlib.Path) -> str | None:
    """The arch a corpus file name states (``qemu_8.2.0.aarch64.xml``)."""
    for part in path.name.replace("+", ".").replace("-", ".").split("."):
        if part in {"x86_64", "aarch64", "ppc64", "s390x", "riscv64",
                    "armv7l", "loongarch64", "ppc", "riscv32", "sparc"}:
            return part
    return None


# ---------------------------------------------------------------- host caps

@pytest.mark.parametrize("path", HOST_FILES, ids=ids(HOST_FILES))
def test_host_numa_cells_account_for_every_cpu(path, corpus_dir):
    caps = _host(path)
    raw = etree.parse(str(path)).getroot()
    cells_el = raw.find("host/topology/cells")
    if cells_el is None:
        assert caps.cells == ()
        return
    assert len(caps.cells) == int(cells_el.get("num"))
    seen: set[int] = set()
    for cell, raw_cell in zip(caps.cells, cells_el.iterfind("cell"), strict=True):
        assert cell.id == int(raw_cell.get("id"))
        assert len(cell.cpus) == int(raw_cell.find("cpus").get("num"))
        assert not seen & cell.cpu_ids, "a CPU is listed in two cells"
        seen |= cell.cpu_ids
        raw_memory = raw_cell.find("memory")
        if raw_memory is None:  # old documents omit it
            assert cell.memory_kib is None
        else:
            assert cell.memory_kib > 0
    assert caps.cpu_ids == seen
    # Every sibling named anywhere is a CPU some cell lists.
    for cell in caps.cells:
        for cpu in cell.cpus:
            assert cpu.siblings <= caps.cpu_ids | {cpu.id}
            assert not cpu.siblings or cpu.id in cpu.siblings


@pytest.mark.parametrize("path", HOST_FILES, ids=ids(HOST_FILES))
def test_host_pages_are_integer_counts_of_kib_sizes(path, corpus_dir):
    caps = _host(path)
    for cell in caps.cells:
        for pages in cell.pages:
            assert isinstance(pages.count, int) and pages.count >= 0
            assert pages.size_kib in KNOWN_PAGE_SIZES_KIB
    assert set(caps.cpu.page_sizes_kib) <= KNOWN_PAGE_SIZES_KIB


@pytest.mark.parametrize("path", HOST_FILES, ids=ids(HOST_FILES))
def test_host_arch_and_guests_match_the_file(path, corpus_dir):
    caps = _host(path)
    raw = etree.parse(str(path)).getroot()
    assert caps.cpu.arch == raw.findtext("host/cpu/arch")
    assert [g.arch for g in caps.guests] == [
        a.get("name") for a in raw.iterfind("guest/arch")]
    if path.name.startswith("caps.") and "+" not in path.name:
        assert caps.cpu.arch == _file_arch(path)
        assert caps.guest_arches[0] == _file_arch(path) or \
            caps.cpu.arch in ("ppc", "riscv32", "sparc", "armv7l")
    for guest in caps.guests:
        assert guest.domain_types, f"{guest.arch} lists no domain type"
        for machine in guest.machines:
            assert machine.name
            if machine.canonical:
                assert machine.canonical in {m.name for m in guest.machines}


def test_real_full_host(corpus_dir):
    caps = _host(corpus_dir / "hostcaps" / "caps-qemu-real-full.xml")
    assert caps.uuid == "29fb382a-ac39-8995-b33c-bcfce7b79434"
    assert (caps.cpu.arch, caps.cpu.model, caps.cpu.vendor) == \
        ("x86_64", "Opteron_G3-v1", "AMD")
    topo = caps.cpu.topology
    assert (topo.sockets, topo.dies, topo.clusters, topo.cores,
            topo.threads) == (1, 1, 1, 16, 2)
    assert {"sha-ni", "pclmuldq", "sse4.1", "avx512f"} <= caps.cpu.features
    assert caps.cpu.page_sizes_kib == (4, 2048, 1048576)
    assert caps.iommu is True
    (cell,) = caps.cells
    assert cell.memory_kib == 63393224
    assert [(p.size_kib, p.count) for p in cell.pages] == \
        [(4, 15848306), (2048, 0), (1048576, 0)]
    assert cell.distances == ((0, 10),)
    cpu16 = next(c for c in cell.cpus if c.id == 16)
    assert (cpu16.socket_id, cpu16.die_id, cpu16.cluster_id,
            cpu16.core_id, cpu16.siblings) == (0, 0, 65535, 0, {0, 16})
    l3 = [b for b in caps.cache if b.level == 3]
    assert [(b.id, b.size_kib, b.cpus) for b in l3] == [
        (0, 32 * 1024, parse_cpuset("0-7,16-23")),
        (1, 32 * 1024, parse_cpuset("8-15,24-31"))]
    arches = caps.guest_arches
    assert "x86_64" in arches and "aarch64" in arches
    x86 = next(g for g in caps.guests if g.arch == "x86_64")
    assert x86.wordsize == 64
    assert x86.emulator == "/usr/bin/qemu-system-x86_64"
    assert set(x86.domain_types) == {"qemu", "kvm"}
    q35 = next(m for m in x86.machines if m.name == "q35")
    assert q35.canonical and q35.canonical.startswith("pc-q35-")
    assert q35.max_cpus and q35.max_cpus >= 255
    assert any(m.deprecated for m in x86.machines)


def test_four_cell_host_with_distances_and_pages(corpus_dir):
    caps = _host(corpus_dir / "hostcaps" / "vircaps-x86_64-basic.xml")
    assert [c.id for c in caps.cells] == [0, 1, 2, 3]
    assert [c.memory_kib for c in caps.cells] == [
        1048576, 2097152, 3145728, 4194304]
    assert caps.cells[1].cpu_ids == {4, 5, 6, 7}
    assert dict((p.size_kib, p.count) for p in caps.cells[0].pages) == {
        4: 2048, 2048: 4096, 1048576: 6144}
    assert caps.iommu is False


def test_dies_and_clusters_are_read(corpus_dir):
    dies = _host(corpus_dir / "hostcaps" / "vircaps-x86_64-basic-dies.xml")
    assert {c.die_id for c in dies.cells[0].cpus} == {0, 1, 2}
    clusters = _host(
        corpus_dir / "hostcaps" / "vircaps-aarch64-basic-clusters.xml")
    assert len({c.cluster_id for cell in clusters.cells
                for c in cell.cpus}) > 1


def test_guest_domain_specific_machines(corpus_dir):
    caps = _host(corpus_dir / "hostcaps" / "caps-test.xml")
    raw = etree.parse(str(corpus_dir / "hostcaps" / "caps-test.xml"))
    for guest, raw_arch in zip(caps.guests, raw.iterfind("guest/arch"), strict=True):
        for domain, raw_domain in zip(guest.domains,
                                      raw_arch.iterfind("domain"), strict=True):
            assert domain.type == raw_domain.get("type")
            assert [m.name for m in domain.machines] == [
                m.text for m in raw_domain.iterfind("machine")]
            assert guest.machines_for(domain.type) == (
                domain.machines or guest.machines)


# -------------------------------------------------------------- domain caps

def _raw_enum(el, name):
    enum = el.find(f"enum[@name='{name}']") if el is not None else None
    return tuple(v.text for v in enum.iterfind("value")) \
        if enum is not None else ()


@pytest.mark.parametrize("path", DOMAIN_FILES, ids=ids(DOMAIN_FILES))
def test_every_device_enum_is_read_from_its_own_element(path, corpus_dir):
    caps = _domain(path)
    raw_devices = etree.parse(str(path)).getroot().find("devices")
    for device in Devices.__dataclass_fields__:
        support = getattr(caps.devices, device)
        raw = raw_devices.find(device) if raw_devices is not None else None
        if raw is None:
            assert support.supported is None
            continue
        assert support.supported == (raw.get("supported") == "yes")
        for enum in raw.iterfind("enum"):
            assert support.values(enum.get("name")) == \
                _raw_enum(raw, enum.get("name"))


@pytest.mark.parametrize("path", DOMAIN_FILES, ids=ids(DOMAIN_FILES))
def test_domain_header_matches_file(path, corpus_dir):
    caps = _domain(path)
    raw = etree.parse(str(path)).getroot()
    assert caps.arch == raw.findtext("arch")
    assert caps.virt_type == raw.findtext("domain")
    assert caps.machine == raw.findtext("machine")
    assert caps.path == raw.findtext("path")
    if _file_arch(path):
        assert caps.arch == _file_arch(path)


X86_Q35 = [p for p in DOMAIN_FILES
           if "q35" in p.name and "x86_64" in p.name]
S390X = [p for p in DOMAIN_FILES if "s390x" in p.name]


@pytest.mark.parametrize("path", X86_Q35, ids=ids(X86_Q35))
def test_x86_q35_offers_sata_and_virtio_disks(path, corpus_dir):
    caps = _domain(path)
    assert caps.machine.startswith("pc-q35-")
    assert {"sata", "virtio"} <= set(caps.disk_buses)
    assert "ide" not in caps.disk_buses  # q35 has no IDE controller
    assert set(caps.os.firmware) == {"bios", "efi"}


@pytest.mark.parametrize("path", S390X, ids=ids(S390X))
def test_s390x_has_no_vga(path, corpus_dir):
    caps = _domain(path)
    assert caps.arch == "s390x"
    assert "vga" not in caps.video_models
    assert "virtio" in caps.video_models


def test_x86_q35_family_is_not_empty(corpus_dir):
    assert len(X86_Q35) >= 7 and len(S390X) >= 3


def test_redirdev_usb_is_not_a_disk_bus(corpus_dir):
    caps = _domain(corpus_dir / "domcaps" / "qemu_6.0.0.s390x.xml")
    assert caps.devices.redirdev.values("bus") == ("usb",)
    assert "usb" not in caps.disk_buses
    assert caps.disk_buses == ("fdc", "scsi", "virtio")


def test_amd_sev_limits(corpus_dir):
    caps = _domain(
        corpus_dir / "domcaps" / "qemu_10.0.0-q35.x86_64+amdsev.xml")
    sev = caps.features.sev
    assert (sev.supported, sev.cbitpos, sev.reduced_phys_bits,
            sev.max_guests, sev.max_es_guests) == (True, 51, 1, 59, 450)
    assert caps.features.launch_security.values("sectype") == \
        ("sev", "sev-snp")
    assert caps.features.tdx.supported is False


def test_intel_tdx(corpus_dir):
    caps = _domain(
        corpus_dir / "domcaps" / "qemu_10.1.0-q35.x86_64+inteltdx.xml")
    assert caps.features.tdx.supported is True
    assert caps.features.launch_security.values("sectype") == ("tdx",)
    assert caps.features.sev.supported is False


def test_sgx_sections(corpus_dir):
    caps = _domain(corpus_dir / "domcaps" / "qemu_11.0.0-q35.x86_64+sgx.xml")
    sgx = caps.features.sgx
    assert (sgx.supported, sgx.flc, sgx.sgx1, sgx.sgx2) == \
        (True, False, True, False)
    assert sgx.section_size_kib == 524288
    assert [(s.node, s.size_kib) for s in sgx.sections] == \
        [(0, 262144), (1, 262144)]


def test_full_q35_document(corpus_dir):
    caps = _domain(
        corpus_dir / "domcaps" / "qemu_11.1.0-q35.x86_64-supported.xml")
    assert caps.key == ("x86_64", "pc-q35-11.1", "kvm")
    assert caps.vcpu_max == 4096 and caps.iothreads is True
    assert caps.os.supported is True
    assert caps.os.loader.paths == ("/obviously/fake/firmware1.fd",
                                    "/obviously/fake/firmware2.fd")
    assert caps.os.loader.types == ("rom", "pflash")
    assert caps.os.loader.secure == ("yes", "no")
    assert caps.os.firmware_features.values("secureBoot") == ("yes", "no")
    hm = caps.cpu.host_model
    assert (hm.supported, hm.model, hm.fallback, hm.vendor) == \
        (True, "EPYC-Turin", "forbid", "AMD")
    assert {"la57", "pcid", "rdseed"} == hm.features_with("disable")
    assert "x2apic" in hm.features_with("require")
    assert caps.cpu.host_passthrough.values("hostPassthroughMigratable") == \
        ("on", "off")
    custom = caps.cpu.custom
    assert custom.supported is True
    assert "486" in custom.usable_models
    broadwell = next(m for m in custom.models if m.name == "Broadwell")
    assert (broadwell.usable, broadwell.vendor, broadwell.canonical) == \
        (False, "Intel", "Broadwell-v1")
    assert caps.memory_backing.values("sourceType") == \
        ("file", "anonymous", "memfd")
    assert caps.tpm_models == ("tpm-tis", "tpm-crb")
    assert caps.tpm_backend_versions == ("2.0",)
    assert caps.devices.filesystem.values("driverType") == \
        ("path", "virtiofs")
    assert caps.devices.interface.values("backendType") == \
        ("default", "passt")
    assert caps.devices.crypto.values("backendModel") == ("builtin", "lkcf")
    assert "qemu-vdagent" in caps.devices.console.values("type")
    assert caps.devices.panic.values("model") == ("isa", "hyperv", "pvpanic")
    assert caps.devices.channel.values("type") == ("pty", "unix", "spicevmc")
    assert caps.graphics_types[:2] == ("sdl", "vnc")
    f = caps.features
    assert f.gic.supported is False and f.vmcoreinfo.supported is True
    assert f.backing_store_input.supported and f.backup.supported
    assert f.async_teardown.supported and f.s390_pv.supported is False
    assert "stimer" in f.hyperv.values("features")


def test_deprecated_and_unknown_usability(corpus_dir):
    caps = _domain(corpus_dir / "domcaps" / "qemu_6.2.0-tcg.x86_64.xml")
    models = caps.cpu.custom.models
    assert any(m.deprecated for m in models)
    raw = etree.parse(str(corpus_dir / "domcaps" /
                          "qemu_6.2.0-tcg.x86_64.xml"))
    unknown = {m.text for m in raw.iterfind(
        "cpu/mode[@name='custom']/model[@usable='unknown']")}
    assert {m.name for m in models if m.usable is None} == unknown


def test_gic_versions(corpus_dir):
    caps = _domain(corpus_dir / "domcaps" / "qemu_4.2.0-virt.aarch64.xml")
    assert caps.features.gic.supported is True
    assert caps.features.gic.values("version")


def test_empty_document_reports_nothing(corpus_dir):
    caps = _domain(corpus_dir / "domcaps" / "empty.xml")
    assert caps.key == ("x86_64", "my-machine-type", "kvm")
    assert caps.disk_buses == () and caps.video_models == ()
    assert caps.devices.disk.supported is None
    assert caps.cpu.host_model.supported is False
    assert caps.os.supported is None and caps.os.firmware == ()
    assert caps.features.sev.supported is False
    assert caps.features.tdx.supported is None  # not reported at all
    assert caps.vcpu_max is None and caps.iothreads is None


def test_non_qemu_documents(corpus_dir):
    bhyve = _domain(corpus_dir / "domcaps" / "bhyve_uefi.x86_64.xml")
    assert bhyve.virt_type == "bhyve" and bhyve.machine is None
    assert bhyve.disk_buses == ("virtio", "sata")
    assert bhyve.devices.disk.values("model") == ()
    assert bhyve.devices.video.supported is False
    assert bhyve.os.loader.paths == ("/foo/bar", "/foo/baz")
    xen = _domain(corpus_dir / "domcaps" / "libxl-xenfv.xml")
    assert xen.virt_type == "xen" and "xen" in xen.disk_buses
