"""Trait families derived from domain capabilities, over the real corpus.

Families: storage bus, graphics model, TPM, vIOMMU (devices.py), firmware
and Secure Boot (firmware.py), memory encryption (memory_encryption.py),
plus the static-table families for the virt type (VIF, sound, virtio
packed; guest_models.py).
"""

from __future__ import annotations

import ast
import inspect
import pathlib

import os_traits
import pytest

from virtdriver.capabilities import parse_domain_capabilities
from virtdriver.capabilities.host import HostCapabilities, HostCPU
from virtdriver.capabilities.traits import devices, firmware
from virtdriver.capabilities.traits import guest_models
from virtdriver.capabilities.traits import memory_encryption
from virtdriver.capabilities.traits.config import TraitConfig
from virtdriver.capabilities.traits.model import (
    DerivationInputs, DomainKey, DomainReading, TraitFamily, TraitResult,
    TraitState)
from virtdriver.capabilities.traits.names import is_standard

from tests.corpus import corpus_files

A, U, K = TraitState.ASSERTED, TraitState.UNASSERTED, TraitState.UNKNOWN
DOMAIN_FILES = corpus_files("domcaps")
#: Families that read domain capabilities documents.
DOMAIN_FAMILIES = (devices.STORAGE_BUS, devices.GRAPHICS_MODEL, devices.TPM,
                   devices.VIOMMU, *firmware.FAMILIES,
                   memory_encryption.FAMILY)
ALL_FAMILIES = devices.FAMILIES + guest_models.FAMILIES + (
    *firmware.FAMILIES, memory_encryption.FAMILY)
#: Versions of the libvirt and QEMU the corpus documents come from, roughly.
NEW = {"libvirt_version": 11_000_000, "hypervisor_version": 9_002_000}


def ids(items):
    return [getattr(item, "name", str(item)) for item in items]


def read(path: pathlib.Path, machine: str | None = None) -> DomainReading:
    caps = parse_domain_capabilities(path.read_bytes(), str(path))
    return DomainReading(DomainKey(caps.arch, caps.virt_type,
                                   machine), caps=caps)


def doc(name: str) -> DomainReading:
    return read(next(p for p in DOMAIN_FILES if p.name == name))


def synthetic(devices_xml: str = "", *, arch: str = "x86_64",
              machine: str = "pc-q35-9.0", virt: str = "kvm",
              features: str = "") -> DomainReading:
    """A small document with the given ``<devices>`` children."""
    xml = (f"<domainCapabilities><domain>{virt}</domain>"
           f"<machine>{machine}</machine><arch>{arch}</arch>"
           f"<os supported='yes'/><devices>{devices_xml}</devices>"
           f"<features>{features}</features></domainCapabilities>")
    caps = parse_domain_capabilities(xml, f"synthetic {machine}")
    return DomainReading(DomainKey(arch, virt, machine), caps=caps)


#: A configuration that rules no domain-derived trait out, so the documents
#: alone decide (test_guest_usable_memory_encryption.py covers the options).
OPEN_CONFIG = TraitConfig(virt_type="kvm", cpu_mode="host-passthrough")


def derive(family: TraitFamily, *readings: DomainReading,
           **inputs) -> dict[str, TraitResult]:
    inputs.setdefault("config", OPEN_CONFIG)
    results = list(family.derive(DerivationInputs(domains=readings,
                                                  **inputs)))
    by_trait = {r.trait: r for r in results}
    assert len(by_trait) == len(results), "one result per trait"
    return by_trait


def state(family: TraitFamily, trait: str, *readings: DomainReading,
          **inputs) -> TraitState:
    return derive(family, *readings, **inputs)[trait].state


def text(result: TraitResult) -> str:
    return " | ".join(ev.sentence() for ev in result.evidence)


# ----------------------------------------------------- every family, every doc

@pytest.mark.parametrize("family", ALL_FAMILIES, ids=ids(ALL_FAMILIES))
@pytest.mark.parametrize("path", DOMAIN_FILES, ids=ids(DOMAIN_FILES))
def test_one_result_per_owned_trait_with_evidence(path, family, corpus_dir):
    results = list(family.derive(DerivationInputs(domains=(read(path),),
                                                  **NEW)))

    assert sorted(r.trait for r in results) == sorted(family.traits)
    for result in results:
        assert result.family == family.name
        assert result.evidence, result.trait
        assert all(ev.document and ev.detail for ev in result.evidence)


