"""Domain-derived traits against real libvirt and QEMU (``qemu:///embed``).

The storage bus and graphics model families must assert exactly what the
live document lists, no more and no less.  Skipped like ``test_embed.py``
when QEMU or libvirt's QEMU driver is missing, failed instead under CI.
"""

from __future__ import annotations

import os_traits
import pytest

from virtdriver.capabilities.traits import devices, firmware
from virtdriver.capabilities.traits import guest_models
from virtdriver.capabilities.traits import memory_encryption
from virtdriver.capabilities.traits.model import (
    DerivationInputs, TraitState)
from virtdriver.drivers.libvirt.host import Unknown

pytestmark = pytest.mark.real


@pytest.fixture(scope="module")
def inputs(reading):
    """Derivation inputs for the host arch's default machine type."""
    assert not isinstance(reading.domain, Unknown), reading.domain
    assert reading.libvirt_version and reading.hypervisor_version
    return DerivationInputs(host=reading.host, domains=reading.domains[:1],
                            libvirt_version=reading.libvirt_version,
                            hypervisor_version=reading.hypervisor_version)


def asserted(family, inputs):
    return {r.trait for r in family.derive(inputs)
            if r.state is TraitState.ASSERTED}


def known(prefix, values):
    """The os-traits names for libvirt enum values that have one."""
    names = set(os_traits.get_traits(prefix))
    return {prefix + value.upper() for value in values} & names


def test_storage_buses_are_exactly_the_listed_disk_buses(inputs):
    caps = inputs.domains[0].caps
    expected = known("COMPUTE_STORAGE_BUS_", caps.disk_buses)

    assert os_traits.COMPUTE_STORAGE_BUS_VIRTIO in expected
    assert asserted(devices.STORAGE_BUS, inputs) == expected


def test_graphics_models_are_exactly_the_listed_video_models(inputs):
    caps = inputs.domains[0].caps
    expected = known("COMPUTE_GRAPHICS_MODEL_", caps.video_models)

    assert os_traits.COMPUTE_GRAPHICS_MODEL_VIRTIO in expected
    assert asserted(devices.GRAPHICS_MODEL, inputs) == expected


def test_every_domain_family_answers_for_each_trait(inputs):
    families = devices.FAMILIES + guest_models.FAMILIES + (
        *firmware.FAMILIES, memory_encryption.FAMILY)
    for family in families:
        results = list(family.derive(inputs))
        assert sorted(r.trait for r in results) == sorted(family.traits)
        assert all(r.evidence for r in results)


def test_tpm_traits_follow_the_emulator_backend(inputs):
    tpm = inputs.domains[0].caps.devices.tpm
    results = {r.trait: r.state for r in devices.TPM.derive(inputs)}
    tis = results[os_traits.COMPUTE_SECURITY_TPM_TIS]

    if not tpm.supported:
        assert tis is not TraitState.ASSERTED
    elif "emulator" in tpm.values("backendModel"):
        assert (tis is TraitState.ASSERTED) == (
            "tpm-tis" in tpm.values("model"))
    else:
        # No swtpm installed: libvirt offers passthrough only.
        assert set(results.values()) == {TraitState.UNASSERTED}
