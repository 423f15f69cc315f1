"""Savepoints: nested undo of a provider tree's writes, and the view of the
tree as it was at a savepoint."""

from __future__ import annotations

import os_resource_classes as orc
import os_traits
import pytest

from virtdriver.resource_tracker import provider_index
from virtdriver.resource_tracker.provider_tree import (
    InvalidProvider, ProviderNotFound, ProviderTree, SavepointError)

AVX = os_traits.HW_CPU_X86_AVX
SSE = os_traits.HW_CPU_X86_SSE


def host() -> tuple[ProviderTree, str, list[str]]:
    """A root with three children, one with a grandchild, and a 2nd root."""
    tree = ProviderTree()
    root = tree.new_root("host")
    kids = [tree.new_child(f"numa{n}", root) for n in range(3)]
    tree.new_child("pf0", kids[1])
    tree.update_inventory(kids[0], {orc.VCPU: {"total": 8}}, generation=3)
    tree.update_traits(root, [AVX])
    tree.new_root("other")
    return tree, root, kids


def state(tree: ProviderTree) -> tuple:
    """Everything a rollback must bring back: content, order, generations
    (in to_json) and each root's stamp."""
    return tree.to_json(), {r.uuid: tree.subtree_stamp(r.uuid)
                            for r in tree.roots}


def test_rollback_restores_content_generations_and_child_order():
    tree, root, kids = host()
    before = state(tree)
    with tree.lock:
        savepoint = tree.savepoint()
        tree.remove(kids[1])  # a middle child, with a grandchild
        tree.new_child("numa9", root)
        tree.update_inventory(kids[0], {orc.VCPU: {"total": 4}},
                              generation=4)
        tree.update_traits(root, [SSE], generation=7)
        tree.remove("other")
        tree.new_root("third")
        assert state(tree) != before
        savepoint.rollback()
    assert state(tree) == before
    assert tree.get_provider_uuids(root)[1:4] == [
        kids[0], kids[1], tree.record("pf0").uuid]
    assert tree.record(kids[0]).generation == 3


def test_rollback_of_a_removed_last_child_and_of_a_new_parent():
    tree, root, kids = host()
    before = state(tree)
    with tree.lock:
        savepoint = tree.savepoint()
        tree.remove(kids[2])  # the last child: no copy of the sibling set
        tree.new_child("leafkid", kids[0])  # numa0 becomes a parent
        savepoint.rollback()
    assert state(tree) == before
    assert kids[0] not in tree._index.children  # exactly as it was


def test_inner_rollback_undoes_only_what_followed_it():
    tree, root, kids = host()
    with tree.lock:
        outer = tree.savepoint()
        tree.update_traits(root, [SSE])
        middle = state(tree)
        inner = tree.savepoint()
        tree.remove(kids[0])
        tree.update_traits(root, [AVX, SSE])
        inner.rollback()
        assert state(tree) == middle
        assert outer.active and not inner.active
        outer.release()


def test_released_inner_writes_stay_undoable_by_the_outer_savepoint():
    tree, root, kids = host()
    before = state(tree)
    with tree.lock:
        outer = tree.savepoint()
        tree.new_child("numa7", root)
        inner = tree.savepoint()
        tree.remove(kids[1])
        inner.release()
        assert not tree.exists(kids[1])
        outer.rollback()
    assert state(tree) == before


def test_ending_an_outer_savepoint_ends_the_inner_ones():
    tree, root, _ = host()
    before = state(tree)
    with tree.lock:
        outer = tree.savepoint()
        tree.new_child("a", root)
        inner = tree.savepoint()
        tree.new_child("b", root)
        outer.rollback()
        assert not inner.active
        with pytest.raises(SavepointError, match="already rolled back"):
            inner.release()
    assert state(tree) == before
    assert tree._journal.log is None  # writes stopped journaling


def test_an_outer_snapshot_still_restores_after_savepoints():
    tree, root, kids = host()
    with tree.lock:
        start = tree.snapshot()
        seen = start.to_json()
        savepoint = tree.savepoint()
        tree.remove(kids[0])
        tree.new_child("x", root)
        assert start.to_json() == seen  # journaling never writes into it
        savepoint.release()
        tree.update_traits(root, [SSE])
        tree.restore(start)
    assert tree.to_json() == seen


