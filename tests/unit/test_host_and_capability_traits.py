"""Host-capability traits, driver-capability traits, derivation and explain."""

import json

import os_traits
import pytest

from virtdriver.capabilities import parse_host_capabilities
from virtdriver.capabilities.traits import capability_flags, host_traits
from virtdriver.capabilities.traits.config import TraitConfig
from virtdriver.capabilities.traits.derive import derive_traits
from virtdriver.capabilities.traits.explain import NOT_OURS, explain
from virtdriver.capabilities.traits.model import (
    DerivationInputs, Evidence, TraitFamily, TraitState)

FAMILIES = host_traits.FAMILIES + (capability_flags.FAMILY,)
ASSERTED, UNASSERTED, UNKNOWN = TraitState


def host(corpus_dir, name):
    path = corpus_dir / "hostcaps" / name
    return parse_host_capabilities(path.read_bytes(), str(path))


def derive(**inputs):
    return derive_traits(DerivationInputs(**inputs), FAMILIES)


def test_arch_traits_follow_host_and_guests(corpus_dir):
    report = derive(host=host(corpus_dir, "caps-qemu-real-full.xml"))
    assert report.state(os_traits.HW_ARCH_X86_64) is ASSERTED
    assert report.state(os_traits.HW_ARCH_AARCH64) is UNASSERTED
    for trait in (os_traits.COMPUTE_ARCH_X86_64, os_traits.COMPUTE_ARCH_S390X,
                  os_traits.COMPUTE_ARCH_AARCH64):
        assert report.state(trait) is ASSERTED
    evidence = report.results[os_traits.COMPUTE_ARCH_S390X].evidence[0]
    assert "qemu-system-s390x" in evidence.detail


def test_compute_arch_unasserted_when_the_emulator_disappears(corpus_dir):
    before = host(corpus_dir, "caps-qemu-real-full.xml")
    after = host(corpus_dir, "caps.x86_64.xml")  # x86_64 guests only
    assert derive(host=before).state(os_traits.COMPUTE_ARCH_AARCH64) \
        is ASSERTED
    report = derive(host=after)
    assert report.state(os_traits.COMPUTE_ARCH_AARCH64) is UNASSERTED
    assert report.state(os_traits.COMPUTE_ARCH_X86_64) is ASSERTED
    assert "list guest arches x86_64" in \
        report.results[os_traits.COMPUTE_ARCH_AARCH64].evidence[0].detail


@pytest.mark.parametrize("arch, trait", [
    ("armv7l", os_traits.HW_ARCH_ARMV7), ("s390x", os_traits.HW_ARCH_S390X),
    ("ppc64le", os_traits.HW_ARCH_PPC64LE), ("riscv64", None)])
def test_hw_arch_names(arch, trait):
    assert host_traits.hw_arch_trait(arch) == trait


def test_hyperthreading_follows_usable_siblings(corpus_dir):
    caps = host(corpus_dir, "caps-qemu-real-full.xml")  # siblings 0,16 ...
    assert derive(host=caps).state(os_traits.HW_CPU_HYPERTHREADING) \
        is ASSERTED
    no_pairs = frozenset(range(16))  # one thread of each core
    report = derive(host=caps, usable_cpus=no_pairs)
    result = report.results[os_traits.HW_CPU_HYPERTHREADING]
    assert result.state is UNASSERTED
    assert "among usable CPUs 0-15" in result.evidence[0].detail
    one_pair = frozenset({3, 19})
    assert derive(host=caps, usable_cpus=one_pair).state(
        os_traits.HW_CPU_HYPERTHREADING) is ASSERTED


def test_hyperthreading_without_siblings(corpus_dir):
    caps = host(corpus_dir, "vircaps-x86_64-basic.xml")  # siblings='N'
    assert derive(host=caps).state(os_traits.HW_CPU_HYPERTHREADING) \
        is UNASSERTED
    no_cells = host(corpus_dir, "caps.x86_64.xml")
    assert derive(host=no_cells).state(os_traits.HW_CPU_HYPERTHREADING) \
        is UNKNOWN


def test_unreadable_host_makes_host_traits_unknown():
    report = derive(host=None, host_error="VIR_ERR_NO_SUPPORT: nope")
    for trait in host_traits.ARCH.traits | host_traits.SMT.traits:
        assert report.state(trait) is UNKNOWN
    assert "nope" in report.results[os_traits.HW_ARCH_X86_64] \
        .evidence[0].detail


