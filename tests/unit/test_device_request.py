"""Device requests: [pci] alias and resources extra specs into Placement
groups, per NUMA affinity policy (virtdriver.claims.device_request and
placement_request)."""

from __future__ import annotations

import os_traits
import pytest

from virtdriver.claims.device_claim import allows
from virtdriver.claims.device_request import (
    device_requests, parse_aliases)
from virtdriver.claims.model import Flavor, InvalidRequest
from virtdriver.claims.placement_request import (
    DEVICE_LEGACY, DEVICE_PREFERRED, DEVICE_SOCKET, DEVICES_ISOLATED,
    placement_request)

GPU = '{"name": "gpu", "vendor_id": "10DE", "product_id": "1eb8"}'
VF = ('{"name": "vf", "resource_class": "nic vf", "device_type": "type-VF",'
      ' "traits": "fast,HW_NIC_OFFLOAD_TSO", "numa_policy": "required"}')


def test_alias_classes_and_traits_as_nova_names_them():
    aliases = parse_aliases([GPU, VF])
    assert aliases["gpu"].resource_class == "CUSTOM_PCI_10DE_1EB8"
    assert aliases["vf"].resource_class == "CUSTOM_NIC_VF"
    assert aliases["vf"].required == {"CUSTOM_FAST",
                                      os_traits.HW_NIC_OFFLOAD_TSO}


@pytest.mark.parametrize("text, words", [
    ("{not json", "not JSON"),
    ('{"name": "x"}', "neither vendor_id and product_id nor resource_class"),
    ('{"name": "x", "resource_class": "A", "numa_policy": "near"}',
     "numa_policy 'near'"),
    ('{"name": "x", "resource_class": "A", "device_type": "type-VDPA"}',
     "device_type 'type-VDPA'"),
    ('{"name": "x", "resource_class": "A", "colour": "red"}',
     "unknown field 'colour'"),
])
def test_a_bad_alias_is_one_problem_naming_it(text, words):
    with pytest.raises(InvalidRequest) as caught:
        parse_aliases([GPU, text])
    (problem,) = caught.value.problems
    assert problem.message.startswith("[pci] alias #2 = ")
    assert words in problem.message


def test_an_unknown_alias_and_a_bad_count_are_refused():
    aliases = parse_aliases([GPU])
    for text, words in (("nic:1", "alias 'nic' is not defined"),
                        ("gpu", "is not NAME:COUNT"),
                        ("gpu:0", "count 0")):
        with pytest.raises(InvalidRequest, match=words):
            device_requests({"pci_passthrough:alias": text}, {}, aliases)


def test_policy_flavor_over_alias_and_conflict_with_image():
    aliases = parse_aliases([VF])
    specs = {"pci_passthrough:alias": "vf:2"}
    assert {r.policy for r in device_requests(specs, {}, aliases)} == {
        "required"}
    got = device_requests({**specs, "hw:pci_numa_affinity_policy":
                           "preferred"}, {}, aliases)
    assert [r.policy for r in got] == ["preferred", "preferred"]
    assert [r.count for r in got] == [1, 1]       # one group per device
    with pytest.raises(InvalidRequest, match="differ"):
        device_requests({**specs, "hw:pci_numa_affinity_policy": "legacy"},
                        {"hw_pci_numa_affinity_policy": "socket"}, aliases)
    with pytest.raises(InvalidRequest, match="'nearby' is not one of"):
        device_requests(specs, {"hw_pci_numa_affinity_policy": "nearby"},
                        aliases)
    # The image's alone applies.
    got = device_requests(specs, {"hw_pci_numa_affinity_policy": "socket"},
                          aliases)
    assert {r.policy for r in got} == {"socket"}


def test_resources_keys_of_device_classes_are_requests():
    got = device_requests({"resources:VGPU": "1", "resources1:VCPU": "2",
                           "resources_X:CUSTOM_FPGA": "2"}, {})
    assert [(r.resource_class, r.count, r.policy) for r in got] == [
        ("CUSTOM_FPGA", 2, "legacy"), ("VGPU", 1, "legacy")]


def _request(specs, vcpus=2, aliases=(GPU, VF), image=None):
    return placement_request(Flavor(vcpus, 1024, specs), image or {},
                             aliases=parse_aliases(list(aliases)))


