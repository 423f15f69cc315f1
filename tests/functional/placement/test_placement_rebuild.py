"""The rebuild check against a real Placement: allocations and provider
traits read from it, and its own per-provider answer compared with the
rule's (``virtdriver/placement/rebuild_source.py`` defines the comparison).

The tree, built through the API: root ``cn1`` (VCPU, MEMORY_MB,
``CUSTOM_GOLD``) with children ``nic-a`` and ``nic-b`` (``CUSTOM_VF``
each), ``CUSTOM_FAST_NIC`` on ``nic-b`` only.
"""

from __future__ import annotations

import json
import uuid as uuidlib

import os_traits
import pytest

from virtdriver.claims.documents import image_properties, instance_from_document
from virtdriver.claims.rebuild import ProviderInfo
from virtdriver.placement.errors import (
    MicroversionUnsupported, PlacementUnreachable)
from virtdriver.placement.rebuild_source import (
    placement_allocations, placement_answer, placement_providers,
    rebuild_check_with_placement)

FLAVOR = {"vcpus": 2, "memory_mb": 2048, "extra_specs": {}}


def _inventory(total: int) -> dict:
    return {"total": total, "reserved": 0, "min_unit": 1, "max_unit": total,
            "step_size": 1, "allocation_ratio": 1.0}


@pytest.fixture
def tree(client, api):
    """uuids by name of the NIC tree, in Placement."""
    client.ensure_resource_class("CUSTOM_VF")
    names = {name: str(uuidlib.uuid4()) for name in ("cn1", "nic-a", "nic-b")}
    client.create_provider(names["cn1"], "cn1", None)
    for nic in ("nic-a", "nic-b"):
        client.create_provider(names[nic], nic, names["cn1"])
        generation, _ = client.get_part(names[nic], "inventories")
        client.put_part(names[nic], "inventories", generation,
                        {"CUSTOM_VF": _inventory(4)})
    generation, _ = client.get_part(names["cn1"], "inventories")
    client.put_part(names["cn1"], "inventories", generation, {
        "VCPU": _inventory(16), "MEMORY_MB": _inventory(32768)})
    api.set_traits(names["cn1"], {"CUSTOM_GOLD", os_traits.COMPUTE_NODE})
    api.set_traits(names["nic-b"], {"CUSTOM_FAST_NIC"})
    return names


def allocate(client, consumer: str, allocations: dict) -> None:
    client.request("PUT", f"/allocations/{consumer}", body={
        "allocations": {rp: {"resources": r} for rp, r in allocations.items()},
        "project_id": str(uuidlib.uuid4()), "user_id": str(uuidlib.uuid4()),
        "consumer_generation": None, "consumer_type": "INSTANCE"})


def instance_doc(uuid: str, allocations: dict | None = None,
                 image: dict | None = None):
    """An Instance the way the CLI reads INSTANCE.json."""
    document = {"uuid": uuid, "flavor": FLAVOR,
                "image": {"properties": image or {}}}
    if allocations is not None:
        document["allocations"] = {rp: {"resources": r}
                                   for rp, r in allocations.items()}
    return instance_from_document(document, "INSTANCE.json")


def new_image(**properties):
    return image_properties({"properties": properties}, "IMAGE.json")


def check(client, instance, image):
    client.microversion  # noqa: B018 (negotiated before counting)
    before = client.counts
    result = rebuild_check_with_placement(client, instance, image)
    return result, client.counts - before


def test_allocation_on_nic_a_is_refused_and_placement_agrees(client, tree):
    consumer = str(uuidlib.uuid4())
    allocate(client, consumer, {tree["nic-a"]: {"CUSTOM_VF": 1}})

    (conflicts, answer), sent = check(
        client, instance_doc(consumer),
        new_image(**{"trait:CUSTOM_FAST_NIC": "required"}))

    assert [c.kind for c in conflicts] == ["traits"]
    assert conflicts[0].details["missing"] == ["CUSTOM_FAST_NIC"]
    assert "provider 'nic-a'" in conflicts[0].message
    assert answer.allocations_from == "placement"
    assert dict(answer.allocations) == {tree["nic-a"]: {"CUSTOM_VF": 1}}
    assert answer.query == "CUSTOM_FAST_NIC"
    assert dict(answer.returned) == {tree["cn1"]: (tree["nic-b"],)}
    assert not answer.placement_allowed and not answer.rule_allowed
    assert answer.agrees and answer.differences == ()
    assert json.loads(json.dumps(answer.as_dict()))["returned"] == {
        tree["cn1"]: [tree["nic-b"]]}
    # allocations, the tree listing, nic-a's and cn1's traits, the
    # filtered listing: five reads, nothing written.
    assert sent.by_method == {"GET": 5}


