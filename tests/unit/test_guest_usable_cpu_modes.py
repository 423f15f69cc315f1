"""CPU features: no guest boots with a CPU mode no document allows.

Through ``derive_traits`` with the libvirt families and the real corpus:
libvirt's TCG documents mark host-passthrough unsupported (there is no
``-cpu host`` without KVM), the mshv document marks host-model and custom
unsupported.  When every counted document refuses the mode in force, every
x86 CPU feature trait is unasserted, each refusing ``<mode>`` named first
and ``[libvirt] cpu_mode`` after; otherwise the mode's usual rules apply.
"""

from __future__ import annotations

import os_traits
import pytest

from tests.corpus import corpus_files
from virtdriver.capabilities import (
    parse_domain_capabilities, parse_host_capabilities)
from virtdriver.capabilities.traits.config import TraitConfig
from virtdriver.capabilities.traits.cpu_feature_names import X86_TRAITS
from virtdriver.capabilities.traits.derive import TraitReport, derive_traits
from virtdriver.capabilities.traits.model import (
    DerivationInputs, DomainKey, DomainReading, TraitState)
from virtdriver.capabilities.traits.registry import LIBVIRT_FAMILIES

A, U, K = TraitState.ASSERTED, TraitState.UNASSERTED, TraitState.UNKNOWN
TCG = "qemu_6.2.0-tcg.x86_64.xml"          # host-passthrough 'no'
TCG_OLD = "qemu_2.10.0-tcg.x86_64.xml"     # host-passthrough 'no'
MSHV = "qemu_10.2.0-q35.x86_64+mshv.xml"   # host-model, custom 'no'
KVM = "qemu_8.2.0-q35.x86_64.xml"          # every mode 'yes'
#: The corpus host's CPU model (as the CPU map names it) and its features.
MAP = {"Opteron_G3": frozenset({"sse2", "sse4a"}),
       "EPYC-Rome": frozenset({"sse2", "avx2", "sha-ni"}),
       "Haswell": frozenset({"sse2", "avx2"})}


def corpus(kind: str, name: str):
    return next(p for p in corpus_files(kind) if p.name == name)


def report(config: TraitConfig, *docs: str,
           unread: bool = False) -> TraitReport:
    """derive_traits over the real corpus host (Opteron_G3-v1) and docs."""
    host_path = corpus("hostcaps", "caps-qemu-real-full.xml")
    host = parse_host_capabilities(host_path.read_bytes(), str(host_path))
    readings = []
    for name in docs:
        path = corpus("domcaps", name)
        caps = parse_domain_capabilities(path.read_bytes(), str(path))
        readings.append(DomainReading(
            DomainKey(caps.arch, config.virt_type, caps.machine), caps=caps))
    if unread:
        readings.append(DomainReading(DomainKey("x86_64", config.virt_type,
                                                "pc"), error="timeout"))
    return derive_traits(DerivationInputs(
        host=host, domains=tuple(readings), config=config,
        cpu_model_features=MAP), LIBVIRT_FAMILIES)


def x86_states(result: TraitReport) -> set[TraitState]:
    return {result.results[t].state for t in X86_TRAITS}


REFUSED = [
    # (config, documents, the refused mode)
    (TraitConfig(virt_type="qemu", cpu_mode="host-passthrough"), (TCG,),
     "host-passthrough"),
    (TraitConfig(virt_type="qemu", cpu_mode="host-passthrough",
                 cpu_model_extra_flags=("+avx2",)), (TCG, TCG_OLD),
     "host-passthrough"),
    (TraitConfig(virt_type="kvm", cpu_mode="host-model"), (MSHV,),
     "host-model"),
    (TraitConfig(virt_type="kvm"), (MSHV,), "host-model"),
    (TraitConfig(virt_type="kvm", cpu_mode="custom",
                 cpu_models=("Haswell",)), (MSHV,), "custom"),
]


@pytest.mark.parametrize(("config", "docs", "mode"), REFUSED,
                         ids=["tcg-passthrough", "two-tcg-docs-and-a-flag",
                              "mshv-host-model", "mshv-unset-mode",
                              "mshv-custom"])
def test_a_mode_every_document_refuses_unasserts_every_x86_trait(
        config, docs, mode, corpus_dir):
    result = report(config, *docs)

    assert x86_states(result) == {U}
    evidence = result.results[os_traits.HW_CPU_X86_AVX2].evidence
    refusing = evidence[:len(docs)]
    for ev, name in zip(refusing, docs, strict=True):
        assert ev.source == str(corpus("domcaps", name))
        assert ev.element == f"cpu/mode[@name='{mode}']"
        assert ev.detail == (f"mark the {mode} CPU mode unsupported, so no "
                             f"guest boots with [libvirt] cpu_mode = {mode}")
    assert evidence[len(docs)].document == "config [libvirt] cpu_mode"


ALLOWED = [
    # The same modes where a document allows them: the usual rules.
    (TraitConfig(virt_type="kvm", cpu_mode="host-passthrough"), (KVM,),
     False),
    (TraitConfig(virt_type="kvm", cpu_mode="host-passthrough"), (MSHV,),
     False),
    (TraitConfig(virt_type="qemu", cpu_mode="host-model"), (TCG,), False),
    # One document not read: it might allow the mode, so no refusal.
    (TraitConfig(virt_type="qemu", cpu_mode="host-passthrough"), (TCG,),
     True),
]


@pytest.mark.parametrize(("config", "docs", "unread"), ALLOWED,
                         ids=["kvm-passthrough", "mshv-passthrough",
                              "tcg-host-model", "tcg-and-unread"])
def test_a_mode_some_document_allows_keeps_the_usual_rules(
        config, docs, unread, corpus_dir):
    result = report(config, *docs, unread=unread)

    assert A in x86_states(result) or K in x86_states(result)
    for trait in X86_TRAITS:
        for ev in result.results[trait].evidence:
            assert not ev.detail.startswith("mark the "), (trait, ev)


def test_passthrough_on_kvm_reads_the_host_cpu(corpus_dir):
    config = TraitConfig(virt_type="kvm", cpu_mode="host-passthrough")
    sse4a = report(config, KVM).results[os_traits.HW_CPU_X86_SSE4A]
    assert sse4a.state is A
    assert sse4a.evidence[0].document == "host capabilities"

