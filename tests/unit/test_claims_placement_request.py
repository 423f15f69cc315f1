"""placement_request: flavor + image -> the granular candidates request."""

from __future__ import annotations

import os_resource_classes as orc
import os_traits
import pytest

from virtdriver.claims.image_traits import InvalidImage
from virtdriver.claims.model import Flavor, InvalidRequest
from virtdriver.claims.placement_request import (
    CASES, FLOATING_SPLIT, MICROVERSION, PAGE_SIZE_CHOICE, REALTIME_MASK,
    THREAD_SIBLINGS_ISOLATE, THREAD_SIBLINGS_REQUIRE, placement_request)

ROOT = os_traits.HW_NUMA_ROOT
PAGES_2M = "CUSTOM_MEM_PAGE_SIZE_2048"


def cases(request):
    return [u.case for u in request.unexpressed]


def test_no_topology_floats_in_one_unnumbered_group():
    request = placement_request(Flavor(2, 1024, root_gb=10, swap=1), {})
    assert request.query_string() == \
        "resources=DISK_GB:11,MEMORY_MB:1024,VCPU:2"
    assert request.group_policy is None and request.numa is None
    assert cases(request) == [FLOATING_SPLIT]


def test_one_group_per_guest_node_isolated_on_cells():
    request = placement_request(Flavor(8, 4096, {
        "hw:numa_nodes": "2", "hw:cpu_policy": "dedicated",
        "hw:mem_page_size": "2048"}, root_gb=20), {})
    assert request.query_string() == (
        "resources=DISK_GB:20"
        f"&resources1={PAGES_2M}:1024,PCPU:4"
        f"&required1={ROOT}"
        f"&resources2={PAGES_2M}:1024,PCPU:4"
        f"&required2={ROOT}&group_policy=isolate")
    assert cases(request) == []   # everything is expressed


@pytest.mark.parametrize("page, memory", [
    (None, {orc.MEMORY_MB: 2048}), ("small", {orc.MEMORY_MB: 2048}),
    ("4", {orc.MEMORY_MB: 2048}), ("2048", {PAGES_2M: 1024}),
    ("1GB", {"CUSTOM_MEM_PAGE_SIZE_1048576": 2}), ("large", {}),
    ("any", {})])
def test_memory_is_small_pages_or_huge_pages_never_both(page, memory):
    # A cell's MEMORY_MB is its small-page memory: a guest on huge pages
    # asks its pages alone, a guest whose page size is a choice asks no
    # memory class (the claim chooses).
    specs = {"hw:numa_nodes": "1"}
    if page:
        specs["hw:mem_page_size"] = page
    request = placement_request(Flavor(2, 2048, specs), {})
    group = dict(request.group_of(0).resources)
    assert {rc: n for rc, n in group.items() if rc != orc.VCPU} == memory
    assert (PAGE_SIZE_CHOICE in cases(request)) == (page in ("large",
                                                             "any"))


def test_small_page_memory_is_no_longer_a_case():
    assert "small-page-memory" not in CASES


def test_explicit_uneven_nodes_and_mixed_cpus():
    request = placement_request(Flavor(4, 3072, {
        "hw:numa_nodes": "2", "hw:cpu_policy": "mixed",
        "hw:cpu_dedicated_mask": "0-1",
        "hw:numa_cpus.0": "0-2", "hw:numa_mem.0": "2048",
        "hw:numa_cpus.1": "3", "hw:numa_mem.1": "1024"}), {})
    assert dict(request.group_of(0).resources) == {
        orc.PCPU: 2, orc.VCPU: 1, orc.MEMORY_MB: 2048}
    assert dict(request.group_of(1).resources) == {
        orc.VCPU: 1, orc.MEMORY_MB: 1024}


def test_emulator_cpu_is_asked_on_guest_node_0():
    request = placement_request(Flavor(4, 2048, {
        "hw:numa_nodes": "2", "hw:cpu_policy": "dedicated",
        "hw:emulator_threads_policy": "isolate"}), {})
    assert request.group_of(0).resources[orc.PCPU] == 3
    assert request.group_of(1).resources[orc.PCPU] == 2


def test_one_guest_node_needs_no_group_policy():
    request = placement_request(Flavor(2, 1024, {"hw:numa_nodes": "1"}), {})
    assert request.group_policy is None
    assert "group_policy" not in request.query_string()


@pytest.mark.parametrize("specs, case", [
    ({"hw:cpu_policy": "dedicated", "hw:cpu_thread_policy": "isolate"},
     THREAD_SIBLINGS_ISOLATE),
    ({"hw:cpu_policy": "dedicated", "hw:cpu_thread_policy": "require"},
     THREAD_SIBLINGS_REQUIRE),
    ({"hw:cpu_policy": "dedicated", "hw:cpu_realtime": "yes",
      "hw:cpu_realtime_mask": "^0"}, REALTIME_MASK),
    ({"hw:mem_page_size": "large"}, PAGE_SIZE_CHOICE),
])
def test_what_the_tree_cannot_express_is_said(specs, case):
    request = placement_request(Flavor(4, 2048, specs), {})
    assert case in cases(request)
    assert all(u.message and u.to_json()["case"] == u.case
               for u in request.unexpressed)
    assert case in {u["case"] for u in request.to_json()["unexpressed"]}


def test_image_traits_cpu_features_on_the_cells_others_on_the_root():
    request = placement_request(
        Flavor(2, 1024, {"hw:numa_nodes": "2",
                         "trait:CUSTOM_GOLD": "required"}),
        {"hw_disk_bus": "scsi", "trait:HW_CPU_X86_AVX2": "required",
         "trait:HW_CPU_X86_SSE42": "forbidden"}, disk_format="qcow2")
    for node in (0, 1):
        group = request.group_of(node)
        assert group.required == {ROOT, "HW_CPU_X86_AVX2"}
        assert group.forbidden == {"HW_CPU_X86_SSE42"}
    assert request.root_required == {
        "COMPUTE_STORAGE_BUS_SCSI", "COMPUTE_IMAGE_TYPE_QCOW2", "CUSTOM_GOLD"}
    assert "required1=HW_CPU_X86_AVX2,HW_NUMA_ROOT,!HW_CPU_X86_SSE42" in \
        request.query_string()
    assert "root_required=COMPUTE_IMAGE_TYPE_QCOW2,COMPUTE_STORAGE_BUS_SCSI,"\
        "CUSTOM_GOLD" in request.query_string()


def test_json_form_names_the_microversion_and_the_query():
    request = placement_request(Flavor(2, 1024, {"hw:numa_nodes": "2"}), {},
                                limit=5)
    shown = request.to_json()
    assert shown["microversion"] == MICROVERSION == "1.35"
    assert shown["query"].endswith("&limit=5")
    assert [g["guest_node"] for g in shown["groups"]] == [None, 0, 1]


def test_bad_input_is_refused_as_the_claims_refuse_it():
    with pytest.raises(InvalidRequest, match="ImageNUMATopologyForbidden"):
        placement_request(Flavor(2, 1024, {"hw:numa_nodes": "2"}),
                          {"hw_numa_nodes": "2"})
    with pytest.raises(InvalidImage, match="hw_disk_bus"):
        placement_request(Flavor(2, 1024), {"hw_disk_bus": "floppy-ish"})
