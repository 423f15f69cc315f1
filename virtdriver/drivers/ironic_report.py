"""The ironic driver's trait reports: capabilities once, nodes each.

:data:`IRONIC_CAPABILITIES` makes the ``COMPUTE_*`` results, the same for
every node: :class:`NodeReports` derives them once per driver and groups
them by state once, and each node's report adds the node's own few
inspection traits (asserted, removed, and stale: set before and no longer
named) with their evidence.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from virtdriver.capabilities.traits import capability_flags
from virtdriver.capabilities.traits.config import TraitConfig
from virtdriver.capabilities.traits.derive import TraitReport
from virtdriver.capabilities.traits.model import (
    DerivationInputs, Evidence, TraitResult, TraitState)
from virtdriver.capabilities.traits.ownership import Ownership
from virtdriver.drivers.ironic_inventory import BareMetalNode

#: What bare metal can do, as Nova's ironic driver declares it.  Every
#: ``supports_*`` name of :data:`capability_flags.CAPABILITY_TRAITS` is
#: declared, so each ``COMPUTE_*`` trait is decided, never left out.  Images
#: are written to the node's disk by the deploy ramdisk, which takes whole
#: disk images as raw or qcow2 (and partition images, glance's ami);
#: kernel/ramdisk (aki/ari) are not deployable alone, and iso and the
#: hypervisor formats (vmdk, vhd, vhdx, vdi, ploop) are not deployed.
IRONIC_CAPABILITIES: Mapping[str, bool] = MappingProxyType({
    "has_imagecache": False,
    "supports_evacuate": False,
    "supports_migrate_to_same_host": False,
    "supports_attach_interface": True,
    "supports_device_tagging": False,
    "supports_tagged_attach_interface": False,
    "supports_tagged_attach_volume": False,
    "supports_extend_volume": False,
    "supports_multiattach": False,
    "supports_trusted_certs": False,
    "supports_accelerators": False,
    "supports_socket_pci_numa_affinity": False,
    "supports_remote_managed_ports": False,
    "supports_address_space_passthrough": False,
    "supports_address_space_emulated": False,
    "supports_mem_backing_file": False,
    "supports_virtio_fs": False,
    "supports_rescue_bfv": False,
    "supports_same_host_cold_migrate": False,
    "supports_ephemeral_encryption": False,
    "supports_ephemeral_encryption_luks": False,
    "supports_ephemeral_encryption_plain": False,
    "supports_image_type_aki": False,
    "supports_image_type_ami": True,
    "supports_image_type_ari": False,
    "supports_image_type_iso": False,
    "supports_image_type_qcow2": True,
    "supports_image_type_raw": True,
    "supports_image_type_ploop": False,
    "supports_image_type_vdi": False,
    "supports_image_type_vhd": False,
    "supports_image_type_vhdx": False,
    "supports_image_type_vmdk": False,
})

#: The ``COMPUTE_*`` traits following :data:`IRONIC_CAPABILITIES`; owned on
#: every node, so inspection data may not name them.
CAPABILITY_TRAITS = capability_flags.FAMILY.traits
#: The family name inspection-data traits are reported under.
FAMILY = "node inspection"


class NodeReports:
    """Builds each node's :class:`TraitReport`.

    Args:
        excluded: ``[compute] image_type_exclude_list``.
        source: the inventory file, named in every piece of evidence.
    """

    def __init__(self, excluded: tuple[str, ...], source: str) -> None:
        self._results = _capability_results(excluded)
        self._source = source
        # The capability results by state, once: each node's report adds
        # its own few (if they answer for exactly the capability traits).
        grouped = TraitReport(self._results, Ownership(), checked=True)
        self._groups = ({state: grouped.names(state) for state in TraitState}
                        if frozenset(self._results) == CAPABILITY_TRAITS
                        else None)

    def report(self, node: BareMetalNode, stale: frozenset[str],
               owned: Ownership) -> TraitReport:
        """Capability traits, then the node's inspection traits and any it
        set before that the inspection data no longer names (``owned``:
        those names, the report's ownership)."""
        who = (f"node {node.name} ({node.uuid})" if node.name != node.uuid
               else f"node {node.uuid}")
        document = f"{who} inspection data"
        source = self._source
        results = dict(self._results)
        for trait in node.asserted_traits:
            results[trait] = TraitResult(trait, TraitState.ASSERTED, FAMILY, (
                Evidence(document, f"lists {trait}", source=source),))
        for trait in node.removed_traits:
            results[trait] = TraitResult(
                trait, TraitState.UNASSERTED, FAMILY, (Evidence(
                    document, f"lists {trait} as removed", source=source),))
        for trait in stale:
            results[trait] = TraitResult(
                trait, TraitState.UNASSERTED, FAMILY, (Evidence(
                    document, f"no longer names {trait}, which this driver "
                    "set from it before", source=source),))
        groups = self._groups
        if groups is None or len(results) != len(
                self._results) + len(node.asserted_traits) + len(
                node.removed_traits) + len(stale):
            # A name in two of the groups: regroup them all.
            return TraitReport(results, Ownership(frozenset(results)))
        return _NodeReport(results, owned, {
            TraitState.ASSERTED: groups[TraitState.ASSERTED]
            | node.asserted_traits,
            TraitState.UNASSERTED: groups[TraitState.UNASSERTED]
            | node.removed_traits | stale,
            TraitState.UNKNOWN: groups[TraitState.UNKNOWN]})


class _NodeReport(TraitReport):
    """A node's :class:`TraitReport`, its traits by state given (the
    capability results' groups, made once per driver, and the node's own
    few) instead of regrouping every result for every node; the same
    report otherwise (``tests/functional/test_ironic_driver.py`` checks)."""

    def __init__(self, results: Mapping[str, TraitResult],
                 ownership: Ownership,
                 groups: Mapping[TraitState, frozenset[str]]) -> None:
        object.__setattr__(self, "results", results)
        object.__setattr__(self, "ownership", ownership)
        object.__setattr__(self, "invalid", ())
        object.__setattr__(self, "_by_state", MappingProxyType(dict(groups)))



def _capability_results(excluded: tuple[str, ...]
                        ) -> Mapping[str, TraitResult]:
    """The ``COMPUTE_*`` results, the same for every node: derived once."""
    inputs = DerivationInputs(
        driver_capabilities=IRONIC_CAPABILITIES,
        config=TraitConfig(image_type_exclude_list=excluded))
    return MappingProxyType({result.trait: result for result
                             in capability_flags.FAMILY.derive(inputs)})