@pytest.mark.parametrize("family", ALL_FAMILIES, ids=ids(ALL_FAMILIES))
def test_family_traits_are_standard_names(family):
    assert family.traits
    assert all(is_standard(trait) for trait in family.traits)


@pytest.mark.parametrize("module", [devices, guest_models, firmware,
                                    memory_encryption],
                         ids=lambda m: m.__name__.rsplit(".", 1)[-1])
def test_no_standard_name_is_spelled_by_hand(module):
    tree = ast.parse(inspect.getsource(module))
    literals = {node.value for node in ast.walk(tree)
                if isinstance(node, ast.Constant)
                and isinstance(node.value, str)}

    assert not {s for s in literals if is_standard(s)}


@pytest.mark.parametrize("family", DOMAIN_FAMILIES, ids=ids(DOMAIN_FAMILIES))
@pytest.mark.parametrize("path", DOMAIN_FILES, ids=ids(DOMAIN_FILES))
def test_domain_evidence_names_the_document(path, family, corpus_dir):
    reading = read(path)
    for result in derive(family, reading, **NEW).values():
        assert [ev.document for ev in result.evidence] == [reading.label]
        assert result.evidence[0].source == str(path)


# ------------------------------------------------------------ storage, video

INFORMATIVE = [p for p in DOMAIN_FILES if p.name != "empty.xml"]


@pytest.mark.parametrize("path", INFORMATIVE, ids=ids(INFORMATIVE))
def test_asserted_buses_and_video_models_are_exactly_the_listed_ones(
        path, corpus_dir):
    reading = read(path)
    caps = reading.caps
    buses = {b.upper() for b in caps.disk_buses}
    videos = {v.upper() for v in caps.video_models}

    def asserted(family):
        return {t for t, r in derive(family, reading).items()
                if r.state is A}

    assert asserted(devices.STORAGE_BUS) == {
        t for t in os_traits.get_traits("COMPUTE_STORAGE_BUS_")
        if t.rsplit("_", 1)[-1] in buses}
    assert asserted(devices.GRAPHICS_MODEL) == {
        t for t in os_traits.get_traits("COMPUTE_GRAPHICS_MODEL_")
        if t.rsplit("_", 1)[-1] in videos}


X86_Q35 = [p for p in DOMAIN_FILES
           if "q35" in p.name and "x86_64" in p.name]
S390X = [p for p in DOMAIN_FILES if "s390x" in p.name]


@pytest.mark.parametrize("path", X86_Q35, ids=ids(X86_Q35))
def test_q35_asserts_sata(path, corpus_dir):
    result = derive(devices.STORAGE_BUS, read(path))[
        os_traits.COMPUTE_STORAGE_BUS_SATA]

    assert result.state is A
    assert text(result).endswith("kvm) list disk bus 'sata'")
    assert result.evidence[0].element == (
        "devices/disk/enum[@name='bus']/value")


@pytest.mark.parametrize("path", S390X, ids=ids(S390X))
def test_s390x_unasserts_vga(path, corpus_dir):
    result = derive(devices.GRAPHICS_MODEL, read(path))[
        os_traits.COMPUTE_GRAPHICS_MODEL_VGA]

    assert result.state is U
    assert "not 'vga'" in text(result)


def test_x86_q35_and_s390x_documents_exist(corpus_dir):
    assert len(X86_Q35) >= 7 and len(S390X) >= 3


def test_redirdev_usb_does_not_make_a_usb_disk_bus(corpus_dir):
    reading = doc("qemu_6.0.0.s390x.xml")
    assert reading.caps.devices.redirdev.values("bus") == ("usb",)

    assert state(devices.STORAGE_BUS, os_traits.COMPUTE_STORAGE_BUS_USB,
                 reading) is U


def test_bus_listed_by_one_of_two_documents_is_asserted_by_that_one(
        corpus_dir):
    i440fx = doc("qemu_4.2.0.x86_64.xml")    # lists ide
    q35 = read(corpus_dir / "domcaps" / "qemu_8.2.0-q35.x86_64.xml",
               machine="pc-q35-8.2")         # q35 has no IDE
    assert "ide" in i440fx.caps.disk_buses
    assert "ide" not in q35.caps.disk_buses

    result = derive(devices.STORAGE_BUS, q35, i440fx)[
        os_traits.COMPUTE_STORAGE_BUS_IDE]

    assert result.state is A
    assert [ev.document for ev in result.evidence] == [i440fx.label]
    assert text(result) == (
        "domain capabilities (x86_64, pc-i440fx-4.2, kvm) list disk bus "
        "'ide'")