def test_allocation_on_nic_b_is_allowed_and_placement_agrees(client, tree):
    consumer = str(uuidlib.uuid4())
    allocate(client, consumer, {tree["nic-b"]: {"CUSTOM_VF": 1}})

    (conflicts, answer), _ = check(
        client, instance_doc(consumer),
        new_image(**{"trait:CUSTOM_FAST_NIC": "required"}))

    assert conflicts == []
    assert answer.placement_allowed and answer.rule_allowed and answer.agrees


def test_forbidden_trait_on_the_root_refuses_an_allocation_on_it(client,
                                                                 tree):
    consumer = str(uuidlib.uuid4())
    allocate(client, consumer, {tree["cn1"]: {"VCPU": 2, "MEMORY_MB": 2048}})

    (conflicts, answer), _ = check(
        client, instance_doc(consumer),
        new_image(**{"trait:CUSTOM_GOLD": "forbidden"}))

    assert [c.details.get("forbidden_present") for c in conflicts] == [
        ["CUSTOM_GOLD"]]
    assert answer.query == "!CUSTOM_GOLD"
    assert set(answer.returned[tree["cn1"]]) == {tree["nic-a"], tree["nic-b"]}
    assert not answer.placement_allowed and answer.agrees


def test_forbidden_trait_on_an_unallocated_root_differs(client, tree):
    """The rule refuses (the root counts); Placement's per-provider filter
    keeps nic-a, so its answer allows: documented difference."""
    consumer = str(uuidlib.uuid4())
    allocate(client, consumer, {tree["nic-a"]: {"CUSTOM_VF": 1}})

    (conflicts, answer), _ = check(
        client, instance_doc(consumer),
        new_image(**{"trait:CUSTOM_GOLD": "forbidden"}))

    assert "'cn1'" in conflicts[0].message
    assert not answer.rule_allowed and answer.placement_allowed
    assert not answer.agrees and answer.mismatched == ()
    assert len(answer.differences) == 1
    assert "every allocated provider passes required=!CUSTOM_GOLD" in \
        answer.differences[0]


def test_required_trait_only_on_the_root_differs(client, tree):
    """The rule accepts a host-level trait on the root; Placement returns
    only the root, which holds no allocation, so its answer refuses."""
    consumer = str(uuidlib.uuid4())
    allocate(client, consumer, {tree["nic-a"]: {"CUSTOM_VF": 1}})

    (conflicts, answer), _ = check(
        client, instance_doc(consumer),
        new_image(**{"trait:CUSTOM_GOLD": "required"}))

    assert conflicts == []
    assert dict(answer.returned) == {tree["cn1"]: (tree["cn1"],)}
    assert answer.rule_allowed and not answer.placement_allowed
    assert not answer.agrees and answer.mismatched == ()
    (difference,) = answer.differences
    assert f"provider 'nic-a' ({tree['nic-a']}) (lacks CUSTOM_GOLD)" in \
        difference
    assert f"roots it returns: provider 'cn1' ({tree['cn1']})" in difference
    assert difference.endswith("put the traits on the allocated providers "
                               "if Placement's filter must agree")


def test_required_traits_spread_over_allocated_providers_differ(client,
                                                                 tree):
    """The rule takes the allocated providers together (cn1 has GOLD,
    nic-b FAST_NIC); no provider has both, so Placement returns none."""
    consumer = str(uuidlib.uuid4())
    allocate(client, consumer, {tree["cn1"]: {"VCPU": 2, "MEMORY_MB": 2048},
                                tree["nic-b"]: {"CUSTOM_VF": 1}})

    (conflicts, answer), _ = check(
        client, instance_doc(consumer),
        new_image(**{"trait:CUSTOM_GOLD": "required",
                     "trait:CUSTOM_FAST_NIC": "required"}))

    assert conflicts == []
    assert answer.query == "CUSTOM_FAST_NIC,CUSTOM_GOLD"
    assert dict(answer.returned) == {tree["cn1"]: ()}
    assert answer.rule_allowed and not answer.placement_allowed
    assert answer.mismatched == ()
    assert "provider 'nic-b'" in answer.differences[0]
    assert "(lacks CUSTOM_GOLD)" in answer.differences[0]


def test_placement_unreachable_is_an_error_not_a_crash(own_placement):
    client = own_placement.client()
    client.microversion  # noqa: B018
    own_placement.stop()
    with pytest.raises(PlacementUnreachable, match="is not reachable"):
        rebuild_check_with_placement(
            client, instance_doc(str(uuidlib.uuid4())),
            new_image(**{"trait:CUSTOM_GOLD": "required"}))


