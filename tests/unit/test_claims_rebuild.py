"""The no-op rebuild claim's checks: the cases from the field."""

from __future__ import annotations

import json
import pathlib

import os_resource_classes as orc
import os_traits
import pytest

from virtdriver import cli
from virtdriver.claims.model import Flavor, Instance, InvalidRequest
from virtdriver.claims.rebuild import (
    KINDS, Conflict, ProviderDocumentError, ProviderInfo, RebuildRefused,
    check_rebuild, numa_changes, providers_from_tree_json, rebuild_conflicts)
from virtdriver.claims.constraints import numa_constraints
from virtdriver.resource_tracker.provider_tree import ProviderTree

ROOT = "00000000-0000-4000-8000-000000000001"
NUMA0 = "00000000-0000-4000-8000-000000000002"
NIC_A = "00000000-0000-4000-8000-000000000003"
NIC_B = "00000000-0000-4000-8000-000000000004"
SHARED_DISK = "00000000-0000-4000-8000-0000000000aa"
HOST_TRAIT = os_traits.COMPUTE_NODE
FAST = "CUSTOM_FAST_NIC"
GOLD = "CUSTOM_GOLD"
VF = "CUSTOM_VF"


def tree_document() -> dict:
    """A compute node with one NUMA cell and two NICs, as `report` gives it."""
    tree = ProviderTree()
    tree.new_root("cn1", uuid=ROOT)
    tree.update_traits(ROOT, [HOST_TRAIT, GOLD])
    tree.new_child("cn1_NUMA0", ROOT, uuid=NUMA0)
    tree.update_traits(NUMA0, [os_traits.HW_NUMA_ROOT])
    tree.new_child("nic-a", ROOT, uuid=NIC_A)
    tree.new_child("nic-b", ROOT, uuid=NIC_B)
    tree.update_traits(NIC_B, [FAST])
    return tree.to_json()


def instance(specs=None, props=None, allocations=None, vcpus=4, memory=4096):
    return Instance(
        uuid="11111111-2222-4333-8444-555555555555",
        flavor=Flavor(vcpus, memory, specs or {}),
        image_properties=props or {},
        allocations=allocations if allocations is not None else {
            NUMA0: {orc.VCPU: vcpus, orc.MEMORY_MB: memory},
            NIC_A: {VF: 1}})


@pytest.fixture
def providers():
    return providers_from_tree_json(tree_document())


def kinds(conflicts):
    return [c.kind for c in conflicts]


def test_same_image_always_rebuilds(providers):
    pinned = instance({"hw:cpu_policy": "dedicated"},
                      {"hw_numa_nodes": "1", f"trait:{FAST}": "required"})
    assert rebuild_conflicts(pinned, dict(pinned.image_properties),
                             providers) == []
    # ...even with no provider known at all (nothing new to verify).
    assert rebuild_conflicts(pinned, dict(pinned.image_properties), {}) == []


def test_rebuild_of_a_pinned_instance_with_the_same_constraints(providers):
    pinned = instance({"hw:cpu_policy": "dedicated"},
                      {"hw_cpu_thread_policy": "isolate", "os_distro": "a"})
    new = {"hw_cpu_thread_policy": "isolate", "os_distro": "b"}
    assert rebuild_conflicts(pinned, new, providers) == []


def test_an_image_without_numa_properties_or_traits_passes(providers):
    plain = instance(props={"os_distro": "debian"})
    new = {"os_distro": "fedora", "hw_qemu_guest_agent": "yes"}
    assert rebuild_conflicts(plain, new, providers) == []


def test_adding_hw_numa_nodes_2_is_refused(providers):
    plain = instance()
    conflicts = rebuild_conflicts(plain, {"hw_numa_nodes": "2"}, providers)
    assert kinds(conflicts) == ["numa"]
    (conflict,) = conflicts
    assert conflict.details["changes"] == [
        {"field": "numa_nodes", "old": "none", "new": "2"}]
    assert "numa_nodes none → 2" in conflict.message
    # The instance is untouched (frozen), and its own constraints stand.
    assert numa_constraints(plain.flavor, plain.image_properties) is None


def test_changing_the_node_split_names_each_field(providers):
    two = instance({"hw:numa_nodes": "2"})
    new = {"hw_numa_cpus.0": "0", "hw_numa_cpus.1": "1-3",
           "hw_numa_mem.0": "2048", "hw_numa_mem.1": "2048"}
    (conflict,) = rebuild_conflicts(two, new, providers)
    assert conflict.kind == "numa"
    assert {"field": "node0.cpus", "old": "0-1", "new": "0"} in \
        conflict.details["changes"]
    assert {"field": "node1.cpus", "old": "2-3", "new": "1-3"} in \
        conflict.details["changes"]
    assert "node0.cpus 0-1 → 0" in conflict.message


