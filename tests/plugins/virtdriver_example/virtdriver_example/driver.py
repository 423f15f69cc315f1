"""ExampleDriver: a complete virt driver for a host described in arguments.

A real driver reads its hypervisor in ``init_host``; this one is handed the
hardware as constructor arguments, so everything else it does — nodes,
trait report with evidence, inventories, the provider tree, stable
identities — is the real contract, runnable anywhere.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from types import MappingProxyType
from typing import Any

import os_resource_classes as orc
import os_traits

from virtdriver.capabilities.traits.apply import apply_report
from virtdriver.capabilities.traits.derive import TraitReport
from virtdriver.capabilities.traits.model import (
    Evidence, TraitResult, TraitState)
from virtdriver.capabilities.traits.names import custom_trait
from virtdriver.capabilities.traits.ownership import Ownership
from virtdriver.drivers.base import (
    ComputeDriver, DriverError, NodeCapabilities, ProviderTreeLike)
from virtdriver.drivers.identity import root_uuid

#: CPU flag (as the example hardware names it) → standard trait.
CPU_FLAG_TRAITS = MappingProxyType({
    "avx2": os_traits.HW_CPU_X86_AVX2,
    "avx512f": os_traits.HW_CPU_X86_AVX512F,
})
#: Namespace of the node's service-tier trait, ``CUSTOM_EXAMPLE_TIER_GOLD``.
TIER_NAMESPACE = "EXAMPLE_TIER"
TIER_PREFIX = f"CUSTOM_{TIER_NAMESPACE}_"
FAMILY = "example hardware"


class ExampleDriver(ComputeDriver):
    """One node, named after the host, with the hardware given here.

    Args:
        vcpus: CPUs offered to guests.
        memory_mb: memory offered to guests, MiB.
        disk_gb: local disk offered to guests, GiB.
        cpu_flags: flags the CPU has; those in :data:`CPU_FLAG_TRAITS`
            become traits, others are ignored.
        tier: service tier, published as ``CUSTOM_EXAMPLE_TIER_<TIER>``.

    Raises:
        DriverError: ``tier`` has no letters or digits.
    """

    capabilities = MappingProxyType({
        "supports_attach_interface": False,
        "supports_multiattach": False,
        "supports_image_type_raw": True,
    })
    ownership = Ownership(frozenset(CPU_FLAG_TRAITS.values()), (TIER_PREFIX,))
    #: Root uuids are identity.root_uuid("example", nodename): the same on
    #: every run, and provably this driver's (ComputeDriver.recognizes_root).
    root_uuid_kind = "example"

    def __init__(self, *, vcpus: int = 8, memory_mb: int = 16384,
                 disk_gb: int = 100, cpu_flags: Iterable[str] = ("avx2",),
                 tier: str = "gold") -> None:
        if not any(char.isalnum() for char in tier):
            raise DriverError(f"example driver: tier {tier!r} has no letters "
                              "or digits to name its trait; pass e.g. 'gold'")
        self._tier_trait = custom_trait(TIER_NAMESPACE, tier)
        self._tier = tier
        self._vcpus = vcpus
        self._memory_mb = memory_mb
        self._disk_gb = disk_gb
        self._cpu_flags = frozenset(flag.lower() for flag in cpu_flags)
        self._host: str | None = None

    def init_host(self, host: str) -> None:
        """Manage ``host``: its one node is named ``host``."""
        if not host:
            raise DriverError("example driver: init_host needs a host name; "
                              "pass the compute service's host")
        self._host = host

    def get_available_nodes(self, refresh: bool = False) -> list[str]:
        """``[host]``; the list never changes, so ``refresh`` is moot."""
        if self._host is None:
            raise DriverError("example driver: call init_host(host) before "
                              "asking for nodes")
        return [self._host]

    def node_capabilities(self, nodename: str) -> NodeCapabilities:
        """The node's traits (each CPU flag trait asserted or unasserted,
        the tier asserted) and its hardware as facts."""
        self.require_node(nodename)
        return NodeCapabilities(
            nodename=nodename,
            traits=self._trait_report(),
            facts={"vcpus": self._vcpus, "memory_mb": self._memory_mb,
                   "disk_gb": self._disk_gb,
                   "cpu_flags": sorted(self._cpu_flags)})

    def update_provider_tree(
            self, tree: ProviderTreeLike, nodename: str,
            allocations: Mapping[str, Any] | None = None) -> None:
        """Root provider ``nodename`` with VCPU, MEMORY_MB and DISK_GB
        inventory, its traits following :meth:`node_capabilities`."""
        self.require_node(nodename)
        report = self._trait_report()
        if not tree.exists(nodename):
            tree.new_root(nodename, root_uuid(self.root_uuid_kind, nodename))
        tree.update_inventory(nodename, self._inventory())
        tree.update_traits(nodename,
                           apply_report(tree.data(nodename).traits, report))

    def _inventory(self) -> dict[str, dict[str, Any]]:
        return {
            orc.VCPU: {"total": self._vcpus, "allocation_ratio": 4.0},
            orc.MEMORY_MB: {"total": self._memory_mb, "reserved": 512},
            orc.DISK_GB: {"total": self._disk_gb},
        }

    def _trait_report(self) -> TraitReport:
        source = "ExampleDriver(cpu_flags=...)"
        results = [
            TraitResult(
                trait,
                TraitState.ASSERTED if flag in self._cpu_flags
                else TraitState.UNASSERTED,
                FAMILY,
                (Evidence("example hardware",
                          f"{'lists' if flag in self._cpu_flags else 'lacks'}"
                          f" CPU flag {flag!r}", source=source),))
            for flag, trait in sorted(CPU_FLAG_TRAITS.items())]
        results.append(TraitResult(
            self._tier_trait, TraitState.ASSERTED, FAMILY,
            (Evidence("example hardware", f"is in service tier {self._tier!r}",
                      source="ExampleDriver(tier=...)"),)))
        return TraitReport({r.trait: r for r in results}, self.ownership)