def test_bus_listed_by_neither_document_names_both(corpus_dir):
    first, second = doc("qemu_8.2.0-q35.x86_64.xml"), doc(
        "qemu_11.0.0-q35.x86_64+sgx.xml")

    result = derive(devices.STORAGE_BUS, first, second)[
        os_traits.COMPUTE_STORAGE_BUS_IDE]

    assert result.state is U
    assert [ev.document for ev in result.evidence] == [first.label,
                                                      second.label]
    assert result.evidence[0].detail.startswith("list disk buses fdc, ")
    assert result.evidence[0].detail.endswith("but not 'ide'")


# ------------------------------------------------------- unread and empty

def test_empty_document_leaves_every_domain_trait_unknown(corpus_dir):
    reading = doc("empty.xml")
    for family in DOMAIN_FAMILIES:
        for result in derive(family, reading, **NEW).values():
            assert result.state is K, result
            assert "report nothing about guests" in text(result)


def test_unread_document_leaves_every_domain_trait_unknown():
    error = "VIR_ERR_NO_SUPPORT: this function is not supported by the " \
            "connection driver: virConnectGetDomainCapabilities"
    reading = DomainReading(DomainKey("x86_64", "lxc"), error=error)
    for family in DOMAIN_FAMILIES:
        for result in derive(family, reading, **NEW).values():
            assert result.state is K, result
            assert error in text(result)


def test_unread_document_does_not_hide_what_another_shows(corpus_dir):
    unread = DomainReading(DomainKey("x86_64", "kvm", "pc-q35-9.0"),
                           error="VIR_ERR_INTERNAL_ERROR: no QEMU")
    q35 = doc("qemu_8.2.0-q35.x86_64.xml")
    results = derive(devices.STORAGE_BUS, unread, q35)

    assert results[os_traits.COMPUTE_STORAGE_BUS_SATA].state is A
    assert results[os_traits.COMPUTE_STORAGE_BUS_IDE].state is K


# -------------------------------------------------------------------- TPM

TPM_TRAITS = (os_traits.COMPUTE_SECURITY_TPM_TIS,
              os_traits.COMPUTE_SECURITY_TPM_CRB,
              os_traits.COMPUTE_SECURITY_TPM_1_2,
              os_traits.COMPUTE_SECURITY_TPM_2_0)


def tpm_states(*readings):
    results = derive(devices.TPM, *readings)
    return tuple(results[t].state for t in TPM_TRAITS)


def test_tpm_with_swtpm_models_and_versions(corpus_dir):
    assert tpm_states(doc("qemu_8.2.0-q35.x86_64.xml")) == (A, A, U, A)
    assert tpm_states(doc("qemu_6.2.0-tcg.x86_64.xml")) == (A, A, A, A)
    # ppc64 has tpm-spapr only: a TPM 2.0 guest, neither TIS nor CRB.
    assert tpm_states(doc("qemu_10.0.0.ppc64.xml")) == (U, U, U, A)


def test_tpm_unsupported_or_unreported(corpus_dir):
    assert tpm_states(doc("qemu_11.1.0.s390x.xml")) == (U, U, U, U)
    assert tpm_states(doc("qemu_4.2.0.x86_64.xml")) == (K, K, K, K)


def test_tpm_without_emulator_backend_is_unasserted():
    # What libvirt 9.0 reports on a host without swtpm installed.
    reading = synthetic(
        "<tpm supported='yes'><enum name='model'><value>tpm-tis</value>"
        "<value>tpm-crb</value></enum><enum name='backendModel'>"
        "<value>passthrough</value></enum></tpm>")

    results = derive(devices.TPM, reading)

    assert tuple(results[t].state for t in TPM_TRAITS) == (U, U, U, U)
    assert "not 'emulator' (swtpm is missing)" in text(
        results[os_traits.COMPUTE_SECURITY_TPM_TIS])


def test_tpm_emulator_without_versions_leaves_versions_unknown():
    reading = synthetic(
        "<tpm supported='yes'><enum name='model'><value>tpm-crb</value>"
        "</enum><enum name='backendModel'><value>emulator</value></enum>"
        "</tpm>")

    assert tpm_states(reading) == (U, A, K, K)