def test_shared_to_dedicated_is_refused_as_a_resources_change(providers):
    plain = instance()
    conflicts = rebuild_conflicts(plain, {"hw_cpu_policy": "dedicated"},
                                  providers)
    assert sorted(kinds(conflicts)) == ["numa", "resources"]
    resources = next(c for c in conflicts if c.kind == "resources")
    assert resources.details["changes"] == [
        {"resource_class": orc.PCPU, "old": 0, "new": 4},
        {"resource_class": orc.VCPU, "old": 4, "new": 0}]
    assert "PCPU 0 → 4" in resources.message
    assert "VCPU 4 → 0" in resources.message


def test_isolated_emulator_threads_count_in_the_pcpu_change(providers):
    # The emulator threads policy is the flavor's alone and needs pinning,
    # so an image cannot add it; it still counts in what an image changes.
    specs = {"hw:emulator_threads_policy": "isolate", "hw:cpu_realtime": "yes",
             "hw:cpu_realtime_mask": "^0"}
    pinned = instance(specs, {"hw_cpu_policy": "dedicated"})
    conflicts = rebuild_conflicts(pinned, {"hw_cpu_policy": "mixed"},
                                  providers)
    resources = next(c for c in conflicts if c.kind == "resources")
    assert resources.details["changes"] == [
        {"resource_class": orc.PCPU, "old": 5, "new": 4},
        {"resource_class": orc.VCPU, "old": 0, "new": 1}]


def test_a_page_size_change_is_refused_in_numa_and_resources(providers):
    large = instance({"hw:mem_page_size": "large"},
                     {"hw_mem_page_size": "2MB"})
    conflicts = rebuild_conflicts(large, {"hw_mem_page_size": "1GB"},
                                  providers)
    assert sorted(kinds(conflicts)) == ["numa", "resources"]
    numa = next(c for c in conflicts if c.kind == "numa")
    assert numa.details["changes"] == [
        {"field": "page_size", "old": "2048 KiB", "new": "1048576 KiB"}]
    resources = next(c for c in conflicts if c.kind == "resources")
    assert {"resource_class": "CUSTOM_MEM_PAGE_SIZE_2048", "old": 2048,
            "new": 0} in resources.details["changes"]
    assert {"resource_class": "CUSTOM_MEM_PAGE_SIZE_1048576", "old": 0,
            "new": 4} in resources.details["changes"]


def test_an_equivalent_spelling_is_no_change(providers):
    large = instance({"hw:mem_page_size": "large"},
                     {"hw_mem_page_size": "2MB"})
    assert rebuild_conflicts(large, {"hw_mem_page_size": "2048"},
                             providers) == []


def test_nic_b_having_the_trait_does_not_help_the_vf_of_nic_a(providers):
    vm = instance()
    conflicts = rebuild_conflicts(vm, {f"trait:{FAST}": "required"},
                                  providers)
    assert kinds(conflicts) == ["traits"]
    (conflict,) = conflicts
    assert conflict.details["missing"] == [FAST]
    checked = conflict.details["providers"]
    assert set(checked) == {NUMA0, NIC_A, ROOT}
    assert NIC_B not in conflict.message
    assert f"'nic-a' ({NIC_A}) (allocated {VF}=1) lacks {FAST}" in \
        conflict.message
    assert checked[ROOT]["role"] == "root of cn1_NUMA0"


def test_a_vf_of_nic_b_satisfies_it(providers):
    vm = instance(allocations={NUMA0: {orc.VCPU: 4}, NIC_B: {VF: 1}})
    assert rebuild_conflicts(vm, {f"trait:{FAST}": "required"},
                             providers) == []


def test_host_level_traits_on_the_root_count(providers):
    vm = instance()
    assert rebuild_conflicts(vm, {f"trait:{GOLD}": "required",
                                  f"trait:{HOST_TRAIT}": "required"},
                             providers) == []


def test_forbidden_image_traits_present_are_refused(providers):
    vm = instance()
    conflicts = rebuild_conflicts(vm, {f"trait:{GOLD}": "forbidden"},
                                  providers)
    (conflict,) = conflicts
    assert conflict.kind == "traits"
    assert conflict.details["forbidden_present"] == [GOLD]
    assert list(conflict.details["providers"]) == [ROOT]
    assert f"'cn1' ({ROOT})" in conflict.message and GOLD in conflict.message


