"""numa_constraints and consumption: every key, valid and invalid."""

from __future__ import annotations

import os_resource_classes as orc
import os_traits
import pytest

from virtdriver.claims.constraints import numa_constraints
from virtdriver.claims.consumption import consumption
from virtdriver.claims.model import Flavor, InvalidRequest, NUMARequest
from virtdriver.drivers.host_tree import page_resource_class

HT = f"trait:{os_traits.HW_CPU_HYPERTHREADING}"
HT1 = f"trait1:{os_traits.HW_CPU_HYPERTHREADING}"
RES_VCPU, RES_PCPU = f"resources:{orc.VCPU}", f"resources:{orc.PCPU}"


def request_for(specs, props=None, vcpus=4, memory=4096):
    return numa_constraints(Flavor(vcpus, memory, specs), props or {})


def cells(request: NUMARequest):
    """(cpus, memory, dedicated) per node, as sorted lists."""
    return [(sorted(c.cpus), c.memory_mb, sorted(c.dedicated_cpus))
            for c in request.cells]


ALL = [0, 1, 2, 3]

# id, flavor extra specs, image properties, (vcpus, memory),
# expected cells, expected fields
VALID = [
    ("even split over hw:numa_nodes", {"hw:numa_nodes": "2"}, {}, None,
     [([0, 1], 2048, []), ([2, 3], 2048, [])], {"cpu_policy": "shared"}),
    ("image hw_numa_nodes", {}, {"hw_numa_nodes": "2"}, None,
     [([0, 1], 2048, []), ([2, 3], 2048, [])], {}),
    ("image node count equal to the flavor's", {"hw:numa_nodes": "2"},
     {"hw_numa_nodes": "2"}, None,
     [([0, 1], 2048, []), ([2, 3], 2048, [])], {}),
    ("image node count as a JSON number", {}, {"hw_numa_nodes": 2}, None,
     [([0, 1], 2048, []), ([2, 3], 2048, [])], {}),
    ("flavor per-node CPUs and memory",
     {"hw:numa_nodes": "2", "hw:numa_cpus.0": "0", "hw:numa_cpus.1": "1-3",
      "hw:numa_mem.0": "1024", "hw:numa_mem.1": "3072"}, {}, None,
     [([0], 1024, []), ([1, 2, 3], 3072, [])], {}),
    ("image per-node keys refine the flavor's node count",
     {"hw:numa_nodes": "2"},
     {"hw_numa_cpus.0": "0-2", "hw_numa_cpus.1": "3",
      "hw_numa_mem.0": "3072", "hw_numa_mem.1": "1024"}, None,
     [([0, 1, 2], 3072, []), ([3], 1024, [])], {}),
    ("per-node keys with an implied single node",
     {"hw:cpu_policy": "dedicated", "hw:numa_cpus.0": "0-3",
      "hw:numa_mem.0": "4096"}, {}, None, [(ALL, 4096, ALL)], {}),
    ("dedicated policy", {"hw:cpu_policy": "dedicated"}, {}, None,
     [(ALL, 4096, ALL)],
     {"cpu_policy": "dedicated", "cpu_thread_policy": "prefer",
      "emulator_threads_policy": None}),
    ("image dedicated policy under an open flavor", {},
     {"hw_cpu_policy": "dedicated"}, None, [(ALL, 4096, ALL)],
     {"cpu_policy": "dedicated"}),
    ("a dedicated flavor wins over an image's shared policy",
     {"hw:cpu_policy": "dedicated"}, {"hw_cpu_policy": "shared"}, None,
     [(ALL, 4096, ALL)], {"cpu_policy": "dedicated"}),
    ("mixed with a dedicated mask",
     {"hw:cpu_policy": "mixed", "hw:cpu_dedicated_mask": "^0"}, {}, None,
     [(ALL, 4096, [1, 2, 3])], {"cpu_policy": "mixed"}),
    ("mixed with an explicit mask",
     {"hw:cpu_policy": "mixed", "hw:cpu_dedicated_mask": "2-3"}, {}, None,
     [(ALL, 4096, [2, 3])], {}),
    ("a mixed flavor wins over an image's shared policy",
     {"hw:cpu_policy": "mixed", "hw:cpu_dedicated_mask": "^0"},
     {"hw_cpu_policy": "shared"}, None, [(ALL, 4096, [1, 2, 3])],
     {"cpu_policy": "mixed"}),
    ("mixed over two nodes",
     {"hw:cpu_policy": "mixed", "hw:cpu_dedicated_mask": "1,3",
      "hw:numa_nodes": "2"}, {}, None,
     [([0, 1], 2048, [1]), ([2, 3], 2048, [3])], {}),
    ("thread policy isolate",
     {"hw:cpu_policy": "dedicated", "hw:cpu_thread_policy": "isolate"}, {},
     None, [(ALL, 4096, ALL)], {"cpu_thread_policy": "isolate"}),
    ("image thread policy under an open flavor",
     {"hw:cpu_policy": "dedicated"}, {"hw_cpu_thread_policy": "require"},
     None, [(ALL, 4096, ALL)], {"cpu_thread_policy": "require"}),
    ("flavor thread policy prefer stands against the image's",
     {"hw:cpu_policy": "dedicated", "hw:cpu_thread_policy": "prefer"},
     {"hw_cpu_thread_policy": "isolate"}, None, [(ALL, 4096, ALL)],
     {"cpu_thread_policy": "prefer"}),
    ("image thread policy equal to the flavor's",
     {"hw:cpu_policy": "dedicated", "hw:cpu_thread_policy": "isolate"},
     {"hw_cpu_thread_policy": "isolate"}, None, [(ALL, 4096, ALL)],
     {"cpu_thread_policy": "isolate"}),
    ("emulator threads isolate",
     {"hw:cpu_policy": "dedicated", "hw:emulator_threads_policy": "isolate"},
     {}, None, [(ALL, 4096, ALL)], {"emulator_threads_policy": "isolate"}),
    ("emulator threads share",
     {"hw:cpu_policy": "dedicated", "hw:emulator_threads_policy": "share"},
     {}, None, [(ALL, 4096, ALL)], {"emulator_threads_policy": "share"}),
    ("realtime with an exclusion mask",
     {"hw:cpu_policy": "dedicated", "hw:cpu_realtime": "yes",
      "hw:cpu_realtime_mask": "^0"}, {}, None, [(ALL, 4096, ALL)],
     {"realtime_cpus": frozenset({1, 2, 3})}),
    ("the image's realtime mask is the more specific",
     {"hw:cpu_policy": "dedicated", "hw:cpu_realtime": "true",
      "hw:cpu_realtime_mask": "^0"}, {"hw_cpu_realtime_mask": "^0-1"}, None,
     [(ALL, 4096, ALL)], {"realtime_cpus": frozenset({2, 3})}),
    ("every vCPU realtime with an emulator threads policy",
     {"hw:cpu_policy": "dedicated", "hw:cpu_realtime": "1",
      "hw:emulator_threads_policy": "isolate"}, {}, None, [(ALL, 4096, ALL)],
     {"realtime_cpus": frozenset(ALL)}),
    ("realtime off ignores the masks",
     {"hw:cpu_policy": "dedicated", "hw:cpu_realtime": "no",
      "hw:cpu_realtime_mask": "^0"}, {}, None, [(ALL, 4096, ALL)],
     {"realtime_cpus": frozenset()}),
    ("mixed with the realtime mask as the dedicated set",
     {"hw:cpu_policy": "mixed", "hw:cpu_realtime": "yes",
      "hw:cpu_realtime_mask": "^0-1"}, {}, None, [(ALL, 4096, [2, 3])],
     {"realtime_cpus": frozenset({2, 3})}),
    ("page size large", {"hw:mem_page_size": "large"}, {}, None,
     [(ALL, 4096, [])], {"page_size": "large", "cpu_policy": "shared",
                         "cpu_thread_policy": None}),
    ("page size small", {"hw:mem_page_size": "small"}, {}, None,
     [(ALL, 4096, [])], {"page_size": "small"}),
    ("page size any", {"hw:mem_page_size": "any"}, {}, None,
     [(ALL, 4096, [])], {"page_size": "any"}),
    ("page size in KiB", {"hw:mem_page_size": "2048"}, {}, None,
     [(ALL, 4096, [])], {"page_size": 2048}),
    ("page size 2MB", {"hw:mem_page_size": "2MB"}, {}, None,
     [(ALL, 4096, [])], {"page_size": 2048}),
    ("page size 2MiB", {"hw:mem_page_size": "2MiB"}, {}, None,
     [(ALL, 4096, [])], {"page_size": 2048}),
    ("page size 1GB", {"hw:mem_page_size": "1GB"}, {}, None,
     [(ALL, 4096, [])], {"page_size": 1048576}),
    ("page size in bits (16Mbit = 2 MiB)", {"hw:mem_page_size": "16Mbit"},
     {}, None, [(ALL, 4096, [])], {"page_size": 2048}),
    ("page size in bytes", {"hw:mem_page_size": "2097152B"}, {}, None,
     [(ALL, 4096, [])], {"page_size": 2048}),
    ("image page size under flavor large", {"hw:mem_page_size": "large"},
     {"hw_mem_page_size": "1GB"}, None, [(ALL, 4096, [])],
     {"page_size": 1048576}),
    ("image page size under flavor any", {"hw:mem_page_size": "any"},
     {"hw_mem_page_size": "small"}, None, [(ALL, 4096, [])],
     {"page_size": "small"}),
    ("image page size equal to the flavor's", {"hw:mem_page_size": "2048"},
     {"hw_mem_page_size": "2MB"}, None, [(ALL, 4096, [])],
     {"page_size": 2048}),
    ("page size on two nodes", {"hw:mem_page_size": "1GB",
                                "hw:numa_nodes": "2"}, {}, None,
     [([0, 1], 2048, []), ([2, 3], 2048, [])], {"page_size": 1048576}),
    ("locked memory with a page size",
     {"hw:mem_page_size": "large", "hw:locked_memory": "true"}, {}, None,
     [(ALL, 4096, [])], {"locked_memory": True}),
    ("image locked memory as a JSON boolean", {"hw:mem_page_size": "any"},
     {"hw_locked_memory": True}, None, [(ALL, 4096, [])],
     {"locked_memory": True}),
    ("locked memory equal in flavor and image",
     {"hw:mem_page_size": "small", "hw:locked_memory": "false"},
     {"hw_locked_memory": "no"}, None, [(ALL, 4096, [])],
     {"locked_memory": False}),
    ("resources:PCPU means dedicated", {RES_PCPU: "4"}, {}, None,
     [(ALL, 4096, ALL)], {"cpu_policy": "dedicated"}),
    ("resources:PCPU counts the isolated emulator thread",
     {RES_PCPU: "5", "hw:emulator_threads_policy": "isolate"}, {}, None,
     [(ALL, 4096, ALL)], {"emulator_threads_policy": "isolate"}),
    ("a granular resources1:PCPU", {"resources1:PCPU": "4"}, {}, None,
     [(ALL, 4096, ALL)], {"cpu_policy": "dedicated"}),
    ("resources:VCPU=0 beside resources:PCPU",
     {RES_VCPU: "0", RES_PCPU: "4"}, {}, None, [(ALL, 4096, ALL)],
     {"cpu_policy": "dedicated"}),
    ("hyperthreading forbidden means isolate",
     {"hw:cpu_policy": "dedicated", HT: "forbidden"}, {}, None,
     [(ALL, 4096, ALL)], {"cpu_thread_policy": "isolate"}),
    ("hyperthreading required means require",
     {"hw:cpu_policy": "dedicated", HT: "required"}, {}, None,
     [(ALL, 4096, ALL)], {"cpu_thread_policy": "require"}),
    ("a granular hyperthreading trait",
     {"hw:cpu_policy": "dedicated", HT1: "required"}, {}, None,
     [(ALL, 4096, ALL)], {"cpu_thread_policy": "require"}),
    ("image hyperthreading trait", {"hw:cpu_policy": "dedicated"},
     {HT: "required"}, None, [(ALL, 4096, ALL)],
     {"cpu_thread_policy": "require"}),
    ("image hyperthreading trait equal to the flavor's",
     {"hw:cpu_policy": "dedicated", HT: "forbidden"}, {HT: "forbidden"},
     None, [(ALL, 4096, ALL)], {"cpu_thread_policy": "isolate"}),
    ("odd sizes split over explicit nodes",
     {"hw:numa_nodes": "3", "hw:numa_cpus.0": "0-1", "hw:numa_cpus.1": "2",
      "hw:numa_cpus.2": "3-4", "hw:numa_mem.0": "1000",
      "hw:numa_mem.1": "1000", "hw:numa_mem.2": "1001"}, {}, (5, 3001),
     [([0, 1], 1000, []), ([2], 1000, []), ([3, 4], 1001, [])], {}),
]