# ----------------------------------------------------------------- vIOMMU

def iommu_states(*readings, **inputs):
    results = derive(devices.VIOMMU, *readings, **inputs)
    return {trait.rsplit("_", 1)[-1]: results[trait].state
            for trait in results}


def test_reported_iommu_models_are_read_and_win_over_the_fallback():
    reading = synthetic("<iommu supported='yes'><enum name='model'>"
                        "<value>virtio</value></enum></iommu>")
    assert reading.caps.devices.iommu.values("model") == ("virtio",)

    assert iommu_states(reading, libvirt_version=None) == {
        "INTEL": U, "SMMUV3": U, "VIRTIO": A, "AUTO": A}


def test_unsupported_iommu_unasserts_every_model():
    reading = synthetic("<iommu supported='no'/>")

    assert iommu_states(reading) == {
        "INTEL": U, "SMMUV3": U, "VIRTIO": U, "AUTO": U}


def test_fallback_on_q35_depends_on_libvirt_for_virtio(corpus_dir):
    q35 = doc("qemu_8.2.0-q35.x86_64.xml")
    assert not q35.caps.devices.iommu.reported

    assert iommu_states(q35, libvirt_version=8_003_000) == {
        "INTEL": A, "SMMUV3": U, "VIRTIO": A, "AUTO": A}
    assert iommu_states(q35, libvirt_version=8_002_000)["VIRTIO"] is U
    assert iommu_states(q35, libvirt_version=None)["VIRTIO"] is K


def test_fallback_on_i440fx_and_arm_boards(corpus_dir):
    i440fx = doc("qemu_4.2.0.x86_64.xml")
    board = doc("qemu_2.6.0.aarch64.xml")           # integratorcp
    virt = doc("qemu_11.0.0-virt.aarch64.xml")

    assert iommu_states(i440fx, **NEW) == {
        "INTEL": U, "SMMUV3": U, "VIRTIO": U, "AUTO": U}
    assert iommu_states(board, **NEW)["AUTO"] is U
    assert iommu_states(virt, **NEW) == {
        "INTEL": U, "SMMUV3": A, "VIRTIO": A, "AUTO": A}


def test_fallback_has_no_rule_for_xen(corpus_dir):
    results = derive(devices.VIOMMU, doc("libxl-xenfv.xml"))

    assert {r.state for r in results.values()} == {K}
    assert "no fallback rule for virt type 'xen'" in text(
        results[os_traits.COMPUTE_VIOMMU_MODEL_INTEL])


# --------------------------------------------------------------- firmware

FW = (os_traits.COMPUTE_FIRMWARE_UEFI, os_traits.COMPUTE_FIRMWARE_BIOS)


def fw_states(reading):
    results = derive(firmware.FIRMWARE, reading)
    return tuple(results[t].state for t in FW)


@pytest.mark.parametrize(("name", "expected"), [
    ("qemu_8.2.0-q35.x86_64.xml", (A, A)),
    ("qemu_10.2.0.aarch64.xml", (A, U)),       # lists efi only
    ("qemu_10.0.0.ppc64.xml", (K, K)),         # empty firmware enum
    ("libxl-xenfv.xml", (K, K)),               # no enum, loader paths only
    ("bhyve_basic.x86_64.xml", (U, K)),        # no enum, loader unsupported
])
def test_firmware_rule(name, expected, corpus_dir):
    assert fw_states(doc(name)) == expected


def test_firmware_evidence_reads_as_a_sentence(corpus_dir):
    result = derive(firmware.FIRMWARE, doc("qemu_10.2.0.aarch64.xml"))[
        os_traits.COMPUTE_FIRMWARE_BIOS]

    assert text(result) == ("domain capabilities (aarch64, virt-10.2, kvm) "
                            "list firmware efi but not 'bios'")