def test_a_forbidden_trait_without_allocations_cannot_be_verified(
        providers):
    """The host has GOLD; an instance document without allocations (a
    claimed instance) must not let an image forbidding it through."""
    vm = instance(allocations={})

    (conflict,) = rebuild_conflicts(vm, {f"trait:{GOLD}": "forbidden"},
                                    providers)

    assert conflict.kind == "traits"
    assert conflict.details["unverified"] == {"required": [],
                                              "forbidden": [GOLD]}
    assert conflict.message.startswith(
        f"cannot verify that the instance's providers lack {GOLD} "
        f"(trait:{GOLD}='forbidden'): the instance holds no allocations")
    with pytest.raises(RebuildRefused):
        check_rebuild(vm, {f"trait:{GOLD}": "forbidden"}, providers)


def test_forbidden_traits_on_an_unallocated_sibling_do_not_matter(providers):
    vm = instance()
    assert rebuild_conflicts(vm, {f"trait:{FAST}": "forbidden"},
                             providers) == []


def test_missing_and_forbidden_are_both_reported(providers):
    vm = instance()
    conflicts = rebuild_conflicts(
        vm, {f"trait:{FAST}": "required", "trait:CUSTOM_OTHER": "required",
             f"trait:{GOLD}": "forbidden", "hw_numa_nodes": "2"}, providers)
    assert sorted(kinds(conflicts)) == ["numa", "traits", "traits"]
    missing = next(c for c in conflicts if "missing" in c.details)
    assert missing.details["missing"] == sorted(["CUSTOM_OTHER", FAST])
    assert any("forbidden_present" in c.details for c in conflicts)


def test_a_trait_the_flavor_forbids_is_refused(providers):
    vm = instance({f"trait:{GOLD}": "forbidden"})
    conflicts = rebuild_conflicts(vm, {f"trait:{GOLD}": "required"},
                                  providers)
    assert [c.details.get("flavor") for c in conflicts] == ["forbidden"]
    assert f"trait:{GOLD}=forbidden" in conflicts[0].message


def test_a_trait_the_flavor_requires_cannot_be_forbidden(providers):
    vm = instance({f"trait:{FAST}": "required"},
                  allocations={NUMA0: {orc.VCPU: 4}, NIC_B: {VF: 1}})
    conflicts = rebuild_conflicts(vm, {f"trait:{FAST}": "forbidden"},
                                  providers)
    assert {"flavor": "required", "image": "forbidden", "trait": FAST} in \
        [dict(c.details) for c in conflicts]


def test_traits_the_current_image_has_are_not_checked_again(providers):
    vm = instance(props={f"trait:{FAST}": "required", "os_distro": "a"})
    assert rebuild_conflicts(vm, {f"trait:{FAST}": "required",
                                  "os_distro": "b"}, providers) == []


def test_a_known_sharing_provider_is_checked_with_its_traits(providers):
    providers = dict(providers)
    providers[SHARED_DISK] = ProviderInfo(frozenset({"CUSTOM_SSD"}), None,
                                          "shared-disk")
    vm = instance(allocations={NUMA0: {orc.VCPU: 4},
                               SHARED_DISK: {orc.DISK_GB: 10}})
    assert rebuild_conflicts(vm, {"trait:CUSTOM_SSD": "required"},
                             providers) == []
    (conflict,) = rebuild_conflicts(vm, {"trait:CUSTOM_SSD": "forbidden"},
                                    providers)
    assert list(conflict.details["providers"]) == [SHARED_DISK]
    assert "'shared-disk'" in conflict.message


def test_an_unknown_sharing_provider_cannot_be_verified(providers):
    vm = instance(allocations={NUMA0: {orc.VCPU: 4},
                               SHARED_DISK: {orc.DISK_GB: 10}})
    conflicts = rebuild_conflicts(vm, {"trait:CUSTOM_SSD": "required"},
                                  providers)
    (conflict,) = conflicts
    assert conflict.kind == "traits"
    assert conflict.message.startswith("cannot verify CUSTOM_SSD (required)")
    assert SHARED_DISK in conflict.message and "DISK_GB=10" in \
        conflict.message
    assert conflict.details["provider"] == SHARED_DISK


def test_an_unknown_provider_does_not_matter_when_the_traits_are_found(
        providers):
    vm = instance(allocations={NUMA0: {orc.VCPU: 4},
                               SHARED_DISK: {orc.DISK_GB: 10}})
    assert rebuild_conflicts(vm, {f"trait:{GOLD}": "required"},
                             providers) == []
    assert rebuild_conflicts(vm, {"os_distro": "x"}, providers) == []
    # A forbidden trait could be on it, though.
    (conflict,) = rebuild_conflicts(vm, {"trait:CUSTOM_HDD": "forbidden"},
                                    providers)
    assert conflict.details["unverified"]["forbidden"] == ["CUSTOM_HDD"]


