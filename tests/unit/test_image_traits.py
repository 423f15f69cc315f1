"""image_traits: every property of the table, how values are normalised,
the refusals, and a property test that every name is one os-traits (or
CUSTOM_) knows."""

from __future__ import annotations

import os_traits
import pytest
from hypothesis import given
from hypothesis import strategies as st

from virtdriver.claims import image_traits as it
from virtdriver.claims.image_traits import (
    FORBIDDEN, REQUIRED, ImageTraits, InvalidImage, image_traits,
    image_traits_or_raise)

STANDARD = frozenset(os_traits.get_traits())


def only(found: ImageTraits):
    assert found.problems == ()
    (trait,) = found.traits
    return trait


def problem(found: ImageTraits) -> str:
    assert found.traits == () or found.problems
    (message,) = [p.message for p in found.problems]
    return message


# -- one example per row (the docs/claims.md table) --------------------------

ROWS = [
    ({"hw_disk_bus": "scsi"}, None, os_traits.COMPUTE_STORAGE_BUS_SCSI),
    ({"hw_cdrom_bus": "sata"}, None, os_traits.COMPUTE_STORAGE_BUS_SATA),
    ({"hw_video_model": "virtio"}, None,
     os_traits.COMPUTE_GRAPHICS_MODEL_VIRTIO),
    ({"hw_vif_model": "e1000e"}, None, os_traits.COMPUTE_NET_VIF_MODEL_E1000E),
    ({"hw_viommu_model": "intel"}, None,
     os_traits.COMPUTE_VIOMMU_MODEL_INTEL),
    ({"hw_architecture": "x86_64"}, None, os_traits.HW_ARCH_X86_64),
    ({"hw_emulation_architecture": "aarch64"}, None,
     os_traits.COMPUTE_ARCH_AARCH64),
    ({"hw_sound_model": "virtio"}, None, os_traits.COMPUTE_SOUND_MODEL_VIRTIO),
    ({}, "qcow2", os_traits.COMPUTE_IMAGE_TYPE_QCOW2),
    ({"hw_virtio_packed_ring": "true"}, None,
     os_traits.COMPUTE_NET_VIRTIO_PACKED),
    ({"os_secure_boot": "required"}, None,
     os_traits.COMPUTE_SECURITY_UEFI_SECURE_BOOT),
    ({"hw_firmware_type": "uefi"}, None, os_traits.COMPUTE_FIRMWARE_UEFI),
    ({"hw_firmware_type": "bios"}, None, os_traits.COMPUTE_FIRMWARE_BIOS),
    ({"trait:CUSTOM_GOLD": "required"}, None, "CUSTOM_GOLD"),
]


@pytest.mark.parametrize("props, disk_format, trait", ROWS)
def test_each_row_implies_its_trait_with_the_property_as_evidence(
        props, disk_format, trait):
    found = only(image_traits(props, disk_format))
    assert (found.trait, found.requirement) == (trait, REQUIRED)
    key, value = (next(iter(props.items())) if props
                  else ("disk_format", disk_format))
    assert found.implied_by == f"{key}={value!r}"


@pytest.mark.parametrize("choice", it.CHOICES, ids=lambda c: c.key)
def test_every_value_of_every_choice_yields_its_os_traits_name(choice):
    traits = set()
    for value in choice.valid():
        found = only(image_traits({}, value) if choice.key == "disk_format"
                     else image_traits({choice.key: value}))
        assert found.trait in STANDARD
        assert found.trait.startswith(choice.prefix)
        traits.add(found.trait)
    # Every trait of the family is reachable, each by one value.
    assert traits == set(os_traits.get_traits(choice.prefix))
    assert len(traits) == len(choice.valid())


def test_tpm_version_and_model():
    found = image_traits({"hw_tpm_version": "2.0", "hw_tpm_model": "tpm-crb"})
    assert found.problems == ()
    assert found.required == {os_traits.COMPUTE_SECURITY_TPM_2_0,
                              os_traits.COMPUTE_SECURITY_TPM_CRB}
    # A version alone gets Nova's default model, and says so.
    found = image_traits({"hw_tpm_version": "1.2"})
    assert found.required == {os_traits.COMPUTE_SECURITY_TPM_1_2,
                              os_traits.COMPUTE_SECURITY_TPM_TIS}
    assert "hw_tpm_model unset: tpm-tis" in found.implied_by(
        os_traits.COMPUTE_SECURITY_TPM_TIS)