@pytest.mark.parametrize(("name", "expected", "words"), [
    ("qemu_8.2.0-q35.x86_64.xml", A, "list loader secure 'yes'"),
    ("qemu_11.0.0-virt.aarch64.xml", A,
     "list firmware feature secureBoot 'yes'"),
    ("qemu_10.2.0.aarch64.xml", U, "list only loader secure 'no' and "
     "firmware feature secureBoot 'no', not 'yes'"),
    ("bhyve_basic.x86_64.xml", U, "mark <loader> unsupported"),
    ("libxl-xenfv.xml", K, "list neither loader secure nor firmware"),
])
def test_secure_boot_rule(name, expected, words, corpus_dir):
    result = derive(firmware.SECURE_BOOT, doc(name))[
        os_traits.COMPUTE_SECURITY_UEFI_SECURE_BOOT]

    assert result.state is expected
    assert words in text(result)


def test_secure_boot_from_firmware_features_alone(corpus_dir):
    caps = doc("qemu_11.0.0-virt.aarch64.xml").caps
    assert "yes" not in caps.os.loader.secure
    assert "yes" in caps.os.firmware_features.values("secureBoot")


# ------------------------------------------------------ memory encryption

ME = (os_traits.HW_CPU_X86_AMD_SEV, os_traits.HW_CPU_X86_AMD_SEV_ES,
      os_traits.HW_CPU_X86_AMD_SEV_SNP, os_traits.HW_CPU_X86_INTEL_TDX)


def me_states(reading):
    results = derive(memory_encryption.FAMILY, reading)
    return tuple(results[t].state for t in ME)


def test_amd_sev_with_limits(corpus_dir):
    results = derive(memory_encryption.FAMILY,
                     doc("qemu_10.0.0-q35.x86_64+amdsev.xml"))

    assert tuple(results[t].state for t in ME) == (A, A, A, U)
    assert text(results[os_traits.HW_CPU_X86_AMD_SEV]).endswith(
        "mark <sev> supported: up to 59 SEV guests, 450 SEV-ES guests, "
        "C-bit position 51, 1 reduced physical address bit")
    assert "list launch security type 'sev-snp'" in text(
        results[os_traits.HW_CPU_X86_AMD_SEV_SNP])


def test_old_sev_document_leaves_es_and_snp_unknown(corpus_dir):
    # libvirt of QEMU 2.12 reported SEV without maxESGuests or launchSecurity.
    assert me_states(doc("qemu_2.12.0-q35.x86_64.xml")) == (A, K, K, K)


@pytest.mark.parametrize("name", ["qemu_10.1.0-q35.x86_64+inteltdx.xml",
                                  "qemu_10.1.0-q35.x86_64+inteltdx-expanded.xml"])
def test_intel_tdx(name, corpus_dir):
    results = derive(memory_encryption.FAMILY, doc(name))

    assert tuple(results[t].state for t in ME) == (U, U, U, A)
    assert text(results[os_traits.HW_CPU_X86_INTEL_TDX]).endswith(
        "mark <tdx> supported and list launch security type 'tdx'")


def test_s390_protected_virtualisation_is_no_x86_encryption(corpus_dir):
    assert me_states(doc("qemu_11.1.0.s390x.xml")) == (U, U, U, U)


def test_sev_with_no_guest_slots_is_unasserted():
    reading = synthetic(features="<sev supported='yes'><cbitpos>51</cbitpos>"
                        "<maxGuests>0</maxGuests><maxESGuests>0"
                        "</maxESGuests></sev>")

    assert me_states(reading)[:2] == (U, U)


# ---------------------------------------------- static tables for virt type

def host(arch: str) -> HostCapabilities:
    return HostCapabilities(source="host", cpu=HostCPU(arch=arch))


def table(family, trait, virt="kvm", arch="x86_64", **versions):
    inputs = {"config": TraitConfig(virt_type=virt), "host": host(arch),
              **versions}
    return derive(family, **inputs)[trait]


def test_vif_model_evidence_names_the_option_and_table():
    result = table(guest_models.VIF_MODEL,
                   os_traits.COMPUTE_NET_VIF_MODEL_VIRTIO)

    assert result.state is A
    assert text(result) == (
        "config [libvirt] virt_type = kvm: x86_64 guests can use VIF model "
        "'virtio' (virtdriver's table of NIC models)")


