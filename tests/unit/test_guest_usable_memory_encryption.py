"""Memory encryption: could a guest booted with *this* configuration use it?

Through ``derive_traits`` with the libvirt families, the real corpus
documents and TraitConfig variants: SEV-SNP follows SEV (and its SEV-ES
ASIDs), every memory-encryption trait needs virt type kvm, and TDX needs
cpu_mode host-passthrough.  Each case checks the state and that the first
piece of evidence names the deciding element or option.
"""

from __future__ import annotations

import os_traits
import pytest

from tests.corpus import CORPUS
from virtdriver.capabilities import (
    parse_domain_capabilities, parse_host_capabilities)
from virtdriver.capabilities.traits.config import TraitConfig
from virtdriver.capabilities.traits.derive import TraitReport, derive_traits
from virtdriver.capabilities.traits.model import (
    DerivationInputs, DomainKey, DomainReading, TraitState)
from virtdriver.capabilities.traits.registry import LIBVIRT_FAMILIES

A, U, K = TraitState.ASSERTED, TraitState.UNASSERTED, TraitState.UNKNOWN
SEV = os_traits.HW_CPU_X86_AMD_SEV
SEV_ES = os_traits.HW_CPU_X86_AMD_SEV_ES
SNP = os_traits.HW_CPU_X86_AMD_SEV_SNP
TDX = os_traits.HW_CPU_X86_INTEL_TDX

AMDSEV = "qemu_10.0.0-q35.x86_64+amdsev.xml"     # sev yes; sectype sev, snp
INTELTDX = "qemu_10.1.0-q35.x86_64+inteltdx.xml"  # tdx yes; sev no
Q35_82 = "qemu_8.2.0-q35.x86_64.xml"             # sev no; launchSec no
OLD_42 = "qemu_4.2.0.x86_64.xml"                 # sev no; no launchSec
OLD_212 = "qemu_2.12.0-q35.x86_64.xml"           # sev yes, no maxES/launch

CPU_MODE = "config [libvirt] cpu_mode"
VIRT_TYPE = "config [libvirt] virt_type"
PASSTHROUGH = TraitConfig(virt_type="kvm", cpu_mode="host-passthrough")
KVM_DEFAULT = TraitConfig(virt_type="kvm")


def corpus(kind: str, name: str):
    return CORPUS / kind / name


def report(config: TraitConfig, *docs: str, virt: str | None = None,
           features: str | None = None) -> TraitReport:
    """derive_traits over an x86_64 KVM host and ``docs`` from the corpus
    (or one synthetic document with ``<features>`` ``features``)."""
    host_path = corpus("hostcaps", "caps.x86_64.xml")
    host = parse_host_capabilities(host_path.read_bytes(), str(host_path))
    readings = []
    for name in docs:
        path = corpus("domcaps", name)
        caps = parse_domain_capabilities(path.read_bytes(), str(path))
        readings.append(DomainReading(
            DomainKey(caps.arch, virt or config.virt_type or "kvm"),
            caps=caps))
    if features is not None:
        xml = ("<domainCapabilities><domain>kvm</domain><machine>pc-q35-9.0"
               "</machine><arch>x86_64</arch><os supported='yes'/>"
               f"<features>{features}</features></domainCapabilities>")
        caps = parse_domain_capabilities(xml, "synthetic.xml")
        readings.append(DomainReading(DomainKey("x86_64", "kvm"), caps=caps))
    return derive_traits(DerivationInputs(host=host, domains=tuple(readings),
                                          config=config), LIBVIRT_FAMILIES)


# -- SEV-SNP follows SEV ----------------------------------------------------

SNP_CASES = [
    # (document, state, first evidence element, words in its detail)
    (Q35_82, U, "features/sev", "mark <sev> unsupported, and SEV-SNP "
     "builds on SEV"),
    (OLD_42, U, "features/sev", "mark <sev> unsupported"),
    (INTELTDX, U, "features/sev", "mark <sev> unsupported"),
    (AMDSEV, A, "features/launchSecurity/enum[@name='sectype']/value",
     "list launch security type 'sev-snp' and mark <sev> supported: up to "
     "59 SEV guests, 450 SEV-ES guests"),
    # libvirt of QEMU 2.12: SEV, but no maxESGuests and no launchSecurity.
    (OLD_212, K, "features/launchSecurity", "do not report <launchSecurity>"),
]


@pytest.mark.parametrize(("name", "state", "element", "words"), SNP_CASES,
                         ids=[case[0] for case in SNP_CASES])
def test_sev_snp_follows_sev(name, state, element, words, corpus_dir):
    result = report(PASSTHROUGH, name).results[SNP]

    assert result.state is state
    first = result.evidence[0]
    assert first.document.startswith("domain capabilities (x86_64, ")
    assert first.source == str(corpus("domcaps", name))
    assert first.element == element
    assert words in first.detail


def test_sev_snp_and_sev_es_agree_on_a_document_without_sev(corpus_dir):
    # The issue: SEV-ES was unasserted from <sev supported='no'/>, SEV-SNP
    # left unknown.  Both are now unasserted by the same element.
    results = report(KVM_DEFAULT, Q35_82).results
    assert (results[SEV_ES].state, results[SNP].state) == (U, U)
    assert results[SEV_ES].evidence[0].element == \
        results[SNP].evidence[0].element == "features/sev"