def test_providers_may_be_a_callable():
    facts = {NUMA0: (frozenset(), ROOT), ROOT: (frozenset({GOLD}), None)}

    def lookup(uuid):
        return facts[uuid]       # KeyError for anything else

    vm = instance(allocations={NUMA0: {orc.VCPU: 4},
                               SHARED_DISK: {orc.DISK_GB: 1}})
    assert rebuild_conflicts(vm, {f"trait:{GOLD}": "required"},
                             lookup) == []
    (conflict,) = rebuild_conflicts(vm, {"trait:CUSTOM_X": "required"},
                                    lookup)
    assert conflict.details["provider"] == SHARED_DISK


def test_an_invalid_new_image_is_refused_as_invalid(providers):
    vm = instance()
    conflicts = rebuild_conflicts(
        vm, {"hw_numa_nodes": "0", "hw_cpu_policy": "fast"}, providers)
    assert kinds(conflicts) == ["invalid", "invalid"]
    assert all(c.details["image"] == "new" for c in conflicts)
    assert {"hw_numa_nodes": "0"} in [c.details["keys"] for c in conflicts]


def test_an_invalid_trait_property_is_refused_as_invalid(providers):
    vm = instance()
    conflicts = rebuild_conflicts(
        vm, {"trait:lowercase": "required", f"trait:{GOLD}": "maybe"},
        providers)
    assert kinds(conflicts) == ["invalid", "invalid"]


def test_an_invalid_current_image_cannot_be_compared(providers):
    vm = instance(props={"hw_numa_nodes": "3"})   # 4 vCPUs: asymmetric
    conflicts = rebuild_conflicts(vm, {"hw_numa_nodes": "2"}, providers)
    assert kinds(conflicts) == ["invalid"]
    assert conflicts[0].details["image"] == "current"


def test_check_rebuild_raises_with_every_conflict(providers):
    vm = instance()
    with pytest.raises(RebuildRefused) as caught:
        check_rebuild(vm, {"hw_cpu_policy": "dedicated",
                           f"trait:{FAST}": "required"}, providers)
    refused = caught.value
    assert sorted(kinds(refused.conflicts)) == ["numa", "resources",
                                                "traits"]
    assert refused.instance_uuid == vm.uuid
    assert "3 reasons" in str(refused)
    assert isinstance(refused, ValueError)
    check_rebuild(vm, {}, providers)   # no conflict: no exception


def test_conflicts_are_json_ready(providers):
    vm = instance()
    conflicts = rebuild_conflicts(vm, {"hw_cpu_policy": "dedicated",
                                       f"trait:{FAST}": "required",
                                       "hw_numa_nodes": "x"}, providers)
    for conflict in conflicts:
        shown = json.loads(json.dumps(conflict.as_dict()))
        assert shown["kind"] in KINDS and shown["message"]
        assert "; " in conflict.message


def test_numa_changes_between_two_topologies():
    flavor = Flavor(4, 4096, {"hw:cpu_policy": "dedicated"})
    old = numa_constraints(flavor, {})
    new = numa_constraints(flavor, {"hw_cpu_thread_policy": "isolate"})
    assert numa_changes(old, new) == [
        {"field": "cpu_thread_policy", "old": "prefer", "new": "isolate"}]
    assert numa_changes(old, old) == []
    assert numa_changes(None, None) == []
    assert numa_changes(old, None) == [
        {"field": "numa_nodes", "old": "1", "new": "none"},
        {"field": "cpu_policy", "old": "dedicated", "new": "shared"},
        {"field": "cpu_thread_policy", "old": "prefer", "new": "none"}]


def test_the_conflict_and_refusal_need_content():
    with pytest.raises(ValueError):
        RebuildRefused("x", [])
    assert Conflict("numa", "m; n").as_dict() == {"kind": "numa",
                                                  "message": "m; n"}


# -- provider documents --------------------------------------------------------

def test_providers_from_the_report_command(capsys):
    assert cli.main(["report", "--driver", "fake", "--host-spec", "numa2-ht",
                     "--format", "json"]) == 0
    document = capsys.readouterr().out
    facts = providers_from_tree_json(document)
    roots = [u for u, i in facts.items() if i.root_uuid is None]
    assert len(roots) == 1
    cells = [u for u, i in facts.items() if i.root_uuid == roots[0]]
    assert len(cells) == 2
    assert all(os_traits.HW_NUMA_ROOT in facts[u].traits for u in cells)
    assert os_traits.COMPUTE_NODE in facts[roots[0]].traits
    # A VM on cell 0 can be rebuilt with an image requiring a root trait,
    # not one requiring a trait nothing has.
    vm = instance(allocations={cells[0]: {orc.VCPU: 2}})
    assert rebuild_conflicts(
        vm, {f"trait:{os_traits.COMPUTE_NODE}": "required"}, facts) == []
    assert kinds(rebuild_conflicts(vm, {"trait:CUSTOM_NOPE": "required"},
                                   facts)) == ["traits"]


