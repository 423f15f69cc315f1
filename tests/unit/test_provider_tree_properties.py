"""Property tests: random operation sequences keep the tree's invariants.

A Hypothesis state machine drives a :class:`ProviderTree` and a plain-dict
model side by side through creations, removals, inventory, trait and
aggregate changes and snapshots.  After every step:

* the tree matches the model, and lookups by name and by uuid agree;
* ``get_provider_uuids`` and ``to_json`` list parents before children;
* every snapshot taken earlier still matches the model as it was then;
* ``diff(snapshot, tree)`` applied to the snapshot's model gives the model;
* ``to_json`` round-trips through ``from_json``.
"""

from __future__ import annotations

import copy
import uuid

import os_resource_classes as orc
import os_traits
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine, invariant, precondition, rule)

from virtdriver.providers.inventory import MAX_INT
from virtdriver.resource_tracker.provider_tree import (
    ProviderTree, TreeSnapshot, diff)

TRAITS = [os_traits.HW_CPU_X86_AVX, os_traits.HW_CPU_X86_SSE,
          os_traits.COMPUTE_NODE, "CUSTOM_GOLD"]
AGGREGATES = [str(uuid.UUID(int=n)) for n in range(1, 4)]
CLASSES = [orc.VCPU, orc.MEMORY_MB, orc.PCPU, "CUSTOM_FPGA"]
#: The model of one provider: what the tree must hold for it.
Model = dict  # uuid -> {"name", "parent", "inventory", "traits", "aggs"}

records = st.builds(
    lambda total, reserved, ratio: {"total": total,
                                     "reserved": min(reserved, total),
                                     "allocation_ratio": ratio},
    st.integers(1, 64), st.integers(0, 64),
    st.sampled_from([1.0, 1.5, 16.0]))
inventories = st.dictionaries(st.sampled_from(CLASSES), records, max_size=3)
subsets = st.frozensets


def model_of(snapshot: TreeSnapshot) -> Model:
    """The model a snapshot describes (generations left out)."""
    return {p.uuid: {"name": p.name, "parent": p.parent_uuid,
                     "inventory": {rc: rec.as_dict()
                                   for rc, rec in p.inventory.items()},
                     "traits": set(p.traits), "aggs": set(p.aggregates)}
            for p in snapshot.providers()}


def apply_diff(model: Model, changes) -> Model:
    """``model`` with every entry of a TreeDiff applied, in order."""
    model = copy.deepcopy(model)
    for entry in changes:
        if entry.deleted:
            del model[entry.uuid]
            continue
        if entry.created:
            model[entry.uuid] = {"name": entry.name,
                                 "parent": entry.parent_uuid,
                                 "inventory": {}, "traits": set(),
                                 "aggs": set()}
        provider = model[entry.uuid]
        provider["name"] = entry.name
        for rc, (_, new) in entry.inventory.items():
            if new is None:
                del provider["inventory"][rc]
            else:
                provider["inventory"][rc] = new.as_dict()
        provider["traits"] |= entry.traits_added
        provider["traits"] -= entry.traits_removed
        provider["aggs"] |= entry.aggregates_added
        provider["aggs"] -= entry.aggregates_removed
    return model


def assert_parents_first(uuids: list[str], parent_of: dict) -> None:
    seen = set()
    for each in uuids:
        assert parent_of[each] is None or parent_of[each] in seen, each
        seen.add(each)


