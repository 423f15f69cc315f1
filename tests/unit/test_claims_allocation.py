"""allocation: the scheduler's allocation read against a NUMA request, and
the allocation as the claim consumes it (pure)."""

from __future__ import annotations

import os_resource_classes as orc
import pytest

from virtdriver.claims.allocation import (
    AllocationRefused, allocated_cells, claim_consumption,
    corrected_allocations, refusal)
from virtdriver.claims.constraints import numa_constraints
from virtdriver.claims.model import Flavor
from virtdriver.claims.placement_request import unexpressed
from virtdriver.claims.usage import CellFit, InstanceFit

ROOT, CELL0, CELL1, SHARED = "root", "cell-0", "cell-1", "disk-pool"
CELLS = {CELL0: 0, CELL1: 1}
UUID = "11111111-2222-4333-8444-555555555555"


def request(**specs):
    return numa_constraints(Flavor(4, 2048, specs), {})


def test_alike_guest_nodes_may_take_either_allocated_cell():
    two = request(**{"hw:numa_nodes": "2", "hw:cpu_policy": "dedicated"})
    allowed = allocated_cells(two, {
        CELL0: {orc.PCPU: 2, orc.MEMORY_MB: 1024},
        CELL1: {orc.PCPU: 2, orc.MEMORY_MB: 1024},
        ROOT: {orc.DISK_GB: 10}, SHARED: {orc.DISK_GB: 5}}, CELLS, ROOT,
        UUID)
    assert allowed == {0: {0, 1}, 1: {0, 1}}


def test_a_floating_instance_is_not_bound_to_cells():
    assert allocated_cells(None, {CELL1: {orc.VCPU: 4}}, CELLS, ROOT,
                           UUID) is None
    with pytest.raises(AllocationRefused, match="not a NUMA cell"):
        allocated_cells(None, {"elsewhere": {orc.VCPU: 4}}, CELLS, ROOT,
                        UUID)


def test_a_refusal_names_only_the_cases_its_reasons_fall_under():
    numa = request(**{"hw:cpu_policy": "dedicated",
                      "hw:cpu_thread_policy": "require"})
    refused = refusal(UUID, {0: frozenset({1})}, [
        "cell 1: needs 4 dedicated CPUs with thread policy require, 2 free "
        "as thread siblings"], unexpressed(numa))
    assert refused.cases == ("thread-policy-require",)
    assert "within the allocated cells 1" in str(refused)
    plain = refusal(UUID, {0: frozenset({1})},
                    ["cell 1: needs 4 dedicated CPUs, 2 free"],
                    unexpressed(numa))
    assert plain.cases == ()   # Placement should have known: a disagreement


def isolated_fit() -> InstanceFit:
    return InstanceFit(UUID, (CellFit(0, 1, {0: 2, 1: 3}, frozenset(), 1024,
                                      2048, frozenset({6, 7}),
                                      frozenset({4})),), "isolate")


def test_the_claim_consumes_siblings_and_the_emulator_cpu_on_its_cell():
    # 1 GiB of 2 MiB pages: the pages, and no MEMORY_MB beside them.
    assert claim_consumption(isolated_fit()) == {1: {
        orc.PCPU: 5, "CUSTOM_MEM_PAGE_SIZE_2048": 512}}


def test_the_corrected_allocation_keeps_other_providers():
    given = {CELL1: {orc.PCPU: 3, "CUSTOM_MEM_PAGE_SIZE_2048": 512},
             ROOT: {orc.DISK_GB: 10}}
    assert corrected_allocations(given, isolated_fit(), CELLS) == {
        CELL1: {orc.PCPU: 5, "CUSTOM_MEM_PAGE_SIZE_2048": 512},
        ROOT: {orc.DISK_GB: 10}}
    again = corrected_allocations(given, isolated_fit(), CELLS)
    assert corrected_allocations(again, isolated_fit(), CELLS) is None