def test_providers_from_text_and_roots_found_through_parents():
    document = tree_document()
    for entry in document["providers"]:
        del entry["root_provider_uuid"]
    facts = providers_from_tree_json(json.dumps(document))
    assert facts[NIC_A] == ProviderInfo(frozenset(), ROOT, "nic-a")
    assert facts[ROOT].root_uuid is None
    assert facts[NIC_B].traits == {FAST}


@pytest.mark.parametrize("document, says", [
    ("{not json", "not JSON"),
    ({"provider": []}, 'no "providers" list'),
    ({"providers": [{"name": "x"}]}, 'providers[0] has no string "uuid"'),
    ({"providers": ["x"]}, "providers[0]"),
    ({"providers": [{"uuid": ROOT, "traits": "CUSTOM_X"}]},
     f"providers[0] ({ROOT}) \"traits\" is not a list of strings"),
])
def test_unusable_provider_documents(document, says):
    with pytest.raises(ProviderDocumentError) as caught:
        providers_from_tree_json(document)
    assert says in str(caught.value)
    assert "; " in str(caught.value)


# -- docs/claims.md shows what the code says -------------------------------------

DOC = " ".join((pathlib.Path(__file__).parents[2] / "docs" / "claims.md")
               .read_text().split())


def in_doc(message: str) -> bool:
    for uuid in (ROOT, NUMA0, NIC_A, SHARED_DISK):
        message = message.replace(f"({uuid})", "(…)").replace(uuid, "…")
    return " ".join(message.split()) in DOC


@pytest.mark.parametrize("new", [
    {"hw_numa_nodes": "2"},
    {"hw_cpu_policy": "dedicated"},
    {f"trait:{FAST}": "required", f"trait:{GOLD}": "forbidden"},
    {"hw_numa_nodes": "3"},
])
def test_the_documented_examples_are_the_codes(providers, new):
    conflicts = rebuild_conflicts(instance(), new, providers)
    assert conflicts
    for conflict in conflicts:
        if conflict.kind == "numa" and "hw_cpu_policy" in new:
            # Shown in the doc as the list of changes only.
            listed = ", ".join(f"{c['field']} {c['old']} → {c['new']}"
                               for c in conflict.details["changes"])
            assert in_doc(listed), listed
        else:
            assert in_doc(conflict.message), conflict.message


def test_the_documented_cannot_verify_example_is_the_codes(providers):
    vm = instance(allocations={NUMA0: {orc.VCPU: 4},
                               SHARED_DISK: {orc.DISK_GB: 10}})
    (conflict,) = rebuild_conflicts(vm, {"trait:CUSTOM_SSD": "required"},
                                    providers)
    assert in_doc(conflict.message), conflict.message


def test_the_documented_invalid_request_is_the_codes():
    with pytest.raises(InvalidRequest) as caught:
        numa_constraints(Flavor(4, 4096, {"hw:numa_nodes": "3",
                                          "hw:cpu_policy": "pinned"}), {})
    assert in_doc(str(caught.value)), str(caught.value)


@pytest.mark.parametrize("new_image", [
    {"hw_numa_nodes": "2"},
    {"hw_numa_cpus.0": "0-1", "hw_numa_cpus.1": "2-3",
     "hw_numa_mem.0": "2048", "hw_numa_mem.1": "2048"},
], ids=["node count", "per-node lists"])
def test_rebuild_onto_an_image_repeating_the_flavor_numa_is_refused(
        providers, new_image):
    """Nova's ImageNUMATopologyForbidden: equal values are still refused."""
    vm = instance(specs={"hw:numa_nodes": "2", "hw:numa_cpus.0": "0-1",
                         "hw:numa_cpus.1": "2-3", "hw:numa_mem.0": "2048",
                         "hw:numa_mem.1": "2048"})
    conflicts = rebuild_conflicts(vm, new_image, providers)
    assert set(kinds(conflicts)) == {"invalid"}
    # One conflict per family the image repeats (node count; cpus, mem).
    assert len(conflicts) == (1 if "hw_numa_nodes" in new_image else 2)
    assert all("even to the same value" in c.message for c in conflicts)