@pytest.mark.parametrize("props, says, named", [
    ({"hw_tpm_model": "tpm-tis"}, "without hw_tpm_version",
     "hw_tpm_model='tpm-tis'"),
    ({"hw_tpm_version": "1.2", "hw_tpm_model": "tpm-crb"}, "needs TPM 2.0",
     "hw_tpm_version='1.2'"),
    ({"hw_tpm_version": "3.0"}, "use one of 1.2, 2.0",
     "hw_tpm_version='3.0'"),
    # A model is no version, though both share COMPUTE_SECURITY_TPM_.
    ({"hw_tpm_version": "tpm-crb"}, "use one of 1.2, 2.0",
     "hw_tpm_version='tpm-crb'"),
    ({"hw_tpm_version": "2.0", "hw_tpm_model": "2.0"},
     "use one of tpm-tis, tpm-crb", "hw_tpm_model='2.0'"),
])
def test_tpm_refusals(props, says, named):
    found = image_traits(props)
    message = problem(found)
    assert says in message and named in message
    assert found.traits == ()


@pytest.mark.parametrize("props, trait", [
    ({"hw_mem_encryption": "true"}, os_traits.HW_CPU_X86_AMD_SEV),
    ({"hw_mem_encryption": "True", "hw_mem_encryption_model": "amd-sev-es"},
     os_traits.HW_CPU_X86_AMD_SEV_ES),
    ({"hw_mem_encryption": "yes", "hw_mem_encryption_model": "AMD-SEV-SNP"},
     os_traits.HW_CPU_X86_AMD_SEV_SNP),
    ({"hw_mem_encryption": True, "hw_mem_encryption_model": "intel-tdx"},
     os_traits.HW_CPU_X86_INTEL_TDX),
])
def test_memory_encryption_models(props, trait):
    assert only(image_traits(props)).trait == trait


@pytest.mark.parametrize("props, says", [
    ({"hw_mem_encryption_model": "amd-sev"}, "without hw_mem_encryption=true"),
    ({"hw_mem_encryption": "false", "hw_mem_encryption_model": "amd-sev"},
     "without hw_mem_encryption=true"),
    ({"hw_mem_encryption": "true", "hw_mem_encryption_model": "arm-cca"},
     "use one of amd-sev, amd-sev-es, amd-sev-snp, intel-tdx"),
    ({"hw_mem_encryption": "sometimes"}, "use one of true, false"),
])
def test_memory_encryption_refusals(props, says):
    assert says in problem(image_traits(props))


@pytest.mark.parametrize("props", [
    {"hw_virtio_packed_ring": "false"}, {"os_secure_boot": "optional"},
    {"os_secure_boot": "disabled"}, {"hw_mem_encryption": "no"},
    {"hw_machine_type": "q35"}, {"os_distro": "fedora"}, {},
])
def test_properties_that_ask_for_no_trait(props):
    found = image_traits(props)
    assert found == ImageTraits() and found.query() == ""


# -- normalisation -----------------------------------------------------------

