"""The "nova" tree profile: one host on one flat root, as Nova reports it.

Beside the NUMA-child tree of :mod:`.host_tree`, this is the shape Nova's
scheduler and resource tracker expect from a libvirt compute node:

* every inventory on the compute node root: ``VCPU`` (shared CPUs, the
  allocation ratio, ``reserved_host_cpus`` reserved), ``PCPU``
  (dedicated CPUs, ratio 1), ``MEMORY_MB`` with Nova's meaning — all of
  the host's memory, huge pages included, ``reserved_host_memory_mb``
  reserved — and ``DISK_GB``;
* no page-size inventory and no cell children (huge pages are Nova's
  NUMA topology business, not Placement's);
* allocation ratios by Nova's precedence (:meth:`NovaProfile.ratios`):
  ``[DEFAULT] *_allocation_ratio`` when set, else what the inventory
  already has, else ``[DEFAULT] initial_*_allocation_ratio``;
* traits through :func:`~virtdriver.capabilities.traits.apply.apply_report`
  on the root: owned traits follow the report, others' (Nova's
  ``COMPUTE_NODE``, capability and status traits, an operator's
  ``CUSTOM_`` ones) are never touched.

Only the calls Nova's ``ProviderTree`` has are used (``exists``,
``new_root``, ``data``, ``update_inventory``, ``update_traits``), so the
same code fills virtdriver's tree and Nova's.

The VCPU to PCPU move (a host that gains ``cpu_dedicated_set`` while
pinned guests still hold ``VCPU``) follows Nova's reshape protocol:
:func:`pcpu_reshape_needed` says when to ask for one (the caller raises
its ``ReshapeNeeded``) and :func:`move_vcpu_to_pcpu` edits the
allocations it is then given.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, MutableMapping
from dataclasses import dataclass
from typing import Any

import os_resource_classes as orc

from virtdriver.capabilities.traits.apply import apply_report
from virtdriver.capabilities.traits.derive import TraitReport
from virtdriver.drivers.host_resources import HostResources
from virtdriver.drivers.host_tree import cell_provider_name
from virtdriver.drivers.identity import is_derived_child

#: Nova's ``initial_*_allocation_ratio`` defaults.
INITIAL_CPU_RATIO = 4.0
INITIAL_RAM_RATIO = 1.0
INITIAL_DISK_RATIO = 1.0


@dataclass(frozen=True, slots=True)
class NovaProfile:
    """Nova's reporting options, by their ``nova.conf`` names.

    Attributes:
        cpu_allocation_ratio, ram_allocation_ratio, disk_allocation_ratio:
            ``[DEFAULT]``; ``None`` when unset (then the inventory's own
            ratio, or the ``initial_*`` one, applies).
        initial_cpu_allocation_ratio, initial_ram_allocation_ratio,
        initial_disk_allocation_ratio: ``[DEFAULT]``, for a new inventory.
        reserved_host_cpus: ``[DEFAULT]``, the ``VCPU`` reservation.
        reserved_host_memory_mb: ``[DEFAULT]``, the ``MEMORY_MB`` one.
        reserved_disk_gb: the ``DISK_GB`` reservation (whole GiB).
    """

    cpu_allocation_ratio: float | None = None
    ram_allocation_ratio: float | None = None
    disk_allocation_ratio: float | None = None
    initial_cpu_allocation_ratio: float = INITIAL_CPU_RATIO
    initial_ram_allocation_ratio: float = INITIAL_RAM_RATIO
    initial_disk_allocation_ratio: float = INITIAL_DISK_RATIO
    reserved_host_cpus: int = 0
    reserved_host_memory_mb: int = 512
    reserved_disk_gb: int = 0

    def ratios(self, inventory: Mapping[str, Mapping[str, Any]]
               ) -> dict[str, float]:
        """``VCPU``, ``MEMORY_MB`` and ``DISK_GB`` ratios by Nova's
        precedence: the option when set, else the inventory's current
        ratio, else the initial one."""
        chosen = {}
        for rc, ratio, initial in (
                (orc.VCPU, self.cpu_allocation_ratio,
                 self.initial_cpu_allocation_ratio),
                (orc.MEMORY_MB, self.ram_allocation_ratio,
                 self.initial_ram_allocation_ratio),
                (orc.DISK_GB, self.disk_allocation_ratio,
                 self.initial_disk_allocation_ratio)):
            if ratio:
                chosen[rc] = float(ratio)
            elif rc in inventory:
                chosen[rc] = float(inventory[rc]["allocation_ratio"])
            else:
                chosen[rc] = float(initial)
        return chosen


def _record(total: int, reserved: int, ratio: float) -> dict[str, Any]:
    return {"total": total, "reserved": max(0, min(reserved, total)),
            "min_unit": 1, "max_unit": total, "step_size": 1,
            "allocation_ratio": ratio}


def host_memory_mb(resources: HostResources) -> int:
    """All the host's memory (MiB) over its NUMA cells, huge pages
    included (Nova's ``MEMORY_MB`` total); 0 when no cell states it."""
    return sum(cell.total_memory_mb or 0 for cell in resources.cells)


def nova_inventory(resources: HostResources, profile: NovaProfile,
                   current: Mapping[str, Mapping[str, Any]],
                   disk_gb: int | None) -> dict[str, dict[str, Any]]:
    """The root's inventory (module doc); zero totals are left out, as
    Placement refuses them."""
    ratios = profile.ratios(current)
    inventory: dict[str, dict[str, Any]] = {}
    memory = host_memory_mb(resources)
    if memory:
        inventory[orc.MEMORY_MB] = _record(
            memory, profile.reserved_host_memory_mb, ratios[orc.MEMORY_MB])
    if vcpus := len(resources.vcpus):
        inventory[orc.VCPU] = _record(vcpus, profile.reserved_host_cpus,
                                      ratios[orc.VCPU])
    if pcpus := len(resources.pcpus):
        inventory[orc.PCPU] = _record(pcpus, 0, 1.0)
    if disk_gb:
        inventory[orc.DISK_GB] = _record(disk_gb, profile.reserved_disk_gb,
                                         ratios[orc.DISK_GB])
    return inventory


def publish_nova(tree: Any, nodename: str, *, resources: HostResources,
                 report: TraitReport, profile: NovaProfile,
                 disk_gb: int | None, node_uuid: str | None = None) -> None:
    """Bring ``nodename``'s root in ``tree`` up to date (module doc)."""
    if not tree.exists(nodename):
        tree.new_root(nodename, node_uuid)
    data = tree.data(nodename)
    _remove_numa_cells(tree, data.uuid, nodename)
    tree.update_inventory(nodename, nova_inventory(
        resources, profile, data.inventory, disk_gb))
    tree.update_traits(nodename, apply_report(data.traits, report))


def _remove_numa_cells(tree: Any, root_uuid: str, nodename: str) -> None:
    """A node that had the NUMA-child profile: remove the cell children
    virtdriver made (uuid derived from the root's and the name), never a
    provider someone else put under the root."""
    prefix = cell_provider_name(nodename, 0)[:-1]
    for uuid in tree.get_provider_uuids(nodename):
        data = tree.data(uuid)
        if (data.parent_uuid == root_uuid and data.name.startswith(prefix)
                and is_derived_child(uuid, data.name, root_uuid)):
            tree.remove(uuid)


def pcpu_reshape_needed(current: Mapping[str, Any],
                        wanted: Mapping[str, Any],
                        pinned_guests: Callable[[], bool]) -> bool:
    """Whether publishing ``wanted`` over the root's ``current``
    inventory moves ``VCPU`` allocations to ``PCPU``: the root gains
    ``PCPU``, it had ``VCPU``, and guests with dedicated CPUs are on the
    host (only they move; ``pinned_guests`` is asked last, as it may
    read a database)."""
    return (orc.PCPU in wanted and orc.PCPU not in current
            and orc.VCPU in current and pinned_guests())


def move_vcpu_to_pcpu(allocations: MutableMapping[str, Any], root_uuid: str,
                      pinned: Callable[[str], bool]) -> list[str]:
    """Move each pinned consumer's ``VCPU`` on ``root_uuid`` to ``PCPU``,
    in place (Nova's allocations shape: consumer -> ``allocations`` ->
    provider -> ``resources``); the consumers moved."""
    moved = []
    for consumer, record in allocations.items():
        if not pinned(consumer):
            continue
        resources = (record.get("allocations", {}).get(root_uuid, {})
                     .get("resources"))
        if not resources or orc.VCPU not in resources:
            continue
        resources[orc.PCPU] = resources.get(orc.PCPU, 0) + resources.pop(
            orc.VCPU)
        moved.append(consumer)
    return moved


