"""The CPU feature trait family: modes, extra flags, aliases, fail-safe."""

import os
import pathlib
import re

import os_traits
import pytest

from tests.corpus import corpus_files
from virtdriver.capabilities import (
    parse_domain_capabilities, parse_host_capabilities)
from virtdriver.capabilities.traits import (
    cpu_feature_names, cpu_features, guest_cpu)
from virtdriver.capabilities.traits.config import TraitConfig
from virtdriver.capabilities.traits.cpu_feature_names import X86_FEATURE_TRAITS
from virtdriver.capabilities.traits.cpu_features import FAMILY
from virtdriver.capabilities.traits.guest_cpu import lookup_model
from virtdriver.capabilities.traits.model import (
    DerivationInputs, DomainKey, DomainReading, TraitState)
from virtdriver.drivers.libvirt.cpu_map_loader import (
    DEFAULT_CPU_MAP_DIR, load_cpu_map)

A, U, K = TraitState.ASSERTED, TraitState.UNASSERTED, TraitState.UNKNOWN
T = os_traits

#: A CPU map small enough to reason about.
MAP = {
    "Haswell": frozenset({"sse2", "pclmuldq", "aes", "avx", "avx2", "fma",
                          "hle", "rtm", "bmi1", "sse4.1", "sse4.2"}),
    "EPYC-Rome": frozenset({"sse2", "pclmuldq", "aes", "avx", "avx2", "fma",
                            "sha-ni", "svm", "sse4a"}),
    "qemu64": frozenset({"sse2", "pni", "svm"}),
}


def host_xml(model: str | None = "Haswell", features=("vmx", "pcid"),
             arch: str = "x86_64") -> bytes:
    cpu = f"<arch>{arch}</arch>"
    if model:
        cpu += f"<model>{model}</model>"
    cpu += "".join(f"<feature name='{f}'/>" for f in features)
    return (f"<capabilities><host><cpu>{cpu}</cpu></host>"
            f"<guest><os_type>hvm</os_type><arch name='{arch}'>"
            "<domain type='kvm'/></arch></guest></capabilities>").encode()


def domain_xml(model: str = "EPYC-Rome", features=(("require", "x2apic"),),
               custom=(), host_model: str = "yes") -> bytes:
    feats = "".join(f"<feature policy='{p}' name='{n}'/>"
                    for p, n in features)
    models = "".join(f"<model usable='{u}'>{m}</model>" for m, u in custom)
    return (
        "<domainCapabilities><path>/usr/bin/qemu</path><domain>kvm</domain>"
        "<machine>pc-q35-7.2</machine><arch>x86_64</arch><cpu>"
        "<mode name='host-passthrough' supported='yes'/>"
        f"<mode name='host-model' supported='{host_model}'>"
        f"<model fallback='forbid'>{model}</model>{feats}</mode>"
        f"<mode name='custom' supported='yes'>{models}</mode>"
        "</cpu></domainCapabilities>").encode()


def reading(xml: bytes | None = None, error: str | None = None,
            arch: str = "x86_64") -> DomainReading:
    caps = None if xml is None else parse_domain_capabilities(xml, "dom.xml")
    return DomainReading(DomainKey(arch, "kvm"), caps=caps, error=error)


def derive(config: TraitConfig, host: bytes | None = None,
           domains=None, table=MAP, host_error=None):
    parsed = None if host is None else parse_host_capabilities(
        host, "host.xml")
    inputs = DerivationInputs(
        host=parsed, host_error=host_error,
        domains=(reading(domain_xml()),) if domains is None else domains,
        config=config.resolved(parsed), cpu_model_features=table)
    results = list(FAMILY.derive(inputs))
    assert sorted(r.trait for r in results) == sorted(FAMILY.traits)
    return {r.trait: r for r in results}


def states(results, *traits):
    return tuple(results[t].state for t in traits)


# -- the mode × flag matrix -------------------------------------------------