@pytest.mark.parametrize("specs, props, size, want_cells, fields",
                         [c[1:] for c in VALID], ids=[c[0] for c in VALID])
def test_valid(specs, props, size, want_cells, fields):
    vcpus, memory = size or (4, 4096)
    request = request_for(specs, props, vcpus, memory)
    assert request is not None
    assert cells(request) == want_cells
    for name, value in fields.items():
        assert getattr(request, name) == value, name


NO_TOPOLOGY = [
    ("nothing", {}, {}),
    ("explicit shared policy", {"hw:cpu_policy": "shared"}, {}),
    ("image shared policy", {}, {"hw_cpu_policy": "shared"}),
    ("resources:VCPU", {RES_VCPU: "4"}, {}),
    ("emulator share without pinning",
     {"hw:emulator_threads_policy": "share"}, {}),
    ("realtime mask without realtime", {"hw:cpu_realtime_mask": "^0"}, {}),
    ("unrelated keys", {"hw:cpu_sockets": "2", "quota:cpu_shares": "10"},
     {"os_distro": "debian", "hw_disk_bus": "virtio"}),
    ("locked memory off", {"hw:locked_memory": "false"}, {}),
]


@pytest.mark.parametrize("specs, props", [c[1:] for c in NO_TOPOLOGY],
                         ids=[c[0] for c in NO_TOPOLOGY])
