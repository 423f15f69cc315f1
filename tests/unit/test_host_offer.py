"""What a node's inventories can never hold of a Placement request."""

from __future__ import annotations

import os_resource_classes as orc

from virtdriver.claims.host_offer import capacity, shortfalls
from virtdriver.claims.model import Flavor
from virtdriver.claims.placement_request import placement_request


def record(total, reserved=0, ratio=1.0, max_unit=None):
    return {"total": total, "reserved": reserved, "allocation_ratio": ratio,
            "max_unit": total if max_unit is None else max_unit}


def test_capacity_is_what_one_allocation_may_take():
    assert capacity(record(16, reserved=2, ratio=4.0, max_unit=64)) == 56
    assert capacity(record(16, reserved=2, ratio=4.0, max_unit=8)) == 8
    assert capacity(record(4, reserved=8)) == 0


def test_a_class_no_provider_offers_is_a_shortfall_naming_how():
    request = placement_request(
        Flavor(2, 1024, {"hw:cpu_policy": "dedicated"}, root_gb=10), {})
    node = {"n": {}, "n_NUMA0": {orc.VCPU: record(8),
                                 orc.MEMORY_MB: record(4096)}}
    found = {(s.group, s.resource_class): s for s in shortfalls(request,
                                                                  node)}
    assert set(found) == {("", orc.DISK_GB), ("1", orc.PCPU)}
    assert found[("1", orc.PCPU)].most == 0
    assert "cpu_dedicated_set" in found[("1", orc.PCPU)].message
    assert "disk_gb" in found[("", orc.DISK_GB)].message


def test_too_big_for_any_one_provider_but_not_for_two():
    request = placement_request(Flavor(2, 6000, {"hw:numa_nodes": "1"}), {})
    cells = {f"n_NUMA{i}": {orc.VCPU: record(8),
                            orc.MEMORY_MB: record(4096)} for i in (0, 1)}
    (short,) = shortfalls(request, cells)
    assert (short.resource_class, short.amount, short.most) == (
        orc.MEMORY_MB, 6000, 4096)
    assert "more than any one provider" in short.message
    cells["n_NUMA1"][orc.MEMORY_MB] = record(8192)
    assert shortfalls(request, cells) == []
