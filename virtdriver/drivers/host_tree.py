"""Put one host's resources and traits into a provider tree.

Shared by every driver that describes a NUMA host (libvirt, fake).

**Nested** (default): the compute node is the root and carries ``DISK_GB``
(when known, with the disk options' reservation and ratio, see
:mod:`virtdriver.conf.disk`) and the host-level traits; each NUMA cell is a child named
``<nodename>_NUMA<id>`` carrying ``VCPU`` (shared CPUs, the CPU allocation
ratio), ``PCPU`` (dedicated CPUs, ratio 1), ``MEMORY_MB`` (the reservation
as ``reserved``, the RAM allocation ratio) and one inventory per huge page
size, plus ``HW_NUMA_ROOT`` and the CPU feature traits — CPU features live
on the providers that hold VCPU and PCPU.

**Flat**: everything on the root, summed over cells, as classic compute
services report it; no cell children (stale ones are removed).

Huge pages are inventories of ``CUSTOM_MEM_PAGE_SIZE_<size in KiB>``
(``CUSTOM_MEM_PAGE_SIZE_2048`` for 2 MiB pages), one unit per page: a
guest asking for 1 GiB of 2 MiB pages claims 512 units.  Page counts are
what the host can prove; the smallest (base) page size is not offered.
Inventories whose total is zero are left out.  Traits go through
:func:`~virtdriver.capabilities.traits.apply.apply_report`: owned traits
follow the report, unknown ones stay as they are, others' are never
touched.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace
from types import MappingProxyType
from typing import Any

import os_resource_classes as orc

from virtdriver.capabilities.host import HostCapabilities
from virtdriver.capabilities.traits.apply import apply_report
from virtdriver.capabilities.traits.derive import TraitReport
from virtdriver.capabilities.traits.host_traits import (
    NUMA, numa_cell_result)
from virtdriver.capabilities.traits.model import TraitResult
from virtdriver.conf.disk import DiskConfig
from virtdriver.drivers.host_resources import CellResources, HostResources
from virtdriver.drivers.identity import child_uuid, is_derived_child

#: Families whose traits belong on the providers that hold CPUs.
CPU_FAMILIES = frozenset({"cpu features"})
PAGE_RC_PREFIX = "CUSTOM_MEM_PAGE_SIZE_"


def cell_provider_name(nodename: str, cell_id: int) -> str:
    """``<nodename>_NUMA<id>``."""
    return f"{nodename}_NUMA{cell_id}"


def page_resource_class(size_kib: int) -> str:
    """``CUSTOM_MEM_PAGE_SIZE_<size in KiB>``."""
    return orc.normalize_name(f"MEM_PAGE_SIZE_{size_kib}")


def _record(total: int, reserved: int = 0, ratio: float = 1.0
            ) -> dict[str, Any]:
    return {"total": total, "reserved": reserved, "min_unit": 1,
            "max_unit": total, "step_size": 1, "allocation_ratio": ratio}


def cell_inventory(cells: Iterable[CellResources], cpu_ratio: float,
                   ram_ratio: float) -> dict[str, dict[str, Any]]:
    """Inventory of ``cells`` together (one cell, or all for flat mode)."""
    vcpus = pcpus = memory = reserved_memory = 0
    pages: dict[int, list[int]] = {}
    for cell in cells:
        vcpus += len(cell.vcpus)
        pcpus += len(cell.pcpus)
        if cell.total_memory_mb is not None:
            memory += cell.total_memory_mb
            reserved_memory += cell.reserved_memory_mb
        for size, pool in cell.huge_pages.items():
            counts = pages.setdefault(size, [0, 0])
            counts[0] += pool.total
            counts[1] += pool.reserved
    inventory = {}
    if vcpus:
        inventory[orc.VCPU] = _record(vcpus, ratio=cpu_ratio)
    if pcpus:
        inventory[orc.PCPU] = _record(pcpus)
    if memory:
        inventory[orc.MEMORY_MB] = _record(
            memory, min(reserved_memory, memory), ram_ratio)
    for size, (total, reserved) in sorted(pages.items()):
        if total:
            inventory[page_resource_class(size)] = _record(
                total, min(reserved, total))
    return inventory


def _subset(report: TraitReport, keep, extra: Iterable[TraitResult] = ()
            ) -> TraitReport:
    results = {t: r for t, r in report.results.items() if keep(r)}
    results.update((r.trait, r) for r in extra)
    return replace(report, results=MappingProxyType(results))


def provider_reports(nodename: str, host: HostCapabilities,
                     report: TraitReport, *, nested: bool = True
                     ) -> dict[str, TraitReport]:
    """Provider name → the trait report its traits follow, root first:
    :func:`publish_host`'s split of the node's ``report``, and what
    ``explain`` explains per provider.

    Nested, the root gets every family but the CPU features and NUMA;
    each cell ``<nodename>_NUMA<id>`` the CPU features and its own
    ``HW_NUMA_ROOT``, asserted.  Flat, the root gets the whole report.
    Each keeps the node's ownership: a name no provider's report answers
    for is left as it is (``apply_report``).
    """
    if not nested:
        return {nodename: report}
    reports = {nodename: _subset(
        report, lambda r: r.family not in CPU_FAMILIES
        and r.family != NUMA.name)}
    for cell in host.cells:
        reports[cell_provider_name(nodename, cell.id)] = _subset(
            report, lambda r: r.family in CPU_FAMILIES,
            (numa_cell_result(host, cell),))
    return reports


def publish_host(tree: Any, nodename: str, *, host: HostCapabilities,
                 resources: HostResources, report: TraitReport,
                 node_uuid: str | None = None, disk_gb: int | None = None,
                 disk: DiskConfig | None = None, nested: bool = True
                 ) -> None:
    """Bring ``nodename``'s providers in ``tree`` up to date (module doc);
    ``disk``: the ``DISK_GB`` reservation and ratio (default: none, 1.0).
    """
    if not tree.exists(nodename):
        tree.new_root(nodename, node_uuid)
    pinning = resources.pinning
    cpu_ratio = pinning.cpu_allocation_ratio
    ram_ratio = pinning.ram_allocation_ratio
    root_inventory: dict[str, dict[str, Any]] = {}
    if disk_gb:
        root_inventory[orc.DISK_GB] = (disk or DiskConfig()).record(disk_gb)
    wanted_cells: dict[str, CellResources] = {}
    reports = provider_reports(nodename, host, report, nested=nested)
    if nested:
        wanted_cells = {cell_provider_name(nodename, c.cell_id): c
                        for c in resources.cells}
    else:
        root_inventory.update(cell_inventory(resources.cells, cpu_ratio,
                                             ram_ratio))
    tree.update_inventory(nodename, root_inventory)
    tree.update_traits(nodename, apply_report(tree.record(nodename).traits,
                                              reports[nodename]))
    _remove_stale_cells(tree, nodename, set(wanted_cells))
    for name, cell in wanted_cells.items():
        if not tree.exists(name):
            tree.new_child(name, nodename,
                           child_uuid(tree.record(nodename).uuid, name))
        tree.update_inventory(name, cell_inventory((cell,), cpu_ratio,
                                                   ram_ratio))
        tree.update_traits(name, apply_report(tree.record(name).traits,
                                              reports[name]))


def _remove_stale_cells(tree: Any, nodename: str, wanted: set[str]) -> None:
    """Remove cell children no longer wanted: only those this module
    made (their uuid is derived from the root's and their name), never a
    provider someone else put under the root."""
    root_uuid = tree.record(nodename).uuid
    prefix = f"{nodename}_NUMA"
    for uuid in tree.get_provider_uuids(nodename):
        data = tree.record(uuid)
        if (data.parent_uuid == root_uuid and data.name.startswith(prefix)
                and data.name not in wanted
                and is_derived_child(uuid, data.name, root_uuid)):
            tree.remove(uuid)