def test_no_topology(specs, props):
    assert request_for(specs, props) is None


# id, flavor extra specs, image properties, (vcpus, memory),
# keys the problem names (subset of Problem.keys), texts its message has
INVALID = [
    ("vcpus zero", {}, {}, (0, 4096), {"vcpus"}, ["vcpus=0"]),
    ("vcpus a boolean", {}, {}, (True, 4096), {"vcpus"}, ["vcpus=True"]),
    ("memory negative", {}, {}, (4, -1), {"memory_mb"}, ["memory_mb=-1"]),
    ("node count zero", {"hw:numa_nodes": "0"}, {}, None, {"hw:numa_nodes"},
     ["hw:numa_nodes='0'", "positive integer"]),
    ("node count not a number", {"hw:numa_nodes": "two"}, {}, None,
     {"hw:numa_nodes"}, ["hw:numa_nodes='two'"]),
    ("node count negative", {"hw:numa_nodes": "-1"}, {}, None,
     {"hw:numa_nodes"}, ["hw:numa_nodes='-1'"]),
    ("node count fractional", {"hw:numa_nodes": "1.5"}, {}, None,
     {"hw:numa_nodes"}, ["hw:numa_nodes='1.5'"]),
    ("image node count zero", {}, {"hw_numa_nodes": "0"}, None,
     {"hw_numa_nodes"}, ["image hw_numa_nodes='0'"]),
    ("image overrides the flavor's node count", {"hw:numa_nodes": "2"},
     {"hw_numa_nodes": "4"}, None, {"hw:numa_nodes", "hw_numa_nodes"},
     ["hw_numa_nodes='4'", "hw:numa_nodes='2'", "may not override"]),
    ("node count not dividing the vCPUs", {"hw:numa_nodes": "3"}, {}, None,
     {"hw:numa_nodes"}, ["hw:numa_nodes='3'", "4 vCPUs", "4096 MiB"]),
    ("node count not dividing the memory", {"hw:numa_nodes": "2"}, {},
     (4, 4095), {"hw:numa_nodes", "memory_mb"}, ["4095 MiB"]),
    ("per-node CPUs overlap",
     {"hw:numa_nodes": "2", "hw:numa_cpus.0": "0-2", "hw:numa_cpus.1": "2-3",
      "hw:numa_mem.0": "2048", "hw:numa_mem.1": "2048"}, {}, None,
     {"hw:numa_cpus.0", "hw:numa_cpus.1"},
     ["hw:numa_cpus.0='0-2'", "hw:numa_cpus.1='2-3'", "vCPU(s) 2"]),
    ("per-node CPUs out of range",
     {"hw:numa_nodes": "2", "hw:numa_cpus.0": "0-1", "hw:numa_cpus.1": "2-5",
      "hw:numa_mem.0": "2048", "hw:numa_mem.1": "2048"}, {}, None,
     {"hw:numa_cpus.1"}, ["hw:numa_cpus.1='2-5'", "4-5", "0-3"]),
    ("a vCPU on no node",
     {"hw:numa_nodes": "2", "hw:numa_cpus.0": "0", "hw:numa_cpus.1": "1-2",
      "hw:numa_mem.0": "2048", "hw:numa_mem.1": "2048"}, {}, None,
     {"hw:numa_cpus.0", "hw:numa_cpus.1"}, ["vCPU(s) 3", "on no guest node"]),
    ("per-node memory not adding up",
     {"hw:numa_nodes": "2", "hw:numa_cpus.0": "0-1", "hw:numa_cpus.1": "2-3",
      "hw:numa_mem.0": "1024", "hw:numa_mem.1": "2048"}, {}, None,
     {"hw:numa_mem.0", "hw:numa_mem.1"}, ["1024 + 2048 = 3072", "4096"]),
    ("per-node CPUs without memory",
     {"hw:numa_nodes": "2", "hw:numa_cpus.0": "0-1", "hw:numa_cpus.1": "2-3"},
     {}, None, {"hw:numa_cpus.0", "hw:numa_cpus.1"},
     ["without hw:numa_mem.N"]),
    ("per-node memory without CPUs",
     {"hw:numa_nodes": "2", "hw:numa_mem.0": "2048", "hw:numa_mem.1": "2048"},
     {}, None, {"hw:numa_mem.0"}, ["without hw:numa_cpus.N"]),
    ("image per-node memory without CPUs", {"hw:numa_nodes": "2"},
     {"hw_numa_mem.0": "2048", "hw_numa_mem.1": "2048"}, None,
     {"hw_numa_mem.0"}, ["without hw_numa_cpus.N"]),
    ("a node without per-node keys",
     {"hw:numa_nodes": "2", "hw:numa_cpus.0": "0-3", "hw:numa_mem.0": "4096"},
     {}, None, {"hw:numa_cpus.0"}, ["hw:numa_nodes='2'", "missing 1"]),
    ("per-node keys for a node that does not exist",
     {"hw:numa_nodes": "1", "hw:numa_cpus.0": "0-1", "hw:numa_cpus.1": "2-3",
      "hw:numa_mem.0": "4096"}, {}, None, {"hw:numa_cpus.1"},
     ["no node 1"]),
    ("more nodes than vCPUs",
     {"hw:numa_nodes": "3", "hw:numa_cpus.0": "0", "hw:numa_cpus.1": "1",
      "hw:numa_cpus.2": "1", "hw:numa_mem.0": "1", "hw:numa_mem.1": "1",
      "hw:numa_mem.2": "1"}, {}, (2, 3), {"hw:numa_nodes"},
     ["hw:numa_nodes='3'", "2 vCPUs"]),
    ("per-node CPUs not a CPU set",
     {"hw:numa_nodes": "1", "hw:numa_cpus.0": "0-x", "hw:numa_mem.0": "4096"},
     {}, None, {"hw:numa_cpus.0"}, ["hw:numa_cpus.0='0-x'"]),
    ("a node with no vCPU",
     {"hw:numa_nodes": "2", "hw:numa_cpus.0": "0-3", "hw:numa_cpus.1": "0,^0",
      "hw:numa_mem.0": "2048", "hw:numa_mem.1": "2048"}, {}, None,
     {"hw:numa_cpus.1"}, ["hw:numa_cpus.1='0,^0'", "no vCPU"]),
    ("per-node memory zero",
     {"hw:numa_nodes": "1", "hw:numa_cpus.0": "0-3", "hw:numa_mem.0": "0"},
     {}, None, {"hw:numa_mem.0"}, ["hw:numa_mem.0='0'"]),
    ("a per-node key without a node id", {"hw:numa_cpus.a": "0"}, {}, None,
     {"hw:numa_cpus.a"}, ["'hw:numa_cpus.a'", "'a'"]),
    ("per-node keys without a topology",
     {"hw:numa_cpus.0": "0-3", "hw:numa_mem.0": "4096"}, {}, None,
     {"hw:numa_cpus.0", "hw:numa_mem.0"}, ["hw:numa_cpus.0='0-3'",
                                           "set hw:numa_nodes"]),
    ("image per-node CPUs override the flavor's",
     {"hw:numa_nodes": "2", "hw:numa_cpus.0": "0-1", "hw:numa_cpus.1": "2-3",
      "hw:numa_mem.0": "2048", "hw:numa_mem.1": "2048"},
     {"hw_numa_cpus.0": "0", "hw_numa_cpus.1": "1-3"}, None,
     {"hw:numa_cpus.0", "hw_numa_cpus.0"},
     ["hw_numa_cpus.0", "hw:numa_cpus.0", "may not override"]),
    ("flavor CPU policy unknown", {"hw:cpu_policy": "pinned"}, {}, None,
     {"hw:cpu_policy"}, ["hw:cpu_policy='pinned'", "shared, dedicated"]),
    ("image CPU policy unknown", {}, {"hw_cpu_policy": "fast"}, None,
     {"hw_cpu_policy"}, ["image hw_cpu_policy='fast'"]),
    ("image dedicated under a shared flavor", {"hw:cpu_policy": "shared"},
     {"hw_cpu_policy": "dedicated"}, None,
     {"hw:cpu_policy", "hw_cpu_policy"},
     ["hw_cpu_policy='dedicated'", "hw:cpu_policy='shared'"]),
    ("image mixed under a shared flavor", {"hw:cpu_policy": "shared"},
     {"hw_cpu_policy": "mixed"}, None, {"hw:cpu_policy", "hw_cpu_policy"},
     ["hw_cpu_policy='mixed'"]),
    ("image dedicated under a mixed flavor",
     {"hw:cpu_policy": "mixed", "hw:cpu_dedicated_mask": "^0"},
     {"hw_cpu_policy": "dedicated"}, None, {"hw:cpu_policy", "hw_cpu_policy"},
     ["hw_cpu_policy='dedicated'", "hw:cpu_policy='mixed'"]),
    ("flavor thread policy unknown",
     {"hw:cpu_policy": "dedicated", "hw:cpu_thread_policy": "always"}, {},
     None, {"hw:cpu_thread_policy"}, ["hw:cpu_thread_policy='always'"]),
    ("image thread policy unknown", {"hw:cpu_policy": "dedicated"},
     {"hw_cpu_thread_policy": "x"}, None, {"hw_cpu_thread_policy"},
     ["hw_cpu_thread_policy='x'"]),
    ("image thread policy against the flavor's",
     {"hw:cpu_policy": "dedicated", "hw:cpu_thread_policy": "isolate"},
     {"hw_cpu_thread_policy": "require"}, None,
     {"hw:cpu_thread_policy", "hw_cpu_thread_policy"},
     ["hw_cpu_thread_policy='require'", "hw:cpu_thread_policy='isolate'"]),
    ("thread policy without dedicated CPUs",
     {"hw:cpu_thread_policy": "isolate"}, {}, None, {"hw:cpu_thread_policy"},
     ["hw:cpu_thread_policy='isolate'", "needs dedicated CPUs"]),
    ("image thread policy under a shared flavor",
     {"hw:cpu_policy": "shared"}, {"hw_cpu_thread_policy": "prefer"}, None,
     {"hw_cpu_thread_policy", "hw:cpu_policy"},
     ["hw_cpu_thread_policy='prefer'", "hw:cpu_policy='shared'"]),
    ("emulator threads policy unknown",
     {"hw:cpu_policy": "dedicated", "hw:emulator_threads_policy": "pinned"},
     {}, None, {"hw:emulator_threads_policy"},
     ["hw:emulator_threads_policy='pinned'", "isolate"]),
    ("isolated emulator threads without dedicated CPUs",
     {"hw:emulator_threads_policy": "isolate"}, {}, None,
     {"hw:emulator_threads_policy"}, ["'isolate'", "needs dedicated CPUs"]),
    ("dedicated mask under a shared policy",
     {"hw:cpu_dedicated_mask": "^0"}, {}, None, {"hw:cpu_dedicated_mask"},
     ["hw:cpu_dedicated_mask='^0'", "needs hw:cpu_policy=mixed"]),
    ("dedicated mask under the dedicated policy",
     {"hw:cpu_policy": "dedicated", "hw:cpu_dedicated_mask": "^0"}, {}, None,
     {"hw:cpu_policy", "hw:cpu_dedicated_mask"},
     ["hw:cpu_dedicated_mask='^0'", "hw:cpu_policy='dedicated'"]),
    ("mixed without a mask", {"hw:cpu_policy": "mixed"}, {}, None,
     {"hw:cpu_policy"}, ["hw:cpu_policy='mixed'", "neither"]),
    ("mixed with both masks",
     {"hw:cpu_policy": "mixed", "hw:cpu_dedicated_mask": "^0",
      "hw:cpu_realtime": "yes", "hw:cpu_realtime_mask": "^0"}, {}, None,
     {"hw:cpu_policy", "hw:cpu_dedicated_mask", "hw:cpu_realtime"},
     ["both are set"]),
    ("dedicated mask of every vCPU",
     {"hw:cpu_policy": "mixed", "hw:cpu_dedicated_mask": "0-3"}, {}, None,
     {"hw:cpu_dedicated_mask"}, ["hw:cpu_dedicated_mask='0-3'", "every"]),
    ("dedicated mask of no vCPU",
     {"hw:cpu_policy": "mixed", "hw:cpu_dedicated_mask": "^0-3"}, {}, None,
     {"hw:cpu_dedicated_mask"}, ["hw:cpu_dedicated_mask='^0-3'", "no vCPU"]),
    ("dedicated mask out of range",
     {"hw:cpu_policy": "mixed", "hw:cpu_dedicated_mask": "0,7"}, {}, None,
     {"hw:cpu_dedicated_mask"}, ["hw:cpu_dedicated_mask='0,7'", "vCPU(s) 7"]),
    ("dedicated mask not a CPU set",
     {"hw:cpu_policy": "mixed", "hw:cpu_dedicated_mask": "1-"}, {}, None,
     {"hw:cpu_dedicated_mask"}, ["hw:cpu_dedicated_mask='1-'"]),
    ("realtime not a boolean",
     {"hw:cpu_policy": "dedicated", "hw:cpu_realtime": "maybe"}, {}, None,
     {"hw:cpu_realtime"}, ["hw:cpu_realtime='maybe'", "true or false"]),
    ("realtime without dedicated CPUs",
     {"hw:cpu_realtime": "yes", "hw:cpu_realtime_mask": "^0"}, {}, None,
     {"hw:cpu_realtime"}, ["hw:cpu_realtime='yes'", "needs dedicated CPUs"]),
    ("every vCPU realtime without an emulator policy",
     {"hw:cpu_policy": "dedicated", "hw:cpu_realtime": "yes"}, {}, None,
     {"hw:cpu_realtime"}, ["hw:cpu_realtime='yes'", "emulator"]),
    ("realtime mask of no vCPU",
     {"hw:cpu_policy": "dedicated", "hw:cpu_realtime": "yes",
      "hw:cpu_realtime_mask": "^0-3"}, {}, None,
     {"hw:cpu_realtime", "hw:cpu_realtime_mask"},
     ["hw:cpu_realtime_mask='^0-3'", "no realtime vCPU"]),
    ("realtime mask out of range",
     {"hw:cpu_policy": "dedicated", "hw:cpu_realtime": "yes",
      "hw:cpu_realtime_mask": "2-9"}, {}, None, {"hw:cpu_realtime_mask"},
     ["hw:cpu_realtime_mask='2-9'", "4-9"]),
    ("image realtime mask not a CPU set",
     {"hw:cpu_policy": "dedicated", "hw:cpu_realtime": "yes"},
     {"hw_cpu_realtime_mask": "^x"}, None, {"hw_cpu_realtime_mask"},
     ["hw_cpu_realtime_mask='^x'"]),
    ("image realtime mask out of range",
     {"hw:cpu_policy": "dedicated", "hw:cpu_realtime": "yes"},
     {"hw_cpu_realtime_mask": "^0,8"}, None, {"hw_cpu_realtime_mask"},
     ["hw_cpu_realtime_mask='^0,8'"]),
    ("mixed with every vCPU realtime",
     {"hw:cpu_policy": "mixed", "hw:cpu_realtime": "yes",
      "hw:emulator_threads_policy": "share"}, {}, None,
     {"hw:cpu_policy", "hw:cpu_realtime"}, ["no shared vCPU"]),
    ("page size unknown", {"hw:mem_page_size": "huge"}, {}, None,
     {"hw:mem_page_size"}, ["hw:mem_page_size='huge'"]),
    ("page size zero", {"hw:mem_page_size": "0"}, {}, None,
     {"hw:mem_page_size"}, ["hw:mem_page_size='0'"]),
    ("page size below a KiB", {"hw:mem_page_size": "512B"}, {}, None,
     {"hw:mem_page_size"}, ["hw:mem_page_size='512B'"]),
    ("image page size unknown", {"hw:mem_page_size": "any"},
     {"hw_mem_page_size": "2XB"}, None, {"hw_mem_page_size"},
     ["hw_mem_page_size='2XB'"]),
    ("image page size without the flavor's leave", {},
     {"hw_mem_page_size": "1GB"}, None, {"hw_mem_page_size"},
     ["hw_mem_page_size='1GB'", "hw:mem_page_size=large or any"]),
    ("image page size under flavor small", {"hw:mem_page_size": "small"},
     {"hw_mem_page_size": "large"}, None,
     {"hw:mem_page_size", "hw_mem_page_size"},
     ["hw_mem_page_size='large'", "hw:mem_page_size='small'"]),
    ("image page size against an explicit flavor size",
     {"hw:mem_page_size": "2048"}, {"hw_mem_page_size": "1GB"}, None,
     {"hw:mem_page_size", "hw_mem_page_size"},
     ["hw_mem_page_size='1GB'", "hw:mem_page_size='2048'"]),
    ("memory not a whole number of pages", {"hw:mem_page_size": "1GB"}, {},
     (2, 1536), {"hw:mem_page_size"}, ["hw:mem_page_size='1GB'", "1536 MiB"]),
    ("locked memory not a boolean",
     {"hw:mem_page_size": "large", "hw:locked_memory": "sure"}, {}, None,
     {"hw:locked_memory"}, ["hw:locked_memory='sure'"]),
    ("image locked memory against the flavor's",
     {"hw:mem_page_size": "large", "hw:locked_memory": "true"},
     {"hw_locked_memory": "false"}, None,
     {"hw:locked_memory", "hw_locked_memory"},
     ["hw_locked_memory='false'", "hw:locked_memory='true'"]),
    ("locked memory without a page size", {"hw:locked_memory": "true"}, {},
     None, {"hw:locked_memory"}, ["hw:locked_memory='true'", "page size"]),
    ("image locked memory without a page size", {},
     {"hw_locked_memory": "true"}, None, {"hw_locked_memory"},
     ["hw_locked_memory='true'", "page size"]),
    ("resources:PCPU with a CPU policy",
     {RES_PCPU: "4", "hw:cpu_policy": "dedicated"}, {}, None,
     {RES_PCPU, "hw:cpu_policy"},
     [f"{RES_PCPU}='4'", "hw:cpu_policy='dedicated'", "one or the other"]),
    ("resources:VCPU with an image CPU policy", {RES_VCPU: "4"},
     {"hw_cpu_policy": "shared"}, None, {RES_VCPU, "hw_cpu_policy"},
     [f"{RES_VCPU}='4'", "hw_cpu_policy='shared'"]),
    ("resources:VCPU and resources:PCPU", {RES_VCPU: "2", RES_PCPU: "2"}, {},
     None, {RES_VCPU, RES_PCPU}, [f"{RES_VCPU}='2'", f"{RES_PCPU}='2'"]),
    ("resources:PCPU not the vCPU count", {RES_PCPU: "3"}, {}, None,
     {RES_PCPU, "vcpus"}, [f"{RES_PCPU}='3'", "4 vCPUs", "set PCPU to 4"]),
    ("resources:PCPU missing the emulator thread",
     {RES_PCPU: "4", "hw:emulator_threads_policy": "isolate"}, {}, None,
     {RES_PCPU}, [f"{RES_PCPU}='4'", "plus 1", "set PCPU to 5"]),
    ("resources:PCPU not a number", {RES_PCPU: "four"}, {}, None,
     {RES_PCPU}, [f"{RES_PCPU}='four'"]),
    ("hyperthreading trait value unknown",
     {"hw:cpu_policy": "dedicated", HT: "preferred"}, {}, None, {HT},
     [f"{HT}='preferred'", "required, forbidden"]),
    ("hyperthreading trait with a thread policy",
     {"hw:cpu_policy": "dedicated", HT: "forbidden",
      "hw:cpu_thread_policy": "isolate"}, {}, None,
     {HT, "hw:cpu_thread_policy"},
     [f"{HT}='forbidden'", "hw:cpu_thread_policy='isolate'"]),
    ("image hyperthreading trait with a flavor thread policy",
     {"hw:cpu_policy": "dedicated", "hw:cpu_thread_policy": "prefer"},
     {HT: "required"}, None, {HT, "hw:cpu_thread_policy"},
     [f"{HT}='required'", "one or the other"]),
    ("image hyperthreading trait against the flavor's",
     {"hw:cpu_policy": "dedicated", HT: "required"}, {HT: "forbidden"},
     None, {HT}, [f"{HT}='forbidden'", f"{HT}='required'"]),
    ("hyperthreading trait without dedicated CPUs", {HT: "required"}, {},
     None, {HT}, [f"{HT}='required'", "needs dedicated CPUs"]),
    ("hyperthreading required and forbidden in two groups",
     {"hw:cpu_policy": "dedicated", HT: "required", HT1: "forbidden"}, {},
     None, {HT, HT1}, [f"{HT}='required'", f"{HT1}='forbidden'"]),
    ("an image property that is not a string", {},
     {"hw_numa_nodes": [2]}, None, {"hw_numa_nodes"},
     ["hw_numa_nodes=[2]", "not a string"]),
]