def test_numa_root_only_on_cell_providers(corpus_dir):
    caps = host(corpus_dir, "vircaps-x86_64-basic.xml")
    assert derive(host=caps).state(os_traits.HW_NUMA_ROOT) is UNASSERTED
    result = host_traits.numa_cell_result(caps, caps.cells[2])
    assert result.state is ASSERTED and "NUMA cell 2" in \
        result.evidence[0].detail


def test_capability_traits_and_image_type_exclusion():
    report = derive(
        driver_capabilities={"supports_multiattach": True,
                             "supports_image_type_raw": True,
                             "supports_image_type_qcow2": True,
                             "supports_trusted_certs": False},
        config=TraitConfig(image_type_exclude_list=("raw",)))
    assert report.state(os_traits.COMPUTE_VOLUME_MULTI_ATTACH) is ASSERTED
    assert report.state(os_traits.COMPUTE_IMAGE_TYPE_QCOW2) is ASSERTED
    raw = report.results[os_traits.COMPUTE_IMAGE_TYPE_RAW]
    assert raw.state is UNASSERTED
    assert raw.evidence[0].document == \
        "config [compute] image_type_exclude_list"
    assert report.state(os_traits.COMPUTE_TRUSTED_CERTS) is UNASSERTED
    assert report.state(os_traits.COMPUTE_IMAGE_TYPE_VMDK) is UNASSERTED
    assert capability_flags.FAMILY.traits <= report.ownership.static


def test_every_family_answers_once_for_each_of_its_traits(corpus_dir):
    report = derive(host=host(corpus_dir, "caps-test.xml"))
    for family in FAMILIES:
        answered = {t for t, r in report.results.items()
                    if r.family == family.name}
        assert answered == family.traits


def test_invalid_and_undeclared_names_are_reported_not_dropped():
    def bad(inputs):
        yield family.result("HW_CPU_X86_NOPE", ASSERTED,
                            Evidence("test", "made it up"))
        yield family.result(os_traits.HW_CPU_X86_AVX, ASSERTED)
    family = TraitFamily("rogue", frozenset({os_traits.HW_CPU_X86_SSE}), bad)
    report = derive_traits(DerivationInputs(), [family])
    assert report.results == {}
    reasons = {b.name: b.reason for b in report.invalid}
    assert "neither an os-traits standard trait" in reasons["HW_CPU_X86_NOPE"]
    assert "does not declare it" in reasons[os_traits.HW_CPU_X86_AVX]
    text = explain("HW_CPU_X86_NOPE", report).text()
    assert "refused" in text and "made it up" in text


def test_two_families_claiming_one_trait_is_a_bug():
    def say(inputs):
        yield twin.result(os_traits.HW_CPU_X86_SSE, ASSERTED)
    twin = TraitFamily("twin", frozenset({os_traits.HW_CPU_X86_SSE}), say)
    with pytest.raises(ValueError, match="derived by both"):
        derive_traits(DerivationInputs(), [twin, twin])


def test_explain_each_kind_of_name(corpus_dir):
    report = derive(host=host(corpus_dir, "caps-qemu-real-full.xml"),
                    driver_capabilities={"supports_multiattach": True})
    asserted = explain(os_traits.HW_CPU_HYPERTHREADING, report)
    assert asserted.status == "asserted"
    assert asserted.sentence.startswith(
        "HW_CPU_HYPERTHREADING: asserted — host capabilities list CPU 0")
    unasserted = explain(os_traits.COMPUTE_TRUSTED_CERTS, report)
    assert unasserted.status == "unasserted"
    assert "do not declare supports_trusted_certs" in unasserted.sentence
    foreign = explain("CUSTOM_RACK_7", report)
    assert foreign.status == NOT_OURS and "whoever set it" in foreign.sentence
    other = explain(os_traits.HW_GPU_API_VULKAN, report)
    assert other.status == NOT_OURS and "standard trait" in other.sentence
    invalid = explain("lowercase", report)
    assert invalid.status == "invalid"
    data = json.loads(json.dumps(asserted.to_json()))
    assert data["status"] == "asserted"
    assert data["evidence"][0]["document"] == "host capabilities"
    assert data["evidence"][0]["element"].endswith("@siblings")
    assert "[" in asserted.text().splitlines()[1]  # source and element


def test_report_json_lists_traits_by_state(corpus_dir):
    report = derive(host=host(corpus_dir, "caps.x86_64.xml"))
    data = json.loads(json.dumps(report.to_json()))
    assert os_traits.HW_ARCH_X86_64 in data["asserted"]
    assert os_traits.HW_CPU_HYPERTHREADING in data["unknown"]
    assert data["traits"][os_traits.HW_ARCH_X86_64]["family"] == \
        "architecture"
