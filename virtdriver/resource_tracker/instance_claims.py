"""Instance claims on a tracker's nodes: fit, record, release, rebuild.

The pure rules live in :mod:`virtdriver.claims`; this module applies them
to a driver's nodes and the claims file, for :class:`~.tracker.
ResourceTracker` (which calls it holding the state directory's lock and
the tree's, so claims from many threads and processes are serialised and
never overcommit).
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from virtdriver.claims.allocation import (
    allocated_cells, corrected_allocations, refusal)
from virtdriver.claims.constraints import numa_constraints
from virtdriver.claims.device_claim import DevicesRefused
from virtdriver.claims.device_request import PciAlias, device_requests
from virtdriver.resource_tracker.device_claims import (
    DeviceContext, narrow_node0, take_devices)
from virtdriver.claims.fit import DoesNotFit, fit
from virtdriver.claims.placement_request import unexpressed
from virtdriver.claims.model import ClaimError, Instance
from virtdriver.claims.rebuild import ProviderInfo, check_rebuild
from virtdriver.claims.usage import (
    HostUsage, InstanceFit, UnknownClaim, claim, inventory_usage, release)
from virtdriver.drivers.base import ComputeDriver
from virtdriver.drivers.host_resources import HostResources
from virtdriver.drivers.host_tree import cell_provider_name
from virtdriver.resource_tracker.claims_file import ClaimsFile
from virtdriver.resource_tracker.snapshot import TreeReader


class NotClaimable(ClaimError):
    """The node has no NUMA host to claim on (a bare-metal node is taken
    whole, through its Placement allocation)."""


def host_of(driver: ComputeDriver, nodename: str) -> HostResources:
    """``nodename``'s NUMA cells.

    Raises:
        NotClaimable: the driver has none for it.
        NodeNotFoundError: not one of the driver's nodes.
    """
    host = driver.node_resources(nodename)
    if host is None:
        raise NotClaimable(
            f"node {nodename!r} has no NUMA cells to claim on (driver "
            f"{type(driver).__name__}); its instances take the whole node "
            "through their Placement allocation, nothing to claim here")
    return host


def claim_instance(driver: ComputeDriver, claims: ClaimsFile,
                   instance: Instance, nodename: str, *,
                   allocations: Mapping[str, Mapping[str, int]] | None = None,
                   tree: TreeReader | None = None,
                   aliases: Mapping[str, PciAlias] | None = None
                   ) -> InstanceFit:
    """Fit ``instance`` on ``nodename`` and record the claim.

    With ``allocations`` (the scheduler's, ``{provider uuid: {resource
    class: amount}}``) each guest node is pinned within the cell the
    allocation gave it (cell providers looked up in ``tree``), or the
    claim is refused and nothing changes.  Devices the flavor asks
    (``aliases``: ``[pci] alias``) are chosen within the allocation's
    device providers, or on any of the node's without one
    (:mod:`.device_claims`).

    Raises:
        InvalidRequest: the flavor and image make no valid request.
        DoesNotFit: no cell arrangement fits (every cell's reason).
        AllocationRefused: it does not fit within the allocation's cells.
        ClaimConflict: the instance already holds a claim on some node.
        NotClaimable, NodeNotFoundError, ClaimsFileError.
    """
    host = host_of(driver, nodename)
    holder = _holder(claims, instance.uuid)
    if holder is not None:
        raise ClaimError(
            f"instance {instance.uuid} already holds a claim on node "
            f"{holder!r}; release it first (`virtdriver release "
            f"--instance {instance.uuid}`); a rebuild claims nothing new: "
            "check one with `virtdriver rebuild-check`")
    usage = claims.usage(nodename, host)
    request = numa_constraints(instance.flavor, instance.image_properties)
    wanted = device_requests(instance.flavor.extra_specs,
                             instance.image_properties, aliases)
    devices = (DeviceContext.of(driver, tree, nodename, usage, wanted,
                                allocations)
               if wanted or allocations is not None else None)
    if devices is not None and not wanted and not devices.allocation:
        devices = None         # no device asked, none allocated
    allowed = None
    if allocations is not None:
        if tree is None or not tree.exists(nodename):
            raise ClaimError(f"node {nodename!r} is not in the provider "
                             "tree; update the tracker before claiming "
                             "with an allocation")
        allowed = allocated_cells(request, allocations,
                                  _cell_providers(tree, nodename, host),
                                  tree.data(nodename).uuid, instance.uuid)
    if devices is not None and request is not None:
        allowed = narrow_node0(devices, request, host, allowed,
                               instance.uuid)
    try:
        found = fit(request, instance.flavor, host, usage,
                    cpu_allocation_ratio=host.pinning.cpu_allocation_ratio,
                    instance_uuid=instance.uuid, allowed=allowed)
    except DoesNotFit as exc:
        if allocations is None:
            raise
        raise refusal(instance.uuid, allowed, exc.reasons,
                      unexpressed(request)) from None
    if devices is not None:
        try:
            found = take_devices(devices, found)
        except DevicesRefused as exc:
            raise devices.refused(exc, allowed) from None
    updated = claim(usage, found, host)
    claims.save({**_all(driver, claims), nodename: updated})
    return found


def allocation_correction(driver: ComputeDriver, tree: TreeReader,
                          nodename: str,
                          allocations: Mapping[str, Mapping[str, int]],
                          found: InstanceFit
                          ) -> dict[str, dict[str, int]] | None:
    """The scheduler's ``allocations`` as the claim ``found`` really
    consumes them (isolated siblings and the emulator CPU counted on their
    cells), or ``None`` when they already agree: what the compute service
    writes back to Placement through the consumer's generation."""
    host = host_of(driver, nodename)
    return corrected_allocations(allocations, found,
                                 _cell_providers(tree, nodename, host))


def _cell_providers(tree: TreeReader, nodename: str, host: HostResources
                    ) -> dict[str, int]:
    """This node's cell provider uuids → cell ids (those in the tree)."""
    found = {}
    for cell in host.cells:
        name = cell_provider_name(nodename, cell.cell_id)
        if tree.exists(name):
            found[tree.data(name).uuid] = cell.cell_id
    return found


def release_instance(driver: ComputeDriver, claims: ClaimsFile,
                     instance_uuid: str) -> str:
    """Free exactly what ``instance_uuid`` took; return its node.

    Raises:
        UnknownClaim: no node holds a claim of it.
    """
    nodename = _holder(claims, instance_uuid)
    if nodename is None:
        raise UnknownClaim(
            f"instance {instance_uuid} holds no claim on this host's nodes "
            f"({_held(claims)}); nothing to release, check the uuid")
    usages = _all(driver, claims)
    usages[nodename] = release(usages[nodename], instance_uuid)
    claims.save(usages)
    return nodename


def all_claims(driver: ComputeDriver, claims: ClaimsFile
               ) -> dict[str, HostUsage]:
    """nodename → its claims, each checked against its host."""
    return _all(driver, claims)


def provider_usages(driver: ComputeDriver, claims: ClaimsFile,
                    tree: TreeReader) -> dict[str, Mapping[str, int]]:
    """Provider uuid → resource class → amount used by claims, for the
    providers the tree has (a cell's child provider, or the root for a
    flat tree and for instances without a NUMA topology)."""
    result: dict[str, dict[str, int]] = {}
    for nodename, usage in _all(driver, claims).items():
        if nodename not in driver.get_available_nodes():
            continue  # a node this host no longer has uses none of its
        host = driver.node_resources(nodename)
        if host is None or not tree.exists(nodename):
            continue
        root = tree.record(nodename).uuid
        for cell_id, row in inventory_usage(usage, host).items():
            name = (None if cell_id is None
                    else cell_provider_name(nodename, cell_id))
            target = (tree.record(name).uuid if name and tree.exists(name)
                      else root)
            into = result.setdefault(target, {})
            for rc, amount in row.items():
                into[rc] = into.get(rc, 0) + amount
        for held in usage.instances.values():
            for device in held.devices:
                if tree.exists(device.provider):
                    into = result.setdefault(
                        tree.record(device.provider).uuid, {})
                    into[device.resource_class] = into.get(
                        device.resource_class, 0) + len(device.units)
    return {uuid: MappingProxyType(row) for uuid, row in result.items()}


def check_rebuild_claim(instance: Instance,
                        new_image_properties: Mapping[str, Any],
                        tree: TreeReader,
                        sharing: Mapping[str, ProviderInfo] | None = None,
                        *, disk_format: str | None = None) -> None:
    """The no-op rebuild claim: refuse (every reason) or return.

    Allocated providers are looked up in ``tree`` (their traits and their
    tree's root), then in ``sharing`` (providers outside the tree, such as
    a sharing storage provider, with their traits).  ``disk_format`` is the
    new image's, when known (its ``COMPUTE_IMAGE_TYPE_*`` trait is checked
    like the traits its properties imply).

    Raises:
        RebuildRefused: carrying every conflict.
    """
    extra = dict(sharing or {})

    def lookup(uuid: str) -> ProviderInfo | None:
        if tree.exists(uuid):
            data = tree.record(uuid)
            return ProviderInfo(data.traits, data.root_uuid, data.name)
        return extra.get(uuid)

    check_rebuild(instance, new_image_properties, lookup,
                  disk_format=disk_format)


def _all(driver: ComputeDriver, claims: ClaimsFile) -> dict[str, HostUsage]:
    usages = {}
    for nodename in claims.nodes():
        usages[nodename] = claims.usage(nodename, _host_or_none(
            driver, nodename))
    return usages


def _host_or_none(driver: ComputeDriver, nodename: str
                  ) -> HostResources | None:
    """The node's host, to check its claims against; ``None`` (check the
    document alone) for a node the driver no longer has."""
    if nodename not in driver.get_available_nodes():
        return None
    return driver.node_resources(nodename)


def _holder(claims: ClaimsFile, instance_uuid: str) -> str | None:
    for nodename, document in claims.nodes().items():
        instances = document.get("instances") if isinstance(
            document, dict) else None
        if isinstance(instances, dict) and instance_uuid in instances:
            return nodename
    return None


def _held(claims: ClaimsFile) -> str:
    count = sum(len(d.get("instances", {})) for d in claims.nodes().values()
                if isinstance(d, dict))
    return f"{count} claim(s) held" if count else "no claims held"