MATRIX = [
    # host-passthrough: host model (Haswell) features ∪ host features
    ("host-passthrough", (), (), T.HW_CPU_X86_AVX2, A),
    ("host-passthrough", (), (), T.HW_CPU_X86_VMX, A),       # host feature
    ("host-passthrough", (), (), T.HW_CPU_X86_INTEL_PCID, A),
    ("host-passthrough", (), (), T.HW_CPU_X86_SHA, U),
    ("host-passthrough", (), ("-avx2",), T.HW_CPU_X86_AVX2, U),
    ("host-passthrough", (), ("+sha-ni",), T.HW_CPU_X86_SHA, A),
    # host-model: EPYC-Rome + require x2apic, from the domain capabilities
    ("host-model", (), (), T.HW_CPU_X86_SHA, A),
    ("host-model", (), (), T.HW_CPU_X86_VMX, U),   # host has it; not guests
    ("host-model", (), (), T.HW_CPU_X86_TSX, U),
    ("host-model", (), ("-sha-ni",), T.HW_CPU_X86_SHA, U),
    ("host-model", (), ("pcid",), T.HW_CPU_X86_INTEL_PCID, A),  # bare adds
    ("host-model", (), ("+pcid", "-pcid"), T.HW_CPU_X86_INTEL_PCID, U),
    # custom: union of the models
    ("custom", ("qemu64",), (), T.HW_CPU_X86_SSE3, A),
    ("custom", ("qemu64",), (), T.HW_CPU_X86_AVX, U),
    ("custom", ("qemu64", "Haswell"), (), T.HW_CPU_X86_AVX, A),
    ("custom", ("qemu64", "Haswell"), (" -AVX ",), T.HW_CPU_X86_AVX, U),
    ("custom", ("qemu64",), ("+avx512f",), T.HW_CPU_X86_AVX512F, A),
    # none: the hypervisor's default CPU; flags are ignored
    ("none", (), (), T.HW_CPU_X86_SSE2, U),
    ("none", (), ("+avx512f",), T.HW_CPU_X86_AVX512F, U),
]


@pytest.mark.parametrize(("mode", "models", "flags", "trait", "state"),
                         MATRIX)
def test_mode_and_flag_matrix(mode, models, flags, trait, state):
    config = TraitConfig(cpu_mode=mode, cpu_models=models,
                         cpu_model_extra_flags=flags)
    assert derive(config, host_xml())[trait].state is state


def test_removed_flag_is_the_evidence_of_the_unasserted_trait():
    config = TraitConfig(cpu_mode="host-model",
                         cpu_model_extra_flags=("-avx2",))
    result = derive(config, host_xml())[T.HW_CPU_X86_AVX2]
    assert result.state is U
    assert ("config [libvirt] cpu_model_extra_flags '-avx2' removes the "
            "feature from guests") in [e.sentence() for e in result.evidence]


def test_added_flag_overrides_an_unknown_model():
    config = TraitConfig(cpu_mode="host-model", virt_type="qemu",
                         cpu_model_extra_flags=("+avx512f",))
    results = derive(config, host_xml(),
                     domains=(reading(domain_xml(model="EPYC-Turin")),))
    assert results[T.HW_CPU_X86_AVX512F].state is A
    assert results[T.HW_CPU_X86_AVX512F].evidence[0].document == \
        "config [libvirt] cpu_model_extra_flags"
    assert results[T.HW_CPU_X86_AVX512BW].state is K


def test_none_mode_says_flags_are_ignored():
    config = TraitConfig(cpu_mode="none", cpu_model_extra_flags=("+avx",))
    result = derive(config, host_xml())[T.HW_CPU_X86_AVX]
    assert [e.document for e in result.evidence] == [
        "config [libvirt] cpu_mode", "config [libvirt] cpu_model_extra_flags"]
    assert "ignored" in result.evidence[1].detail


def test_unset_mode_is_host_model_for_kvm():
    results = derive(TraitConfig(), host_xml())
    assert results[T.HW_CPU_X86_SHA].state is A
    assert "is unset, so host-model" in results[
        T.HW_CPU_X86_SHA].evidence[-1].detail


# -- several libvirt features, one trait ------------------------------------

def test_tsx_stays_while_either_hle_or_rtm_remains():
    config = TraitConfig(cpu_mode="host-passthrough",
                         cpu_model_extra_flags=("-hle",))
    assert derive(config, host_xml())[T.HW_CPU_X86_TSX].state is A
    both = TraitConfig(cpu_mode="host-passthrough",
                       cpu_model_extra_flags=("-hle", "-rtm"))
    assert derive(both, host_xml())[T.HW_CPU_X86_TSX].state is U


def test_svm_gives_both_svm_traits():
    results = derive(TraitConfig(cpu_mode="host-model"), host_xml())
    assert states(results, T.HW_CPU_X86_SVM, T.HW_CPU_X86_AMD_SVM) == (A, A)
    assert states(results, T.HW_CPU_X86_VMX, T.HW_CPU_X86_INTEL_VMX) == (U, U)


