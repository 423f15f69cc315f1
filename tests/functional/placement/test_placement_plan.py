"""The pure parts: plan_provider's rules, inventory comparison, deletion
order, and TrackerOwnership's proof (no Placement needed)."""

from __future__ import annotations

import dataclasses

import os_traits
import pytest
from placement_helpers import Host

from virtdriver.capabilities.traits.ownership import Ownership
from virtdriver.placement.result import ProviderOutcome, SyncResult
from virtdriver.placement.plan import (
    deletion_order, inventory_from_placement, plan_provider, same_inventory)
from virtdriver.placement.state import Known
from virtdriver.providers.inventory import Inventory
from virtdriver.providers.record import ProviderData
from virtdriver.resource_tracker.tree_diff import ProviderDiff, TreeDiff

RP = "c0000000-0000-4000-8000-000000000001"
OWNED = Ownership(frozenset({os_traits.COMPUTE_NODE,
                             os_traits.HW_CPU_X86_AVX2}),
                  ("CUSTOM_DEV_",))
AGG = "a0000000-0000-4000-8000-00000000000a"
NOVA_AGG = "a0000000-0000-4000-8000-00000000000b"


def desired(traits=(), inventory=None, aggregates=()) -> ProviderData:
    return ProviderData(RP, "cn1", None, None, RP,
                        inventory or {"VCPU": Inventory(8)},
                        frozenset(traits), frozenset(aggregates))


def current(traits=(), inventory=None, aggregates=(), generation=3) -> Known:
    return Known(RP, "cn1", None, RP, generation,
                 inventory or {"VCPU": Inventory(8)}, frozenset(traits),
                 frozenset(aggregates))


def test_nothing_to_do_when_placement_matches():
    plan = plan_provider(desired([os_traits.COMPUTE_NODE]),
                         current([os_traits.COMPUTE_NODE]), OWNED)
    assert plan.empty


def test_foreign_traits_stay_owned_ones_follow_the_tree():
    plan = plan_provider(
        desired([os_traits.COMPUTE_NODE, "CUSTOM_IN_TREE_NOT_OWNED"]),
        current(["CUSTOM_OPERATOR", os_traits.HW_CPU_X86_AVX2,
                 "CUSTOM_DEV_10DE"]), OWNED)
    assert plan.traits == {os_traits.COMPUTE_NODE, "CUSTOM_OPERATOR"}
    assert plan.traits_added == {os_traits.COMPUTE_NODE}
    assert plan.traits_removed == {os_traits.HW_CPU_X86_AVX2,
                                   "CUSTOM_DEV_10DE"}
    assert plan.inventory is None and plan.aggregates is None


def test_drift_against_what_the_last_sync_saw():
    last = current([os_traits.COMPUTE_NODE], generation=2)
    now = current([os_traits.HW_CPU_X86_AVX2, "CUSTOM_OPERATOR"])
    plan = plan_provider(desired([os_traits.COMPUTE_NODE]), now, OWNED,
                         baseline=last)
    assert plan.removed_by_others == {os_traits.COMPUTE_NODE}
    assert plan.added_by_others == {os_traits.HW_CPU_X86_AVX2}


def test_inventory_is_replaced_only_when_it_differs():
    close = {"VCPU": Inventory(8, allocation_ratio=1.1 + 1e-9)}
    assert plan_provider(desired(inventory={"VCPU": Inventory(
        8, allocation_ratio=1.1)}), current(inventory=close), OWNED).empty
    plan = plan_provider(
        desired(inventory={"VCPU": Inventory(8), "MEMORY_MB": Inventory(4)}),
        current(inventory={"VCPU": Inventory(8, reserved=1)}), OWNED)
    assert set(plan.inventory) == {"VCPU", "MEMORY_MB"}
    assert plan.inventory_changes["MEMORY_MB"] == (None, Inventory(4))
    assert plan.inventory_changes["VCPU"][0].reserved == 1


def test_only_aggregates_this_process_set_are_taken_away():
    plan = plan_provider(desired(aggregates=[]),
                         current(aggregates=[AGG, NOVA_AGG]), OWNED,
                         wrote_aggregates=[AGG])
    assert plan.aggregates == {NOVA_AGG}
    plan = plan_provider(desired(aggregates=[AGG]), current(), OWNED)
    assert plan.aggregates == {AGG}
    assert plan_provider(desired(), current(aggregates=[NOVA_AGG]),
                         OWNED).empty


def test_the_marking_aggregate_is_put_back_and_never_taken_away():
    mark = "a0000000-0000-4000-8000-00000000000c"
    # An operator replaced the aggregates: theirs stay, ours comes back.
    plan = plan_provider(desired(), current(aggregates=[NOVA_AGG]), OWNED,
                         keep=frozenset({mark}))
    assert plan.aggregates == {NOVA_AGG, mark}
    assert plan.aggregates_added == {mark}
    # Set by this process, yet kept: the tree never lists it.
    assert plan_provider(desired(), current(aggregates=[mark]), OWNED,
                         wrote_aggregates=[mark],
                         keep=frozenset({mark})).empty


def test_inventory_from_placement_and_comparison():
    records = inventory_from_placement({"VCPU": {
        "total": 8, "reserved": 0, "min_unit": 1, "max_unit": 8,
        "step_size": 1, "allocation_ratio": 16}})
    assert same_inventory(records, {"VCPU": Inventory(  # max_unit given
        8, max_unit=8, allocation_ratio=16.0)})
    assert not same_inventory(records, {})
    with pytest.raises(ValueError, match="no reserved"):
        inventory_from_placement({"VCPU": {"total": 8}})


def test_deletion_order_is_children_first():
    parent_of = {"root": None, "a": "root", "b": "a", "c": "root"}
    order = deletion_order(["root", "a", "b", "c"], parent_of)
    assert order.index("b") < order.index("a") < order.index("root")
    assert order.index("c") < order.index("root")
    # A cycle (a hostile state) does not hang.
    assert sorted(deletion_order(["x", "y"], {"x": "y", "y": "x"})) == [
        "x", "y"]


def test_tracker_ownership_proves_as_the_tracker_does(tmp_path):
    host = Host(tmp_path / "state")
    root, cell = host.root, host.tree.providers()[1]
    assert host.owned(root.uuid) == host.driver.ownership_for(root.name)
    assert host.owned(cell.uuid) == host.owned(root.uuid)
    foreign = "f0000000-0000-4000-8000-00000000000f"
    host.tree.new_child("someone-elses-device", root.uuid, uuid=foreign)
    assert host.owned(foreign) is None
    assert host.owned("f0000000-0000-4000-8000-000000000010") is None
    assert host.owned.gone == ()


def test_tracker_ownership_keeps_removed_traits_until_synced(tmp_path):
    host = Host(tmp_path / "state")
    root = host.root
    change = next(iter(host.tracker.update_all().values()))
    # An update result whose diff removed a trait the driver does not own
    # (any more): owned for the sync until a sync settled it.
    gone_trait = "CUSTOM_STOPPED_NAMING"
    note = dataclasses.replace(change, diff=TreeDiff((ProviderDiff(
        root.uuid, root.name, traits_removed=frozenset({gone_trait})),)))
    host.owned.note(note)
    assert host.owned(root.uuid).owns(gone_trait)
    host.owned.synced(SyncResult(outcomes=(ProviderOutcome(
        root.uuid, root.name, error="failed"),)))
    assert host.owned(root.uuid).owns(gone_trait)
    host.owned.synced(SyncResult())
    assert not host.owned(root.uuid).owns(gone_trait)