def test_a_provider_placement_does_not_have_is_cannot_verify(client, tree):
    consumer, sharing = str(uuidlib.uuid4()), str(uuidlib.uuid4())
    instance = instance_doc(consumer, {tree["nic-a"]: {"CUSTOM_VF": 1},
                                       sharing: {"DISK_GB": 10}})

    (conflicts, answer), sent = check(
        client, instance, new_image(**{"trait:CUSTOM_FAST_NIC": "required"}))

    assert [c.details.get("provider") for c in conflicts] == [sharing]
    assert conflicts[0].message.startswith("cannot verify CUSTOM_FAST_NIC")
    assert answer.allocations_from == "instance"
    assert answer.unknown_providers == (sharing,)
    assert not answer.placement_allowed and not answer.rule_allowed
    assert answer.agrees
    assert "/allocations" not in str(sent)   # the document's were used
    assert sent.by_method == {"GET": 5}      # 2 listings, 2 traits, 1 ask


def test_an_unknown_provider_differs_when_the_rule_finds_the_trait(client,
                                                                   tree):
    sharing = str(uuidlib.uuid4())
    instance = instance_doc(str(uuidlib.uuid4()), {
        tree["nic-b"]: {"CUSTOM_VF": 1}, sharing: {"DISK_GB": 10}})

    (conflicts, answer), _ = check(
        client, instance, new_image(**{"trait:CUSTOM_FAST_NIC": "required"}))

    assert conflicts == []          # nic-b has it: the unknown one is moot
    assert not answer.placement_allowed and not answer.agrees
    assert f"provider {sharing} (Placement does not have it)" in \
        answer.differences[0]
    assert answer.differences[0].endswith(
        "check the allocations the instance document gives")


def test_a_provider_key_that_is_not_a_uuid_is_unknown_without_a_request(
        client, tree):
    client.microversion  # noqa: B018
    before = client.counts
    assert placement_providers(client, ["nic-a"]) == {"nic-a": None}
    assert (client.counts - before).total == 0


def test_a_trait_placement_does_not_know(client, tree):
    consumer = str(uuidlib.uuid4())
    allocate(client, consumer, {tree["nic-b"]: {"CUSTOM_VF": 1}})

    (conflicts, answer), sent = check(
        client, instance_doc(consumer),
        new_image(**{"trait:CUSTOM_NOWHERE": "required"}))
    assert conflicts[0].details["missing"] == ["CUSTOM_NOWHERE"]
    assert answer.unknown_traits == ("CUSTOM_NOWHERE",)
    assert dict(answer.returned) == {tree["cn1"]: ()}
    assert not answer.placement_allowed and answer.agrees
    # allocations, listing, 2 traits; the ask refused (400), GET /traits.
    assert sent.by_method == {"GET": 6}

    (conflicts, answer), sent = check(
        client, instance_doc(consumer),
        new_image(**{"trait:CUSTOM_NOWHERE": "forbidden",
                     "trait:CUSTOM_FAST_NIC": "required"}))
    assert conflicts == []
    assert answer.query == "CUSTOM_FAST_NIC"    # the unknown one dropped
    assert answer.placement_allowed and answer.agrees
    assert sent.by_method == {"GET": 7}         # ... and the ask again


def test_forbidden_traits_need_microversion_1_22(placement, tree):
    old = placement.client(microversion="1.21")
    instance = instance_doc(str(uuidlib.uuid4()),
                            {tree["nic-a"]: {"CUSTOM_VF": 1}})
    with pytest.raises(MicroversionUnsupported,
                       match=r"speaks microversion 1\.21; .* needs 1\.22 "
                             r"\(required=!T .*; upgrade Placement$"):
        placement_answer(old, instance,
                         new_image(**{"trait:CUSTOM_GOLD": "forbidden"}),
                         providers={}, conflicts=[])
    assert old.counts.total == 0


def test_a_standard_trait_on_a_provider_counts(client, api, tree):
    consumer = str(uuidlib.uuid4())
    allocate(client, consumer, {tree["nic-b"]: {"CUSTOM_VF": 1}})
    api.add_traits(tree["nic-b"], os_traits.HW_NIC_SRIOV)

    (conflicts, answer), _ = check(
        client, instance_doc(consumer),
        new_image(**{f"trait:{os_traits.HW_NIC_SRIOV}": "required",
                     f"trait:{os_traits.HW_NIC_OFFLOAD_TSO}": "forbidden"}))

    assert conflicts == [] and answer.agrees and answer.placement_allowed
    assert answer.query == (f"{os_traits.HW_NIC_SRIOV},"
                            f"!{os_traits.HW_NIC_OFFLOAD_TSO}")