# -- the alias table --------------------------------------------------------

@pytest.mark.parametrize(("feature", "traits"), [
    ("pclmuldq", {T.HW_CPU_X86_CLMUL}),
    ("sse4.1", {T.HW_CPU_X86_SSE41}),
    ("sse4.2", {T.HW_CPU_X86_SSE42}),
    ("pni", {T.HW_CPU_X86_SSE3}),
    ("aes", {T.HW_CPU_X86_AESNI}),
    ("fma", {T.HW_CPU_X86_FMA3}),
    ("sha-ni", {T.HW_CPU_X86_SHA}),
    ("svm", {T.HW_CPU_X86_AMD_SVM, T.HW_CPU_X86_SVM}),
    ("vmx", {T.HW_CPU_X86_VMX, T.HW_CPU_X86_INTEL_VMX}),
    ("bmi1", {T.HW_CPU_X86_BMI}),
    ("rtm", {T.HW_CPU_X86_TSX}),
    ("avx2", {T.HW_CPU_X86_AVX2}),          # by lowercased suffix
    ("avx512f", {T.HW_CPU_X86_AVX512F}),
])
def test_alias_table(feature, traits):
    assert set(X86_FEATURE_TRAITS[feature]) == traits


@pytest.mark.parametrize("feature", ["aesni", "clmul", "fma3", "sse41",
                                     "amd_svm", "tsx"])
def test_trait_suffixes_that_are_not_libvirt_names_are_not_mapped(feature):
    assert feature not in X86_FEATURE_TRAITS


def test_every_mapped_name_is_a_libvirt_feature():
    x86_features = pathlib.Path(DEFAULT_CPU_MAP_DIR) / "x86_features.xml"
    if not x86_features.is_file():
        if os.environ.get("CI") == "true":
            pytest.fail(f"libvirt's CPU map is missing: {x86_features}")
        pytest.skip(f"libvirt's CPU map is not installed: {x86_features}")
    names = set(re.findall(r"<feature name='([^']+)'",
                           x86_features.read_text()))
    # ASF (AMD's Advanced Synchronization Facility) never shipped.
    assert set(X86_FEATURE_TRAITS) - names == {"asf"}


def test_family_excludes_traits_other_families_derive():
    assert T.HW_CPU_X86_AMD_SEV not in FAMILY.traits
    assert T.HW_CPU_X86_AMD_SEV_ES not in FAMILY.traits
    assert T.HW_CPU_X86_INTEL_TDX not in FAMILY.traits
    assert T.HW_CPU_HYPERTHREADING not in FAMILY.traits
    assert {T.HW_CPU_X86_AVX2, T.HW_CPU_AARCH64_SVE,
            T.HW_CPU_PPC64LE_POWER9} <= FAMILY.traits


# -- fail safe --------------------------------------------------------------

def test_unknown_host_model_cpu_is_unknown_not_unasserted():
    dom = domain_xml(model="EPYC-Turin",
                     features=(("require", "avx512f"), ("disable", "pcid")))
    results = derive(TraitConfig(cpu_mode="host-model", virt_type="qemu"),
                     host_xml(), domains=(reading(dom),))
    assert states(results, T.HW_CPU_X86_AVX512F, T.HW_CPU_X86_INTEL_PCID,
                  T.HW_CPU_X86_SSE2) == (A, U, K)
    why = results[T.HW_CPU_X86_SSE2].evidence[0]
    assert "EPYC-Turin, which is not in the libvirt CPU map" in why.detail


def test_kvm_host_cpu_bounds_an_unknown_host_model_cpu():
    dom = domain_xml(model="EPYC-Turin")
    results = derive(TraitConfig(cpu_mode="host-model"), host_xml(),
                     domains=(reading(dom),))
    # Haswell has no SHA: KVM cannot give it; AVX2 it has: still unknown.
    assert states(results, T.HW_CPU_X86_SHA, T.HW_CPU_X86_AVX2) == (U, K)
    assert results[T.HW_CPU_X86_SHA].evidence[0].document == \
        "host capabilities"