@pytest.mark.parametrize(("features", "state", "element", "words"), [
    ("<sev supported='yes'><maxGuests>10</maxGuests><maxESGuests>0"
     "</maxESGuests></sev><launchSecurity supported='yes'><enum "
     "name='sectype'><value>sev</value><value>sev-snp</value></enum>"
     "</launchSecurity>", U, "features/sev/maxESGuests",
     "allow no SEV-ES guests, whose ASIDs SEV-SNP guests use"),
    ("<launchSecurity supported='yes'><enum name='sectype'><value>sev-snp"
     "</value></enum></launchSecurity>", K, "features/sev",
     "do not report <sev>, which SEV-SNP builds on"),
    ("<sev supported='yes'><maxESGuests>5</maxESGuests></sev>"
     "<launchSecurity supported='yes'><enum name='sectype'><value>sev"
     "</value></enum></launchSecurity>", U,
     "features/launchSecurity/enum[@name='sectype']",
     "list launch security types sev but not 'sev-snp'"),
], ids=["no-es-asids", "sev-not-reported", "sectype-without-snp"])
def test_sev_snp_edge_documents(features, state, element, words):
    result = report(PASSTHROUGH, features=features).results[SNP]

    assert result.state is state
    assert result.evidence[0].element == element
    assert words in result.evidence[0].detail


# -- TDX needs host-passthrough ---------------------------------------------

TDX_CASES = [
    # (config, state, first evidence document, words in its detail)
    (PASSTHROUGH, A, "domain capabilities", "mark <tdx> supported"),
    (KVM_DEFAULT, U, CPU_MODE, "is unset, so host-model for virt type kvm: "
     "a TDX guest needs host-passthrough"),
    (TraitConfig(virt_type="kvm", cpu_mode="host-model"), U, CPU_MODE,
     "is host-model: a TDX guest needs host-passthrough"),
    (TraitConfig(virt_type="kvm", cpu_mode="custom",
                 cpu_models=("SapphireRapids",)), U, CPU_MODE,
     "is custom: a TDX guest needs host-passthrough"),
    (TraitConfig(virt_type="kvm", cpu_mode="none"), U, CPU_MODE,
     "is none: a TDX guest needs host-passthrough"),
]


@pytest.mark.parametrize(("config", "state", "document", "words"),
                         TDX_CASES, ids=["host-passthrough", "unset",
                                         "host-model", "custom", "none"])
def test_tdx_needs_host_passthrough(config, state, document, words,
                                    corpus_dir):
    result = report(config, INTELTDX).results[TDX]

    assert result.state is state
    assert result.evidence[0].document.startswith(document)
    assert words in result.evidence[0].detail


def test_refused_tdx_still_shows_what_the_document_offers(corpus_dir):
    result = report(KVM_DEFAULT, INTELTDX).results[TDX]

    assert [e.document for e in result.evidence][0] == CPU_MODE
    assert result.evidence[1].element == "features/tdx"
    assert "mark <tdx> supported" in result.evidence[1].detail


def test_cpu_mode_does_not_limit_sev(corpus_dir):
    # libvirt's own SEV examples use host-model; SEV-ES and SNP too.
    for config in (KVM_DEFAULT, PASSTHROUGH,
                   TraitConfig(virt_type="kvm", cpu_mode="custom",
                               cpu_models=("EPYC-Genoa",))):
        results = report(config, AMDSEV).results
        assert [results[t].state for t in (SEV, SEV_ES, SNP)] == [A, A, A]


def test_a_document_without_tdx_is_unasserted_by_the_document(corpus_dir):
    # host-passthrough allows TDX: the document decides, and says no.
    result = report(PASSTHROUGH, AMDSEV).results[TDX]
    assert result.state is U
    assert result.evidence[0].element == "features/tdx"


# -- every one needs KVM ----------------------------------------------------

@pytest.mark.parametrize("virt", ["qemu", "xen", "lxc"])
@pytest.mark.parametrize("name", [AMDSEV, INTELTDX])
def test_memory_encryption_needs_kvm(virt, name, corpus_dir):
    config = TraitConfig(virt_type=virt, cpu_mode="host-passthrough")
    results = report(config, name).results

    for trait in (SEV, SEV_ES, SNP, TDX):
        assert results[trait].state is U, trait
        first = results[trait].evidence[0]
        assert first.document == VIRT_TYPE
        assert first.detail.startswith(f"= {virt}: ")
        assert "run only under KVM" in first.detail


def test_tcg_evidence_keeps_the_document_that_offers_sev(corpus_dir):
    config = TraitConfig(virt_type="qemu", cpu_mode="host-model")
    result = report(config, AMDSEV).results[SEV]

    assert [e.document for e in result.evidence][0] == VIRT_TYPE
    assert "59 SEV guests" in result.evidence[1].detail
    # TDX is refused twice over; both options are named.
    tdx = report(config, INTELTDX).results[TDX]
    assert [e.document for e in tdx.evidence][:2] == [VIRT_TYPE, CPU_MODE]


def test_unset_virt_type_resolves_to_kvm_on_a_kvm_host(corpus_dir):
    # caps.x86_64.xml offers kvm guests: derive_traits picks kvm.
    results = report(TraitConfig(cpu_mode="host-passthrough"), AMDSEV,
                     virt="kvm").results
    assert [results[t].state for t in (SEV, SEV_ES, SNP)] == [A, A, A]


def test_an_unset_cpu_mode_decides_nothing_before_the_virt_type_is_known():
    # Host unread: the virt type, and so the default CPU mode, is unknown.
    unset = derive_traits(DerivationInputs(host_error="gone"),
                          LIBVIRT_FAMILIES).results[TDX]
    assert unset.state is K
    # A mode the operator set is known all the same.
    chosen = derive_traits(DerivationInputs(
        host_error="gone", config=TraitConfig(cpu_mode="host-model")),
        LIBVIRT_FAMILIES).results[TDX]
    assert chosen.state is U
    assert chosen.evidence[0].document == CPU_MODE
    assert chosen.evidence[0].detail.startswith("is host-model: ")