def test_traits_the_current_image_had_are_not_asked_again(client, tree):
    consumer = str(uuidlib.uuid4())
    allocate(client, consumer, {tree["nic-a"]: {"CUSTOM_VF": 1}})
    current = {"trait:CUSTOM_GOLD": "required"}

    (conflicts, answer), sent = check(
        client, instance_doc(consumer, image=current),
        new_image(**current, os_distro="debian"))

    assert conflicts == [] and not answer.asked and answer.agrees
    assert sent.total == 0          # no trait question: nothing sent


def test_a_flavor_contradiction_is_not_placement_s_question(client, tree):
    consumer = str(uuidlib.uuid4())
    allocate(client, consumer, {tree["nic-b"]: {"CUSTOM_VF": 1}})
    instance = instance_from_document({
        "uuid": consumer, "flavor": {**FLAVOR, "extra_specs": {
            "trait:CUSTOM_FAST_NIC": "forbidden"}}}, "INSTANCE.json")

    (conflicts, answer), _ = check(
        client, instance, new_image(**{"trait:CUSTOM_FAST_NIC": "required"}))

    assert [c.details.get("flavor") for c in conflicts] == ["forbidden"]
    assert answer.rule_allowed and answer.placement_allowed and answer.agrees


def test_facts_not_from_this_placement_are_a_mismatch(client, tree):
    """Provider facts claiming nic-a has the trait contradict Placement
    leaving it out: a difference even though nothing else is wrong."""
    consumer = str(uuidlib.uuid4())
    allocate(client, consumer, {tree["nic-a"]: {"CUSTOM_VF": 1}})
    instance = instance_doc(consumer, placement_allocations(client, consumer))
    image = new_image(**{"trait:CUSTOM_FAST_NIC": "required"})
    claimed = {tree["nic-a"]: ProviderInfo(frozenset({"CUSTOM_FAST_NIC"}),
                                           tree["cn1"], "nic-a"),
               tree["cn1"]: ProviderInfo(frozenset(), None, "cn1")}

    answer = placement_answer(client, instance, image, providers=claimed)

    assert answer.rule_allowed and not answer.placement_allowed
    assert answer.mismatched == (tree["nic-a"],)
    assert len(answer.differences) == 2
    assert "Placement leaves out provider 'nic-a'" in answer.differences[1]


def test_placement_providers_reads_each_provider_once(client, tree):
    client.microversion  # noqa: B018
    before = client.counts
    found = placement_providers(
        client, [tree["nic-a"], tree["nic-b"], tree["nic-a"]])
    sent = client.counts - before

    assert found == {
        tree["nic-a"]: ProviderInfo(frozenset(), tree["cn1"], "nic-a"),
        tree["nic-b"]: ProviderInfo(frozenset({"CUSTOM_FAST_NIC"}),
                                    tree["cn1"], "nic-b"),
        tree["cn1"]: ProviderInfo(frozenset({"CUSTOM_GOLD",
                                             os_traits.COMPUTE_NODE}),
                                  None, "cn1")}
    assert sent.by_method == {"GET": 4}     # one listing, three traits


def test_placement_allocations_of_a_consumer(client, tree):
    consumer = str(uuidlib.uuid4())
    allocate(client, consumer, {tree["cn1"]: {"VCPU": 2, "MEMORY_MB": 2048},
                                tree["nic-b"]: {"CUSTOM_VF": 1}})

    assert placement_allocations(client, consumer) == {
        tree["cn1"]: {"VCPU": 2, "MEMORY_MB": 2048},
        tree["nic-b"]: {"CUSTOM_VF": 1}}
    assert placement_allocations(client, str(uuidlib.uuid4())) == {}


def test_placement_holding_no_allocation_refuses_a_required_trait(client,
                                                                  tree):
    (conflicts, answer), _ = check(
        client, instance_doc(str(uuidlib.uuid4())),
        new_image(**{"trait:CUSTOM_GOLD": "required"}))

    assert "the instance holds no allocations" in conflicts[0].message
    assert answer.allocations_from == "placement" and not answer.allocations
    assert not answer.placement_allowed and answer.agrees


def test_placement_holding_no_allocation_cannot_verify_a_forbidden_trait(
        client, tree):
    """The consumer has no allocations in Placement: a trait the image
    forbids cannot be shown absent, so the check refuses (and Placement's
    own answer, with no provider to pass, agrees)."""
    (conflicts, answer), _ = check(
        client, instance_doc(str(uuidlib.uuid4())),
        new_image(**{"trait:CUSTOM_GOLD": "forbidden"}))

    (conflict,) = conflicts
    assert conflict.details["unverified"]["forbidden"] == ["CUSTOM_GOLD"]
    assert "the instance holds no allocations" in conflict.message
    assert answer.allocations_from == "placement" and not answer.allocations
    assert not answer.placement_allowed and not answer.rule_allowed
    assert answer.agrees