def test_unknown_custom_model_is_unknown_not_unasserted():
    config = TraitConfig(cpu_mode="custom", cpu_models=("qemu64", "Nova9"))
    results = derive(config, host_xml())
    assert states(results, T.HW_CPU_X86_SSE3, T.HW_CPU_X86_AVX) == (A, K)
    assert "has no CPU model Nova9" in \
        results[T.HW_CPU_X86_AVX].evidence[0].detail


def test_unknown_host_cpu_model_is_unknown_for_passthrough():
    config = TraitConfig(cpu_mode="host-passthrough")
    results = derive(config, host_xml(model="Zen9"))
    assert states(results, T.HW_CPU_X86_VMX, T.HW_CPU_X86_AVX) == (A, K)


def test_missing_host_caps_make_everything_unknown():
    results = derive(TraitConfig(), None, host_error="libvirt is down")
    assert {r.state for r in results.values()} == {K}
    assert results[T.HW_CPU_X86_AVX].evidence[0].sentence() == \
        "host capabilities could not be read: libvirt is down"


@pytest.mark.parametrize("domains", [
    (), (reading(error="unsupported arch"),),
    (reading(domain_xml(host_model="no")), reading(error="timeout"))])
def test_host_model_without_a_usable_document_is_unknown(domains):
    results = derive(TraitConfig(cpu_mode="host-model"), host_xml(),
                     domains=domains)
    assert results[T.HW_CPU_X86_SSE2].state is K


def test_documents_merge_asserted_over_unknown_over_unasserted():
    config = TraitConfig(cpu_mode="host-model")
    rome, broken = reading(domain_xml()), reading(error="timeout")
    merged = derive(config, host_xml(), domains=(broken, rome))
    assert states(merged, T.HW_CPU_X86_SHA, T.HW_CPU_X86_TSX) == (A, K)
    assert "could not be read: timeout" in \
        merged[T.HW_CPU_X86_TSX].evidence[0].detail


def test_unusable_custom_model_is_named_not_dropped():
    dom = domain_xml(custom=(("Haswell", "no"), ("qemu64", "yes")))
    config = TraitConfig(cpu_mode="custom", cpu_models=("Haswell", "qemu64"))
    result = derive(config, host_xml(), domains=(reading(dom),))[
        T.HW_CPU_X86_AVX2]
    assert result.state is U
    assert any("mark CPU model Haswell" in e.detail and "unusable" in e.detail
               for e in result.evidence)


def test_versioned_model_is_read_as_its_base():
    assert lookup_model("Haswell-v1", MAP) == ("Haswell", MAP["Haswell"])
    assert lookup_model("haswell", MAP) == ("Haswell", MAP["Haswell"])
    assert lookup_model("Haswell-v2", MAP) is None


# -- other arches -----------------------------------------------------------

def test_aarch64_host_features_map_by_suffix():
    host = host_xml(model=None, features=("fp", "asimd", "aes", "pmull",
                                          "sha2", "sve"), arch="aarch64")
    config = TraitConfig(cpu_mode="host-passthrough",
                         cpu_model_extra_flags=("-sve",))
    results = derive(config, host, domains=())
    assert states(results, T.HW_CPU_AARCH64_AES, T.HW_CPU_AARCH64_PMULL,
                  T.HW_CPU_AARCH64_SHA3, T.HW_CPU_AARCH64_SVE) == (A, A, U, U)
    x86 = results[T.HW_CPU_X86_AVX]
    assert x86.state is U
    assert x86.evidence[0].sentence().startswith(
        "host capabilities say the host arch is aarch64")


def test_aarch64_host_without_cpu_details_is_unknown():
    results = derive(TraitConfig(), host_xml(None, (), "aarch64"), domains=())
    assert results[T.HW_CPU_AARCH64_AES].state is K


def test_ppc64le_power_generation_from_host_model():
    results = derive(TraitConfig(), host_xml("POWER9", (), "ppc64le"),
                     domains=())
    assert states(results, T.HW_CPU_PPC64LE_POWER9,
                  T.HW_CPU_PPC64LE_POWER8) == (A, U)
    big_endian = derive(TraitConfig(), host_xml("POWER9", (), "ppc64"),
                        domains=())
    assert big_endian[T.HW_CPU_PPC64LE_POWER9].state is U


# -- the corpus -------------------------------------------------------------