def problems_of(specs, props, size):
    vcpus, memory = size or (4, 4096)
    with pytest.raises(InvalidRequest) as caught:
        request_for(specs, props, vcpus, memory)
    return caught.value.problems


@pytest.mark.parametrize("specs, props, size, keys, texts",
                         [c[1:] for c in INVALID], ids=[c[0] for c in INVALID])
def test_invalid(specs, props, size, keys, texts):
    problems = problems_of(specs, props, size)
    matching = [p for p in problems if keys <= set(p.keys)
                and all(t in p.message for t in texts)]
    assert matching, [(dict(p.keys), p.message) for p in problems]
    for problem in problems:
        # One line naming the input and what is wrong, then what to do.
        assert "\n" not in problem.message
        assert "; " in problem.message, problem.message


def test_every_problem_is_reported_at_once():
    specs = {"hw:numa_nodes": "zero", "hw:cpu_policy": "pinned",
             "hw:mem_page_size": "huge", "hw:locked_memory": "sure",
             "hw:emulator_threads_policy": "always",
             RES_PCPU: "x"}
    props = {"hw_cpu_thread_policy": "sometimes"}
    problems = problems_of(specs, props, None)
    named = set().union(*(set(p.keys) for p in problems))
    assert {"hw:numa_nodes", "hw:cpu_policy", "hw:mem_page_size",
            "hw:locked_memory", "hw:emulator_threads_policy", RES_PCPU,
            "hw_cpu_thread_policy"} <= named
    assert len(problems) == 7
    text = str(InvalidRequest(problems))
    assert "7 problems" in text and all(p.message in text for p in problems)