def test_a_snapshot_taken_inside_a_savepoint_survives_its_rollback():
    tree, root, kids = host()
    with tree.lock:
        savepoint = tree.savepoint()
        tree.remove(kids[0])
        inside = tree.snapshot()
        seen = inside.to_json()
        savepoint.rollback()
    assert inside.to_json() == seen
    assert not inside.exists(kids[0]) and tree.exists(kids[0])


def test_restore_ends_every_savepoint():
    tree, root, _ = host()
    with tree.lock:
        start = tree.snapshot()
        savepoint = tree.savepoint()
        tree.new_child("a", root)
        tree.restore(start)
        with pytest.raises(SavepointError, match="restore()"):
            savepoint.rollback()
        with pytest.raises(SavepointError):
            savepoint.before.exists(root)
    assert not tree.exists("a")


@pytest.mark.parametrize("how", ["release", "rollback"])
def test_an_ended_savepoint_is_a_clear_error(how):
    tree, root, _ = host()
    with tree.lock:
        savepoint = tree.savepoint()
        view = savepoint.before
        getattr(savepoint, how)()
        for use in (savepoint.release, savepoint.rollback,
                    lambda: savepoint.before, lambda: view.record(root)):
            with pytest.raises(SavepointError) as caught:
                use()
            message = str(caught.value)
            assert f"savepoint #{savepoint.number} was already" in message
            assert "take a new tree.savepoint()" in message


def test_as_a_context_manager_it_releases_or_rolls_back():
    tree, root, _ = host()
    before = state(tree)
    with pytest.raises(InvalidProvider):
        with tree.lock, tree.savepoint():
            tree.new_child("ok", root)
            tree.update_traits(root, ["not a trait"])
    assert state(tree) == before
    with tree.lock, tree.savepoint() as savepoint:
        tree.new_child("kept", root)
    assert tree.exists("kept") and not savepoint.active


def test_journaled_writes_never_copy_the_index(monkeypatch):
    tree = ProviderTree()
    for number in range(50):
        tree.new_root(f"r{number}")

    def no_copy(self):
        raise AssertionError("a savepoint write copied the whole index")

    monkeypatch.setattr(provider_index.ProviderIndex, "copy", no_copy)
    with tree.lock:
        savepoint = tree.savepoint()
        child = tree.new_child("c", "r3")
        tree.update_traits(child, [AVX])
        tree.remove("r10")
        tree.populate_from_iterable([{"uuid": tree.record("r4").uuid,
                                      "name": "r4", "traits": [SSE]}])
        savepoint.before.get_provider_uuids_in_tree("r3")
        savepoint.rollback()
    assert len(tree) == 50 and tree.record("r4").traits == frozenset()


def test_populate_stays_all_or_nothing_inside_a_savepoint():
    tree, root, _ = host()
    with tree.lock:
        savepoint = tree.savepoint()
        tree.new_child("mine", root)
        middle = state(tree)
        with pytest.raises(InvalidProvider):
            tree.populate_from_iterable([
                {"uuid": tree.record("other").uuid, "name": "other"},
                {"uuid": "0" * 8 + "-0000-4000-8000-" + "0" * 12,
                 "name": "bad", "traits": ["lower"]}])
        assert state(tree) == middle and savepoint.active
        savepoint.rollback()
    assert not tree.exists("mine")


# -- the view of the tree as it was ------------------------------------------


def test_before_reads_the_tree_as_it_was_at_the_savepoint():
    tree, root, kids = host()
    with tree.lock:
        then = tree.snapshot()
        savepoint = tree.savepoint()
        tree.remove(kids[1])
        tree.new_child("numa1", root)  # the same name, a new provider
        tree.update_traits(root, [SSE])
        tree.remove("other")
        tree.new_root("fresh")
        before = savepoint.before
        for name_or_uuid in [root, kids[1], "numa1", "pf0", "other",
                             "fresh", "nowhere"]:
            assert before.exists(name_or_uuid) == then.exists(name_or_uuid)
            if then.exists(name_or_uuid):
                assert before.record(name_or_uuid) is then.record(name_or_uuid)
                assert (before.get_provider_uuids_in_tree(name_or_uuid)
                        == then.get_provider_uuids_in_tree(name_or_uuid))
        assert before.get_provider_uuids() == then.get_provider_uuids()
        assert before.subtree_stamp(root) == then.subtree_stamp(root)
        with pytest.raises(ProviderNotFound):
            before.record("fresh")
        tree.update_traits(root, [AVX, SSE])  # a later write: re-read
        assert before.record(root) is then.record(root)
        savepoint.release()