def corpus_inputs(corpus_dir, domcaps: str, config: TraitConfig, table):
    host_file = corpus_dir / "hostcaps" / "caps-qemu-real-full.xml"
    dom_file = corpus_dir / "domcaps" / domcaps
    host = parse_host_capabilities(host_file.read_bytes(), str(host_file))
    dom = parse_domain_capabilities(dom_file.read_bytes(), str(dom_file))
    key = DomainKey("x86_64", "kvm", dom.machine)
    return DerivationInputs(host=host, domains=(DomainReading(key, caps=dom),),
                            config=config, cpu_model_features=table)


@pytest.mark.parametrize(("domcaps", "model", "required", "disabled"), [
    ("qemu_11.1.0-q35.x86_64-supported.xml", "EPYC-Turin",
     (T.HW_CPU_X86_AMD_VIRT_SSBD, T.HW_CPU_X86_INTEL_SSBD,
      T.HW_CPU_X86_STIBP), (T.HW_CPU_X86_INTEL_PCID,)),
    ("qemu_10.0.0-q35.x86_64+amdsev.xml", "EPYC-Genoa",
     (T.HW_CPU_X86_AMD_VIRT_SSBD, T.HW_CPU_X86_INTEL_SSBD), ()),
])
def test_corpus_host_model_asserts_required_features(
        corpus_dir, domcaps, model, required, disabled):
    inputs = corpus_inputs(corpus_dir, domcaps,
                           TraitConfig(cpu_mode="host-model"), {})
    results = {r.trait: r for r in FAMILY.derive(inputs)}
    assert len(results) == len(FAMILY.traits)
    for trait in required:
        assert results[trait].state is A, trait
        assert results[trait].evidence[0].document == \
            f"domain capabilities (x86_64, {inputs.domains[0].caps.machine}, kvm)"
        assert f"host-model CPU {model} requires" in \
            results[trait].evidence[0].detail
    for trait in disabled:
        assert results[trait].state is U, trait
    # The model is not in the (empty) map: the rest is unknown.
    assert results[T.HW_CPU_X86_SSE2].state is K


def test_corpus_host_model_with_the_real_map(corpus_dir):
    if not (pathlib.Path(DEFAULT_CPU_MAP_DIR) / "index.xml").is_file():
        if os.environ.get("CI") == "true":
            pytest.fail(f"libvirt's CPU map is missing at {DEFAULT_CPU_MAP_DIR}")
        pytest.skip("libvirt's CPU map is not installed")
    table = load_cpu_map().model_features()
    inputs = corpus_inputs(corpus_dir, "qemu_8.2.0-q35.x86_64.xml",
                           TraitConfig(cpu_mode="host-model"), table)
    results = {r.trait: r for r in FAMILY.derive(inputs)}
    assert {t for t, r in results.items() if r.state is A} >= {
        T.HW_CPU_X86_CLMUL, T.HW_CPU_X86_SSE41, T.HW_CPU_X86_AESNI,
        T.HW_CPU_X86_FMA3, T.HW_CPU_X86_SHA, T.HW_CPU_X86_AMD_SVM,
        T.HW_CPU_X86_SVM, T.HW_CPU_X86_AVX2}
    assert results[T.HW_CPU_X86_AVX512F].state is U
    assert results[T.HW_CPU_X86_CLMUL].evidence[0].element == \
        "cpu/mode[@name='host-model']/model"


@pytest.mark.parametrize("mode", ["host-model", "host-passthrough", "none"])
def test_every_corpus_host_gives_one_result_per_trait(corpus_dir, mode):
    assert corpus_files("hostcaps")
    for path in corpus_files("hostcaps"):
        host = parse_host_capabilities(path.read_bytes(), str(path))
        inputs = DerivationInputs(host=host,
                                  config=TraitConfig(cpu_mode=mode),
                                  cpu_model_features=MAP)
        results = list(FAMILY.derive(inputs))
        assert sorted(r.trait for r in results) == sorted(FAMILY.traits), path
        for result in results:
            assert result.family == FAMILY.name
            assert result.evidence, (path, result.trait)
            assert all(e.document and e.detail for e in result.evidence)


@pytest.mark.parametrize("module", [cpu_features, cpu_feature_names,
                                    guest_cpu],
                         ids=lambda m: m.__name__.rsplit(".", 1)[-1])
def test_module_spells_no_standard_trait_name(module):
    source = pathlib.Path(module.__file__).read_text()
    literals = re.findall(r"[\"'](HW_CPU_[A-Z0-9_]+)[\"']", source)
    assert [name for name in literals
            if name in os_traits.get_traits()] == []
