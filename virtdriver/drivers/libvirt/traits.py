"""Derive the libvirt driver's traits from one reading of a host."""

from __future__ import annotations

from collections.abc import Mapping

from virtdriver.capabilities.cpu_map import CPUModelCatalog
from virtdriver.capabilities.traits.derive import TraitReport, derive_traits
from virtdriver.capabilities.traits.model import DerivationInputs
from virtdriver.capabilities.traits.registry import LIBVIRT_FAMILIES
from virtdriver.drivers.libvirt.capabilities import LIBVIRT_CAPABILITIES
from virtdriver.drivers.libvirt.host import HostReading


def trait_report(reading: HostReading,
                 cpu_map: CPUModelCatalog | None = None, *,
                 driver_capabilities: Mapping[str, bool] = LIBVIRT_CAPABILITIES,
                 usable_cpus: frozenset[int] | None = None,
                 online_cpus_note: str | None = None) -> TraitReport:
    """Every libvirt-driver trait for ``reading``, with its evidence.

    The configuration is the one ``reading`` was taken with (its virt
    type and machine types chose the domain capabilities read).  Without
    ``cpu_map`` CPU features implied by a named model are unknown.
    ``online_cpus_note`` says, in evidence naming ``usable_cpus``, that
    libvirt did not report online CPUs (see
    :attr:`~.model.DerivationInputs.online_cpus_note`).
    """
    inputs = DerivationInputs(
        host=reading.host,
        domains=reading.domains,
        driver_capabilities=driver_capabilities,
        config=reading.config,
        cpu_model_features=cpu_map.model_features() if cpu_map else {},
        usable_cpus=usable_cpus,
        online_cpus_note=online_cpus_note,
        libvirt_version=reading.libvirt_version,
        hypervisor_version=reading.hypervisor_version,
    )
    return derive_traits(inputs, LIBVIRT_FAMILIES)