def test_problems_come_in_a_stable_order():
    specs = {"hw:numa_nodes": "3", "hw:cpu_policy": "pinned",
             "hw:mem_page_size": "huge"}
    first = [p.message for p in problems_of(specs, {}, None)]
    again = [p.message for p in problems_of(dict(reversed(specs.items())),
                                            {}, None)]
    assert first == again


# -- consumption ---------------------------------------------------------------

CONSUMPTION = [
    ("no topology", {}, {}, {orc.VCPU: 4, orc.MEMORY_MB: 4096}),
    ("shared with a topology", {"hw:numa_nodes": "2"}, {},
     {orc.VCPU: 4, orc.MEMORY_MB: 4096}),
    ("dedicated", {"hw:cpu_policy": "dedicated"}, {},
     {orc.PCPU: 4, orc.MEMORY_MB: 4096}),
    ("image dedicated", {}, {"hw_cpu_policy": "dedicated"},
     {orc.PCPU: 4, orc.MEMORY_MB: 4096}),
    ("dedicated with isolated emulator threads",
     {"hw:cpu_policy": "dedicated", "hw:emulator_threads_policy": "isolate"},
     {}, {orc.PCPU: 5, orc.MEMORY_MB: 4096}),
    ("dedicated with shared emulator threads",
     {"hw:cpu_policy": "dedicated", "hw:emulator_threads_policy": "share"},
     {}, {orc.PCPU: 4, orc.MEMORY_MB: 4096}),
    ("mixed", {"hw:cpu_policy": "mixed", "hw:cpu_dedicated_mask": "^0"}, {},
     {orc.VCPU: 1, orc.PCPU: 3, orc.MEMORY_MB: 4096}),
    ("mixed with isolated emulator threads",
     {"hw:cpu_policy": "mixed", "hw:cpu_dedicated_mask": "2-3",
      "hw:emulator_threads_policy": "isolate"}, {},
     {orc.VCPU: 2, orc.PCPU: 3, orc.MEMORY_MB: 4096}),
    ("mixed by realtime mask",
     {"hw:cpu_policy": "mixed", "hw:cpu_realtime": "yes",
      "hw:cpu_realtime_mask": "^0-2"}, {},
     {orc.VCPU: 3, orc.PCPU: 1, orc.MEMORY_MB: 4096}),
    ("explicit resources:PCPU", {RES_PCPU: "4"}, {},
     {orc.PCPU: 4, orc.MEMORY_MB: 4096}),
    ("explicit resources:PCPU with the emulator thread",
     {RES_PCPU: "5", "hw:emulator_threads_policy": "isolate"}, {},
     {orc.PCPU: 5, orc.MEMORY_MB: 4096}),
    ("explicit resources:VCPU overrides the flavor's count", {RES_VCPU: "2"},
     {}, {orc.VCPU: 2, orc.MEMORY_MB: 4096}),
    ("explicit resources:VCPU=0 with PCPU", {RES_VCPU: "0", RES_PCPU: "4"},
     {}, {orc.PCPU: 4, orc.MEMORY_MB: 4096}),
    ("explicit MEMORY_MB", {f"resources:{orc.MEMORY_MB}": "1024"}, {},
     {orc.VCPU: 4, orc.MEMORY_MB: 1024}),
    ("2 MiB pages", {"hw:mem_page_size": "2MB"}, {},
     {orc.VCPU: 4, orc.MEMORY_MB: 4096, page_resource_class(2048): 2048}),
    ("1 GiB pages chosen by the image", {"hw:mem_page_size": "large"},
     {"hw_mem_page_size": "1GB"},
     {orc.VCPU: 4, orc.MEMORY_MB: 4096, page_resource_class(1048576): 4}),
    ("symbolic page sizes take no page class", {"hw:mem_page_size": "large"},
     {}, {orc.VCPU: 4, orc.MEMORY_MB: 4096}),
]


@pytest.mark.parametrize("specs, props, expected",
                         [c[1:] for c in CONSUMPTION],
                         ids=[c[0] for c in CONSUMPTION])
def test_consumption(specs, props, expected):
    flavor = Flavor(4, 4096, specs)
    assert consumption(flavor, numa_constraints(flavor, props)) == expected


def test_consumption_page_class_is_the_host_trees():
    flavor = Flavor(2, 2048, {"hw:mem_page_size": "2048"})
    used = consumption(flavor, numa_constraints(flavor, {}))
    assert used[page_resource_class(2048)] == 1024
    assert page_resource_class(2048) == "CUSTOM_MEM_PAGE_SIZE_2048"


def test_consumption_refuses_a_bad_memory_override():
    flavor = Flavor(2, 2048, {f"resources:{orc.MEMORY_MB}": "lots"})
    with pytest.raises(InvalidRequest) as caught:
        consumption(flavor, None)
    assert f"resources:{orc.MEMORY_MB}='lots'" in str(caught.value)
