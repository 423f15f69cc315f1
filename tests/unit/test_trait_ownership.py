"""No trait can leak: whatever the libvirt driver's families emit, it owns.

The tracker removes owned traits the driver does not assert and leaves all
others alone, so a trait a family could emit without owning it would stick
on providers forever.  This enumerates derivations over the whole corpus
and a configuration matrix and proves every emitted name is owned, valid,
and answered for exactly once.
"""

from __future__ import annotations

import itertools

import os_traits
import pytest

from tests.corpus import corpus_files
from virtdriver.capabilities import (
    parse_domain_capabilities, parse_host_capabilities)
from virtdriver.capabilities.traits.config import TraitConfig
from virtdriver.capabilities.traits.derive import derive_traits
from virtdriver.capabilities.traits.model import (
    DerivationInputs, DomainKey, DomainReading)
from virtdriver.capabilities.traits.names import invalid_reason
from virtdriver.capabilities.traits.registry import (
    LIBVIRT_FAMILIES, LIBVIRT_OWNERSHIP)
from virtdriver.drivers.libvirt.capabilities import LIBVIRT_CAPABILITIES
from virtdriver.drivers.libvirt.cpu_map_loader import load_cpu_map

HOSTS = corpus_files("hostcaps")
DOMAINS = corpus_files("domcaps")
CONFIGS = [
    TraitConfig(),
    TraitConfig(virt_type="qemu", cpu_mode="host-passthrough",
                cpu_model_extra_flags=("-avx2", "+pcid", "vmx")),
    TraitConfig(cpu_mode="custom", cpu_models=("Haswell", "EPYC-Rome"),
                cpu_model_extra_flags=("-sse4.2",),
                image_type_exclude_list=("raw", "qcow2")),
    TraitConfig(cpu_mode="none", virt_type="xen"),
]


@pytest.fixture(scope="module")
def cpu_model_features():
    return load_cpu_map().model_features()


def test_families_partition_the_owned_set():
    seen: dict[str, str] = {}
    for family in LIBVIRT_FAMILIES:
        for trait in family.traits:
            assert invalid_reason(trait) is None, trait
            assert seen.setdefault(trait, family.name) == family.name, (
                f"{trait} is claimed by {seen[trait]} and {family.name}")
    assert frozenset(seen) == LIBVIRT_OWNERSHIP.static
    assert os_traits.COMPUTE_STORAGE_BUS_VIRTIO in LIBVIRT_OWNERSHIP.static
    assert not LIBVIRT_OWNERSHIP.owns(os_traits.HW_GPU_API_VULKAN)
    assert not LIBVIRT_OWNERSHIP.owns("CUSTOM_RACK_7")


def _parsed(path, parse):
    return parse(path.read_bytes(), str(path))


def _cases():
    """Each host once with a domain document, and each domain document once
    with a host, over the configuration matrix; plus unread inputs."""
    pairs = list(itertools.zip_longest(HOSTS, DOMAINS, fillvalue=None))
    for (host, domain), config in itertools.product(pairs, CONFIGS):
        yield host, domain, config


@pytest.mark.parametrize("host_path, domain_path, config", list(_cases()),
                         ids=lambda v: getattr(v, "name", None))
def test_every_emitted_trait_is_owned_and_valid(
        host_path, domain_path, config, cpu_model_features, corpus_dir):
    host = _parsed(host_path, parse_host_capabilities) if host_path else None
    readings = ()
    if domain_path:
        caps = _parsed(domain_path, parse_domain_capabilities)
        readings = (DomainReading(
            DomainKey(caps.arch or "x86_64", config.virt_type, caps.machine),
            caps=caps), DomainReading(DomainKey("x86_64", config.virt_type,
                                                "pc"), error="refused"))
    inputs = DerivationInputs(
        host=host, host_error=None if host else "not read",
        domains=readings, driver_capabilities=LIBVIRT_CAPABILITIES,
        config=config, cpu_model_features=cpu_model_features,
        libvirt_version=9000000, hypervisor_version=7002000)

    report = derive_traits(inputs, LIBVIRT_FAMILIES)

    assert report.invalid == ()
    for trait in report.results:
        assert LIBVIRT_OWNERSHIP.owns(trait), f"{trait} would leak"
    assert set(report.results) >= LIBVIRT_OWNERSHIP.static
    for result in report.results.values():
        assert result.evidence, f"{result.trait} has no evidence"


def test_nothing_read_means_nothing_asserted_from_documents():
    report = derive_traits(DerivationInputs(host_error="gone"),
                           LIBVIRT_FAMILIES)
    read_from_documents = {"storage bus", "graphics model", "TPM",
                           "firmware", "UEFI Secure Boot",
                           "memory encryption", "architecture",
                           "cpu features"}
    checked = [r for r in report.results.values()
               if r.family in read_from_documents]
    assert {r.family for r in checked} == read_from_documents
    for result in checked:
        assert result.state.value == "unknown", result