def test_required_device_shares_guest_node_0s_cell_subtree():
    request = _request({"hw:numa_nodes": "2", "pci_passthrough:alias":
                        "gpu:1", "hw:pci_numa_affinity_policy": "required"})
    assert request.same_subtree == (("1", "_DEV1"),)
    assert request.microversion == "1.36"
    assert "resources_DEV1=CUSTOM_PCI_10DE_1EB8:1" in request.query_string()
    assert "same_subtree=1,_DEV1" in request.query_string()
    assert request.group_policy == "isolate"
    assert not {u.case for u in request.unexpressed} & {
        DEVICE_LEGACY, DEVICE_PREFERRED, DEVICE_SOCKET}


@pytest.mark.parametrize("policy, case", [
    ("legacy", DEVICE_LEGACY), ("preferred", DEVICE_PREFERRED),
    ("socket", DEVICE_SOCKET)])
def test_inexact_policies_float_and_say_so(policy, case):
    request = _request({"hw:numa_nodes": "1", "pci_passthrough:alias":
                        "gpu:1", "hw:pci_numa_affinity_policy": policy})
    assert request.same_subtree == ()
    assert request.microversion == "1.35"
    assert case in {u.case for u in request.unexpressed}
    assert request.group_policy == "none"      # two numbered groups


def test_without_numa_topology_devices_float_without_cases():
    request = _request({"pci_passthrough:alias": "vf:2"})
    assert request.same_subtree == ()
    assert [g.suffix for g in request.groups] == ["", "_DEV1", "_DEV2"]
    assert all(g.required == {"CUSTOM_FAST", os_traits.HW_NIC_OFFLOAD_TSO,
                              os_traits.HW_NIC_SRIOV}
               for g in request.groups[1:])
    assert {u.case for u in request.unexpressed} == {"floating-instance"}


def test_two_devices_of_a_class_under_isolate_is_a_case():
    request = _request({"hw:numa_nodes": "2", "pci_passthrough:alias":
                        "vf:2"})
    assert DEVICES_ISOLATED in {u.case for u in request.unexpressed}
    assert request.same_subtree == (("1", "_DEV1"), ("1", "_DEV2"))


def test_type_pci_forbids_sriov():
    alias = '{"name": "p", "resource_class": "P", "device_type": "type-PCI"}'
    request = _request({"pci_passthrough:alias": "p:1"}, aliases=[alias])
    assert request.groups[1].forbidden == {os_traits.HW_NIC_SRIOV}
    assert "required_DEV1=!HW_NIC_SRIOV" in request.query_string()


@pytest.mark.parametrize("policy, device_cell, node0, ok", [
    ("required", 0, 0, True), ("required", 1, 0, False),
    ("required", None, 0, False), ("legacy", None, 0, True),
    ("legacy", 1, 0, False), ("preferred", 1, 0, True),
    ("socket", None, 0, False), ("socket", 1, 0, False),
    ("required", 1, None, True)])
def test_affinity_rules(policy, device_cell, node0, ok):
    assert allows(policy, device_cell, node0) is ok


def test_socket_policy_follows_the_sockets_given():
    assert allows("socket", 1, 0, {0: 0, 1: 0})
    assert not allows("socket", 1, 0, {0: 0, 1: 1})


def test_a_rebuild_that_changes_the_device_policy_is_refused():
    from virtdriver.claims.model import Instance
    from virtdriver.claims.rebuild import NUMA, rebuild_conflicts
    vm = Instance("i", Flavor(2, 512, {"pci_passthrough:alias": "gpu:1"}),
                  {"hw_pci_numa_affinity_policy": "legacy"})
    assert rebuild_conflicts(vm, {"hw_pci_numa_affinity_policy": "legacy",
                                  "os_distro": "debian"}, {}) == []
    (conflict,) = rebuild_conflicts(
        vm, {"hw_pci_numa_affinity_policy": "required"}, {})
    assert conflict.kind == NUMA
    assert "legacy → required" in conflict.message
    plain = Instance("j", Flavor(2, 512, {}), {})
    assert rebuild_conflicts(
        plain, {"hw_pci_numa_affinity_policy": "required"}, {}) == []
