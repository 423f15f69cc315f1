"""Property test: random writes under random nested savepoints.

Each rollback must give back exactly the tree of its savepoint (the JSON
form holds content, order and generations; plus every root's stamp), and
each savepoint's ``before`` view must read like a snapshot taken then.
"""

from __future__ import annotations

import os_resource_classes as orc
import os_traits
from hypothesis import given, settings
from hypothesis import strategies as st

from virtdriver.resource_tracker.provider_tree import (
    ProviderTree, ProviderTreeError)

TRAITS = [os_traits.HW_CPU_X86_AVX, os_traits.COMPUTE_NODE, "CUSTOM_GOLD"]
NAMES = [f"p{n}" for n in range(12)]
#: Operation codes; ``a`` and ``b`` pick a provider, a name, a value.
OPS = ["root", "child", "child", "remove", "inventory", "traits",
       "generation", "populate", "savepoint", "savepoint", "rollback",
       "release", "rollback_outer", "snapshot", "peek", "peek"]
steps = st.lists(st.tuples(st.sampled_from(OPS), st.integers(0, 99),
                           st.integers(0, 99)), max_size=60)


def state(tree) -> tuple:
    return tree.to_json(), {r.uuid: tree.subtree_stamp(r.uuid)
                            for r in tree.roots}


def check_before(savepoint, snapshot) -> None:
    """``savepoint.before`` agrees with a snapshot taken with it."""
    before = savepoint.before
    for name in NAMES + [p.uuid for p in snapshot.providers()]:
        assert before.exists(name) == snapshot.exists(name)
        if snapshot.exists(name):
            assert before.record(name) is snapshot.record(name)
            assert (before.get_provider_uuids_in_tree(name)
                    == snapshot.get_provider_uuids_in_tree(name))
    assert before.get_provider_uuids() == snapshot.get_provider_uuids()


def write(tree: ProviderTree, op: str, a: int, b: int) -> None:
    providers = tree.get_provider_uuids()
    target = providers[a % len(providers)] if providers else None
    name = NAMES[b % len(NAMES)]
    if op == "root":
        tree.new_root(name)
    elif target is None:
        return
    elif op == "child":
        tree.new_child(name, target)
    elif op == "remove":
        tree.remove(target)
    elif op == "inventory":
        tree.update_inventory(target, {orc.VCPU: {"total": 1 + b}}
                              if b % 3 else {})
    elif op == "traits":
        tree.update_traits(target, TRAITS[:b % 4])
    elif op == "generation":
        tree.update_traits(target, tree.record(target).traits, generation=b)
    elif op == "populate":  # replace a provider's subtree by a leaf
        record = tree.record(target)
        tree.populate_from_iterable([{
            "uuid": record.uuid, "name": record.name,
            "parent_provider_uuid": record.parent_uuid,
            "traits": TRAITS[:b % 4], "generation": a}])


@settings(max_examples=150, deadline=None)
@given(steps)
def test_rollback_gives_back_exactly_the_savepoints_tree(sequence):
    tree = ProviderTree()
    stack = []  # (savepoint, its state, a snapshot taken with it)
    snapshots = []  # (snapshot, its JSON)
    with tree.lock:
        for op, a, b in sequence:
            if op == "savepoint":
                stack.append((tree.savepoint(), state(tree), tree.snapshot()))
            elif op in ("rollback", "release", "rollback_outer"):
                if not stack:
                    continue
                where = 0 if op == "rollback_outer" else -1
                savepoint, saved, then = stack[where]
                check_before(savepoint, then)
                if op == "release":
                    savepoint.release()
                else:
                    savepoint.rollback()
                    assert state(tree) == saved
                ended = stack[where:] if where == 0 else stack[-1:]
                assert all(not each[0].active for each in ended)
                del stack[len(stack) - len(ended):]
            elif op == "peek":  # read a view mid-way (it reads on later)
                if stack:
                    savepoint, _, then = stack[a % len(stack)]
                    check_before(savepoint, then)
            elif op == "snapshot":
                snapshot = tree.snapshot()
                snapshots.append((snapshot, snapshot.to_json()))
            else:
                try:
                    write(tree, op, a, b)
                except ProviderTreeError:
                    pass  # a taken name: the tree is unchanged
        while stack:
            savepoint, saved, then = stack.pop()
            check_before(savepoint, then)
            savepoint.rollback()
            assert state(tree) == saved
    assert tree._journal.log is None
    for snapshot, seen in snapshots:  # nothing wrote into a snapshot
        assert snapshot.to_json() == seen
    assert ProviderTree.from_json(tree.to_json()).to_json() == tree.to_json()