class ProviderTreeMachine(RuleBasedStateMachine):
    """The tree against a model, step by step."""

    def __init__(self) -> None:
        super().__init__()
        self.tree = ProviderTree()
        self.model: Model = {}
        self.snapshots: list[tuple[TreeSnapshot, Model]] = []
        self.counter = 0

    def _fresh(self) -> tuple[str, str]:
        self.counter += 1
        return f"rp-{self.counter}", str(uuid.UUID(int=1000 + self.counter))

    def _add(self, parent: str | None) -> None:
        name, new = self._fresh()
        if parent is None:
            assert self.tree.new_root(name, new) == new
        else:
            assert self.tree.new_child(name, parent, new) == new
        self.model[new] = {"name": name, "parent": parent, "inventory": {},
                           "traits": set(), "aggs": set()}

    def _pick(self, data) -> str:
        return data.draw(st.sampled_from(sorted(self.model)))

    @rule()
    def new_root(self) -> None:
        self._add(None)

    @precondition(lambda self: self.model)
    @rule(data=st.data())
    def new_child(self, data) -> None:
        self._add(self._pick(data))

    @precondition(lambda self: self.model)
    @rule(data=st.data())
    def remove(self, data) -> None:
        target = self._pick(data)
        gone = set(self.tree.get_provider_uuids(target))
        self.tree.remove(self.model[target]["name"])
        for each in gone:
            del self.model[each]
        assert not any(p["parent"] in gone for p in self.model.values())

    @precondition(lambda self: self.model)
    @rule(data=st.data(), inventory=inventories)
    def update_inventory(self, data, inventory) -> None:
        target = self._pick(data)
        self.tree.update_inventory(target, inventory)
        self.model[target]["inventory"] = {
            rc: {"total": rec["total"], "reserved": rec["reserved"],
                 "min_unit": 1, "max_unit": MAX_INT, "step_size": 1,
                 "allocation_ratio": rec["allocation_ratio"]}
            for rc, rec in inventory.items()}

    @precondition(lambda self: self.model)
    @rule(data=st.data(), traits=subsets(st.sampled_from(TRAITS)),
          how=st.sampled_from(["update", "add", "remove"]))
    def change_traits(self, data, traits, how) -> None:
        target = self._pick(data)
        have = self.model[target]["traits"]
        if how == "update":
            changed = self.tree.update_traits(target, traits)
            expected = set(traits)
        elif how == "add":
            changed = self.tree.add_traits(target, *traits)
            expected = have | traits
        else:
            changed = self.tree.remove_traits(target, *traits)
            expected = have - traits
        assert changed == (expected != have)
        self.model[target]["traits"] = expected

    @precondition(lambda self: self.model)
    @rule(data=st.data(), aggs=subsets(st.sampled_from(AGGREGATES)))
    def update_aggregates(self, data, aggs) -> None:
        target = self._pick(data)
        self.tree.update_aggregates(target, aggs)
        self.model[target]["aggs"] = set(aggs)

    @rule()
    def snapshot(self) -> None:
        self.snapshots.append((self.tree.snapshot(),
                               copy.deepcopy(self.model)))

    @invariant()
    def tree_matches_model_and_lookups_agree(self) -> None:
        assert model_of(self.tree.snapshot()) == self.model
        for provider_uuid, provider in self.model.items():
            assert self.tree.record(provider["name"]) is self.tree.record(
                provider_uuid)

    @invariant()
    def parents_come_before_children(self) -> None:
        parent_of = {u: p["parent"] for u, p in self.model.items()}
        uuids = self.tree.get_provider_uuids()
        assert sorted(uuids) == sorted(self.model)
        assert_parents_first(uuids, parent_of)
        listed = [p["uuid"] for p in self.tree.to_json()["providers"]]
        assert_parents_first(listed, parent_of)

    @invariant()
    def snapshots_keep_their_moment_and_diff_is_exact(self) -> None:
        for snap, then in self.snapshots[-3:]:
            assert model_of(snap) == then
            changes = diff(snap, self.tree)
            assert apply_diff(then, changes) == self.model
            unchanged = set(self.model) - {e.uuid for e in changes}
            assert all(snap.record(u) == self.tree.record(u) for u in unchanged)

    @invariant()
    def json_round_trips(self) -> None:
        document = self.tree.to_json()
        assert ProviderTree.from_json(document).to_json() == document


ProviderTreeMachine.TestCase.settings = settings(
    max_examples=60, stateful_step_count=25, deadline=None, derandomize=True)
TestProviderTree = ProviderTreeMachine.TestCase