@pytest.mark.parametrize(("virt", "arch", "trait", "expected"), [
    ("kvm", "x86_64", os_traits.COMPUTE_NET_VIF_MODEL_E1000E, A),
    ("kvm", "x86_64", os_traits.COMPUTE_NET_VIF_MODEL_SPAPR_VLAN, U),
    ("kvm", "x86_64", os_traits.COMPUTE_NET_VIF_MODEL_NETFRONT, U),
    ("kvm", "ppc64le", os_traits.COMPUTE_NET_VIF_MODEL_SPAPR_VLAN, A),
    ("kvm", "s390x", os_traits.COMPUTE_NET_VIF_MODEL_E1000, U),
    ("xen", "x86_64", os_traits.COMPUTE_NET_VIF_MODEL_NETFRONT, A),
    ("xen", "x86_64", os_traits.COMPUTE_NET_VIF_MODEL_VIRTIO, U),
    ("lxc", "x86_64", os_traits.COMPUTE_NET_VIF_MODEL_VIRTIO, U),
    ("bhyve", "x86_64", os_traits.COMPUTE_NET_VIF_MODEL_VIRTIO, K),
])
def test_vif_model_table(virt, arch, trait, expected):
    assert table(guest_models.VIF_MODEL, trait, virt, arch).state is expected


def test_igb_needs_new_libvirt_and_qemu():
    igb = os_traits.COMPUTE_NET_VIF_MODEL_IGB

    assert table(guest_models.VIF_MODEL, igb, libvirt_version=9_003_000,
                 hypervisor_version=8_000_000).state is A
    old = table(guest_models.VIF_MODEL, igb, libvirt_version=9_003_000,
                hypervisor_version=7_002_000)
    assert old.state is U
    assert "needs libvirt >= 9.3.0 and QEMU >= 8.0.0, but this host has " \
           "libvirt 9.3.0, QEMU 7.2.0" in text(old)
    assert table(guest_models.VIF_MODEL, igb).state is K


def test_table_uses_every_counted_arch():
    spapr = os_traits.COMPUTE_NET_VIF_MODEL_SPAPR_VLAN
    x86 = DomainReading(DomainKey("x86_64", "kvm"), error="unread")
    ppc = DomainReading(DomainKey("ppc64", "kvm"), error="unread")

    result = derive(guest_models.VIF_MODEL, x86, ppc)[spapr]

    assert result.state is A
    assert "ppc64 guests can use VIF model 'spapr-vlan'" in text(result)


def test_table_without_any_arch_is_unknown():
    results = derive(guest_models.VIF_MODEL)

    assert {r.state for r in results.values()} == {K}


@pytest.mark.parametrize(("arch", "trait", "expected"), [
    ("x86_64", os_traits.COMPUTE_SOUND_MODEL_PCSPK, A),
    ("x86_64", os_traits.COMPUTE_SOUND_MODEL_ICH9, A),
    ("aarch64", os_traits.COMPUTE_SOUND_MODEL_PCSPK, U),
    ("aarch64", os_traits.COMPUTE_SOUND_MODEL_USB, A),
    ("s390x", os_traits.COMPUTE_SOUND_MODEL_AC97, U),
])
def test_sound_model_table(arch, trait, expected):
    assert table(guest_models.SOUND_MODEL, trait, arch=arch).state is expected


def test_virtio_sound_needs_new_libvirt_and_qemu():
    virtio = os_traits.COMPUTE_SOUND_MODEL_VIRTIO

    assert table(guest_models.SOUND_MODEL, virtio, libvirt_version=10_004_000,
                 hypervisor_version=8_002_000).state is A
    assert table(guest_models.SOUND_MODEL, virtio, libvirt_version=10_003_000,
                 hypervisor_version=9_000_000).state is U
    assert table(guest_models.SOUND_MODEL, virtio, virt="xen").state is K


@pytest.mark.parametrize(("virt", "versions", "expected"), [
    ("kvm", (6_003_000, 4_002_000), A),
    ("qemu", (6_002_000, 5_000_000), U),
    ("kvm", (9_000_000, 4_001_000), U),
    ("kvm", (None, 4_002_000), K),
    ("lxc", (9_000_000, None), U),
    ("xen", (9_000_000, 4_017_000), K),
])
def test_virtio_packed(virt, versions, expected):
    libvirt_version, qemu_version = versions
    result = table(guest_models.VIRTIO_PACKED,
                   os_traits.COMPUTE_NET_VIRTIO_PACKED,
                   virt, libvirt_version=libvirt_version,
                   hypervisor_version=qemu_version)

    assert result.state is expected
    assert text(result).startswith(f"config [libvirt] virt_type = {virt}:")


def test_version_text():
    assert guest_models.version_text(10_004_001) == "10.4.1"