@pytest.mark.parametrize("key, written, trait", [
    ("hw_video_model", "VirtIO", os_traits.COMPUTE_GRAPHICS_MODEL_VIRTIO),
    ("hw_video_model", " virtio ", os_traits.COMPUTE_GRAPHICS_MODEL_VIRTIO),
    ("hw_disk_bus", "SCSI", os_traits.COMPUTE_STORAGE_BUS_SCSI),
    ("hw_vif_model", "E1000e", os_traits.COMPUTE_NET_VIF_MODEL_E1000E),
    ("hw_vif_model", "spapr-vlan", os_traits.COMPUTE_NET_VIF_MODEL_SPAPR_VLAN),
    ("hw_vif_model", "spapr_vlan", os_traits.COMPUTE_NET_VIF_MODEL_SPAPR_VLAN),
    ("hw_vif_model", "ne2k_pci", os_traits.COMPUTE_NET_VIF_MODEL_NE2K_PCI),
    ("hw_vif_model", "ne2k-pci", os_traits.COMPUTE_NET_VIF_MODEL_NE2K_PCI),
    ("hw_vif_model", "VirtualE1000", os_traits.COMPUTE_NET_VIF_MODEL_E1000),
    ("hw_vif_model", "VirtualVmxnet3", os_traits.COMPUTE_NET_VIF_MODEL_VMXNET3),
    ("hw_architecture", "X86_64", os_traits.HW_ARCH_X86_64),
    ("hw_architecture", "x86-64", os_traits.HW_ARCH_X86_64),
    ("hw_architecture", "amd64", os_traits.HW_ARCH_X86_64),
    ("hw_architecture", "i386", os_traits.HW_ARCH_I686),
    ("hw_architecture", "armv7l", os_traits.HW_ARCH_ARMV7),
    ("hw_emulation_architecture", "AMD64", os_traits.COMPUTE_ARCH_X86_64),
    ("hw_viommu_model", "SMMUv3", os_traits.COMPUTE_VIOMMU_MODEL_SMMUV3),
    ("hw_firmware_type", "UEFI", os_traits.COMPUTE_FIRMWARE_UEFI),
    ("hw_tpm_version", "2", os_traits.COMPUTE_SECURITY_TPM_2_0),
    ("hw_tpm_version", 2.0, os_traits.COMPUTE_SECURITY_TPM_2_0),
    ("hw_tpm_version", "1.2", os_traits.COMPUTE_SECURITY_TPM_1_2),
    ("hw_virtio_packed_ring", "YES", os_traits.COMPUTE_NET_VIRTIO_PACKED),
    ("hw_virtio_packed_ring", True, os_traits.COMPUTE_NET_VIRTIO_PACKED),
    ("os_secure_boot", "Required", os_traits.COMPUTE_SECURITY_UEFI_SECURE_BOOT),
    ("disk_format", "QCOW2", os_traits.COMPUTE_IMAGE_TYPE_QCOW2),
])
def test_values_are_read_as_users_write_them(key, written, trait):
    found = (image_traits({}, written) if key == "disk_format"
             else image_traits({key: written}))
    assert trait in found.required, found.problems
    assert found.implied_by(trait).startswith(f"{key}={written!r}")


@pytest.mark.parametrize("key, typo", [
    ("hw_disk_bus", "scsii"), ("hw_disk_bus", "nvme"),
    ("hw_video_model", "tpi"), ("hw_vif_model", "e1000ee"),
    ("hw_architecture", "arm64"), ("hw_viommu_model", "amd"),
    ("hw_emulation_architecture", "sparc"), ("hw_firmware_type", "efi"),
    ("hw_sound_model", "hda"), ("disk_format", "docker"),
    ("os_secure_boot", "yes"), ("hw_virtio_packed_ring", "packed"),
])
def test_a_value_with_no_trait_is_refused_naming_the_valid_ones(key, typo):
    found = (image_traits({}, typo) if key == "disk_format"
             else image_traits({key: typo}))
    assert found.traits == ()
    message = problem(found)
    assert message.startswith(f"image {key}={typo!r} ")
    assert "; use one of " in message
    valid = message.split("; use one of ")[1].split(", ")
    assert typo not in valid and len(valid) >= 2
    # Every value the message offers is accepted.
    for value in valid:
        fixed = (image_traits({}, value) if key == "disk_format"
                 else image_traits({key: value}))
        assert fixed.problems == (), value


def test_a_value_that_is_not_text_is_refused():
    assert "is not a string" in problem(image_traits({"hw_disk_bus": ["a"]}))


# -- explicit trait: properties, folded --------------------------------------