def test_before_reads_on_across_an_inner_rollback():
    tree, root, kids = host()
    with tree.lock:
        then = tree.snapshot()
        outer = tree.savepoint()
        tree.new_child("a", root)
        inner = tree.savepoint()
        tree.new_child("b", kids[0])
        tree.update_traits(kids[2], [SSE])
        assert outer.before.get_provider_uuids() == then.get_provider_uuids()
        inner.rollback()  # cuts the log below what the view has read
        tree.new_child("c", kids[1])  # new entries where the cut ones were
        tree.update_traits(kids[0], [SSE])
        tree.remove(kids[2])
        before = outer.before
        assert before.get_provider_uuids() == then.get_provider_uuids()
        for uuid in then.get_provider_uuids():
            assert before.record(uuid) is then.record(uuid)
        assert not before.exists("a") and not before.exists("c")
        outer.rollback()


# -- stamps ---------------------------------------------------------------


def test_every_kind_of_write_gives_the_root_a_new_stamp():
    tree, root, kids = host()
    other = tree.record("other").uuid
    seen = {tree.subtree_stamp(root)}
    writes = [
        lambda: tree.update_traits(kids[2], [AVX]),
        lambda: tree.update_inventory(root, {orc.VCPU: {"total": 2}}),
        lambda: tree.update_aggregates(kids[0], [other]),
        lambda: tree.update_traits(root, [AVX], generation=9),  # generation
        lambda: tree.new_child("deep", "pf0"),
        lambda: tree.remove(kids[0]),
        lambda: tree.populate_from_iterable([{"uuid": kids[2],
                                              "name": "numa2",
                                              "parent_provider_uuid": root}]),
    ]
    other_stamp = tree.subtree_stamp(other)
    for write in writes:
        write()
        stamp = tree.subtree_stamp(root)
        assert stamp not in seen
        seen.add(stamp)
    assert tree.subtree_stamp(other) == other_stamp  # another tree's writes


def test_an_unchanged_write_keeps_the_stamp():
    tree, root, _ = host()
    stamp = tree.subtree_stamp(root)
    assert not tree.update_traits(root, [AVX])
    assert tree.subtree_stamp(root) == stamp


def test_stamp_is_zero_for_no_root():
    tree, root, kids = host()
    assert tree.subtree_stamp(kids[0]) == 0  # a child, not a root
    assert tree.subtree_stamp("no-such") == 0
    tree.remove(root)
    assert tree.subtree_stamp(root) == 0


def test_rollback_brings_old_stamps_back_and_new_ones_are_never_reused():
    tree, root, _ = host()
    old = tree.subtree_stamp(root)
    with tree.lock:
        savepoint = tree.savepoint()
        tree.update_traits(root, [SSE])
        undone = tree.subtree_stamp(root)
        savepoint.rollback()
    assert tree.subtree_stamp(root) == old
    tree.update_traits(root, [SSE])
    assert tree.subtree_stamp(root) not in (old, undone)
    snapshot = tree.snapshot()
    tree.update_traits(root, [AVX])
    assert snapshot.subtree_stamp(root) != tree.subtree_stamp(root)
    tree.restore(snapshot)
    assert tree.subtree_stamp(root) == snapshot.subtree_stamp(root)


def test_a_rollback_never_lets_later_writes_into_a_snapshot():
    tree, root, kids = host()
    with tree.lock:
        start = tree.snapshot()  # shares every child set with the tree
        seen = start.to_json()
        savepoint = tree.savepoint()
        tree.remove(kids[1])  # the undo keeps the shared sibling set
        tree.remove(kids[0])
        savepoint.rollback()
        tree.new_child("later", root)
        tree.new_child("deeper", kids[1])
    assert start.to_json() == seen