def test_explicit_and_implied_traits_fold_into_one_set():
    found = image_traits({"hw_disk_bus": "virtio", "hw_cdrom_bus": "virtio",
                          "trait:COMPUTE_STORAGE_BUS_VIRTIO": "required",
                          "trait:CUSTOM_GOLD": "forbidden"})
    assert found.required == {os_traits.COMPUTE_STORAGE_BUS_VIRTIO}
    assert found.forbidden == {"CUSTOM_GOLD"}
    # One trait, every property that asked for it.
    bus = found.get(os_traits.COMPUTE_STORAGE_BUS_VIRTIO)
    assert [s.key for s in bus.sources] == [
        "hw_disk_bus", "hw_cdrom_bus", "trait:COMPUTE_STORAGE_BUS_VIRTIO"]
    assert found.query() == (
        f"required={os_traits.COMPUTE_STORAGE_BUS_VIRTIO},!CUSTOM_GOLD")


def test_an_implied_trait_the_image_forbids_is_a_problem():
    bus = os_traits.COMPUTE_STORAGE_BUS_IDE
    message = problem(image_traits({"hw_disk_bus": "ide",
                                    f"trait:{bus}": "forbidden"}))
    assert "hw_disk_bus='ide'" in message and f"trait:{bus}=" in message
    assert f"both require and forbid {bus}" in message


@pytest.mark.parametrize("props, says", [
    ({"trait:NOT_A_TRAIT": "required"}, "neither an os-traits"),
    ({"trait:CUSTOM_X": "please"}, "use one of required, forbidden"),
])
def test_bad_explicit_traits_are_problems(props, says):
    assert says in problem(image_traits(props))



def test_image_traits_or_raise():
    assert image_traits_or_raise({"hw_disk_bus": "ide"}).required == {
        os_traits.COMPUTE_STORAGE_BUS_IDE}
    with pytest.raises(InvalidImage, match="hw_disk_bus='idee'"):
        image_traits_or_raise({"hw_disk_bus": "idee"})


def test_json_form():
    found = image_traits({"hw_tpm_version": "2.0",
                          "trait:CUSTOM_X": "forbidden"}, "raw")
    data = found.to_json()
    assert data["forbidden"] == ["CUSTOM_X"]
    assert data["query"] == found.query()
    assert data["query"].endswith(",!CUSTOM_X")
    tis = next(t for t in data["traits"]
               if t["trait"] == os_traits.COMPUTE_SECURITY_TPM_TIS)
    assert tis["implied_by"] == [{"property": "hw_tpm_version",
                                  "value": "2.0",
                                  "note": "hw_tpm_model unset: tpm-tis"}]
    assert [t["requirement"] for t in data["traits"]][-1] == FORBIDDEN


# -- property test -----------------------------------------------------------

_KEYS = sorted(it.KEYS | {"trait:CUSTOM_A", "trait:HW_CPU_X86_AVX",
                          "trait:NOPE", "os_distro"})
_ACCEPTED = {c.key: c.valid() for c in it.CHOICES}
_WORDS = sorted({v for values in _ACCEPTED.values() for v in values}
                | {"required", "forbidden", "true", "false", "1.2", "2.0",
                   "tpm-crb", "amd-sev-es", "VirtIO", "nope"})
_VALUES = st.one_of(st.sampled_from(_WORDS), st.text(max_size=12),
                    st.booleans(), st.integers(-3, 3))


@given(st.dictionaries(st.sampled_from(_KEYS), _VALUES, max_size=8),
       st.one_of(st.none(), st.sampled_from(_ACCEPTED["disk_format"]),
                 st.text(max_size=6)))
def test_image_traits_yields_only_os_traits_or_custom_names(props,
                                                           disk_format):
    found = image_traits(props, disk_format)
    for trait in found.traits:
        assert trait.trait in STANDARD or trait.trait.startswith("CUSTOM_")
        assert trait.requirement in (REQUIRED, FORBIDDEN)
        assert trait.sources
        for source in trait.sources:
            assert source.key in props or source.key == "disk_format"
    # A property is either read into traits, refused, or asks for nothing:
    # never both a trait and a refusal from one accepted choice value.
    for key, values in _ACCEPTED.items():
        value = disk_format if key == "disk_format" else props.get(key)
        if isinstance(value, str) and value in values:
            assert any(s.key == key for t in found.traits
                       for s in t.sources)
