"""The tracker's fast path: a node left as it was is skipped, and only then.

Everything runs through ``ResourceTracker.update_all`` with the real
ironic driver on a real inventory file and state directory.  A node is
skipped when its driver stamp, its providers (subtree stamp), its ledger
entries and the provider config are what the tracker left; these tests
change each input in turn and check the node is updated again — and that
a tracker with the fast path ends every cycle exactly where one without
it does.
"""

from __future__ import annotations

import json
import os
import pathlib
import tempfile
import uuid as uuidlib

import os_traits
from hypothesis import given, settings
from hypothesis import strategies as st

from virtdriver.drivers.fake import FakeDriver
from virtdriver.drivers.ironic import IronicDriver
from virtdriver.resource_tracker.tracker import ResourceTracker

NODES = [str(uuidlib.UUID(int=n + 1)) for n in range(3)]
FOREIGN = os_traits.COMPUTE_STATUS_DISABLED
HEAD = "meta: {schema_version: '1.0'}\nproviders:\n"


def node(number: int, *traits: str) -> dict:
    return {"uuid": NODES[number], "name": f"rack1-u{number:02d}",
            "resource_class": "baremetal.gold",
            "traits": list(traits) or ["CUSTOM_RAID5"]}


def write_nodes(path: pathlib.Path, *nodes: dict) -> None:
    """Save by rename, as editors and config tools do."""
    temp = path.with_suffix(".new")
    temp.write_text(json.dumps({"nodes": list(nodes)}))
    os.replace(temp, path)


class Counting(IronicDriver):
    """The ironic driver, counting the nodes it updates (it writes what
    IronicDriver writes, so IronicDriver's node_stamp holds for it)."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.updated: list[str] = []

    def update_provider_tree(self, tree, nodename, allocations=None):
        self.updated.append(nodename)
        super().update_provider_tree(tree, nodename, allocations)


class NoStamp(Counting):
    """The same driver without the promise: always the full update."""

    def node_stamp(self, nodename):
        return None


def service(tmp: pathlib.Path, cls=Counting, config: pathlib.Path | None
            = None) -> ResourceTracker:
    tmp.mkdir(parents=True, exist_ok=True)
    inventory = tmp / "nodes.json"
    if not inventory.exists():
        write_nodes(inventory, *(node(n) for n in range(len(NODES))))
    driver = cls(inventory_path=inventory)
    driver.init_host("conductor-1")
    return ResourceTracker(driver, state_dir=tmp / "state",
                           provider_config=config)


def cycle(tracker: ResourceTracker) -> list[str]:
    """One update_all; the nodes the driver updated in it."""
    tracker.driver.updated.clear()
    tracker.update_all()
    return sorted(tracker.driver.updated)


def steady(tmp_path, **kwargs) -> ResourceTracker:
    tracker = service(tmp_path, **kwargs)
    assert cycle(tracker) == sorted(NODES)
    return tracker


def test_a_cycle_with_nothing_changed_updates_no_node_and_writes_nothing(
        tmp_path):
    tracker = steady(tmp_path)
    ledger = tracker.ledger_path.stat()
    tree = tracker.tree.to_json()
    results = tracker.update_all()
    assert tracker.driver.updated == NODES   # the first cycle only
    assert sorted(results) == sorted(NODES)
    for result in results.values():
        assert not result.diff and result.drift.empty and not result.kept
    assert tracker.tree.to_json() == tree
    after = tracker.ledger_path.stat()
    assert (after.st_ino, after.st_mtime_ns) == (ledger.st_ino,
                                                 ledger.st_mtime_ns)
    assert all(tracker.manages(uuid) for uuid in NODES)


def test_a_driver_without_a_stamp_is_always_updated(tmp_path):
    tracker = ResourceTracker(FakeDriver("numa2-ht"), state_dir=tmp_path)
    tracker.driver.init_host("compute-1")
    calls = []
    real = tracker.driver.update_provider_tree
    tracker.driver.update_provider_tree = (
        lambda tree, name, allocations=None: calls.append(name)
        or real(tree, name))
    for _ in range(3):
        tracker.update_all()
    assert calls == ["fake-numa2-ht"] * 3


def test_a_trait_someone_added_on_the_root_brings_the_node_back(tmp_path):
    tracker = steady(tmp_path)
    tracker.tree.add_traits(NODES[0], FOREIGN, "CUSTOM_ROW_9")
    assert cycle(tracker) == [NODES[0]]
    assert FOREIGN in tracker.tree.record(NODES[0]).traits
    assert cycle(tracker) == []


def test_an_owned_trait_someone_removed_is_put_back(tmp_path):
    tracker = steady(tmp_path)
    tracker.tree.remove_traits(NODES[1], "CUSTOM_RAID5")
    tracker.driver.updated.clear()
    results = tracker.update_all()
    assert tracker.driver.updated == [NODES[1]]
    assert "CUSTOM_RAID5" in tracker.tree.record(NODES[1]).traits
    assert results[NODES[1]].drift.removed_by_others[NODES[1]] == {
        "CUSTOM_RAID5"}
    # An update that logged (drift) leaves no mark: the next cycle runs
    # the node again, finds it quiet, and the one after skips it.
    assert cycle(tracker) == [NODES[1]]
    assert cycle(tracker) == []


def test_an_inventory_someone_changed_is_put_back(tmp_path):
    tracker = steady(tmp_path)
    inventory = {rc: {"total": 1, "reserved": 1} for rc
                 in tracker.tree.record(NODES[2]).inventory}
    tracker.tree.update_inventory(NODES[2], inventory)
    assert cycle(tracker) == [NODES[2]]
    assert all(record.reserved == 0 for record
               in tracker.tree.record(NODES[2]).inventory.values())


def test_a_generation_change_brings_the_node_back(tmp_path):
    tracker = steady(tmp_path)
    data = tracker.tree.record(NODES[0])
    tracker.tree.update_traits(NODES[0], data.traits,
                               (data.generation or 0) + 1)
    assert cycle(tracker) == [NODES[0]]


def test_a_child_someone_added_brings_the_node_back_and_stays(tmp_path):
    tracker = steady(tmp_path)
    gpu = tracker.tree.new_child("cyborg-gpu", NODES[0],
                                 str(uuidlib.uuid4()))
    tracker.tree.add_traits(gpu, "CUSTOM_DEV_VENDORID_10DE")
    assert cycle(tracker) == [NODES[0]]
    assert tracker.tree.record(gpu).traits == {"CUSTOM_DEV_VENDORID_10DE"}
    assert cycle(tracker) == []


def test_a_ledger_another_process_edited_brings_back_that_node_only(
        tmp_path):
    tracker = steady(tmp_path)
    document = json.loads(tracker.ledger_path.read_text())
    document["providers"][NODES[1]] = ["CUSTOM_RAID5", "CUSTOM_GONE"]
    tracker.ledger_path.write_text(json.dumps(document))
    assert cycle(tracker) == [NODES[1]]
    assert "CUSTOM_RAID5" in tracker.ledger[NODES[1]]
    assert "CUSTOM_GONE" not in tracker.ledger[NODES[1]]   # logged, dropped
    assert cycle(tracker) == [NODES[1]]   # confirmed quiet
    assert cycle(tracker) == []


def test_a_ledger_that_lost_a_node_brings_it_back(tmp_path):
    tracker = steady(tmp_path)
    document = json.loads(tracker.ledger_path.read_text())
    del document["providers"][NODES[2]]
    tracker.ledger_path.write_text(json.dumps(document))
    assert cycle(tracker) == [NODES[2]]
    assert NODES[2] in tracker.ledger


def test_a_node_changed_in_the_inventory_is_the_only_one_updated(tmp_path):
    tracker = steady(tmp_path)
    write_nodes(tmp_path / "nodes.json", node(0), node(1, "CUSTOM_GPU"),
                node(2))
    assert cycle(tracker) == [NODES[1]]
    assert "CUSTOM_GPU" in tracker.tree.record(NODES[1]).traits
    assert "CUSTOM_RAID5" not in tracker.tree.record(NODES[1]).traits
    # The driver forgot RAID5 in that update (its stamp moved): no mark
    # until an update leaves the stamp as it found it.
    assert cycle(tracker) == [NODES[1]]
    assert cycle(tracker) == []


def test_a_rewrite_with_the_same_content_updates_nothing(tmp_path):
    tracker = steady(tmp_path)
    write_nodes(tmp_path / "nodes.json", *(node(n) for n in range(3)))
    assert cycle(tracker) == []


def test_a_provider_config_change_brings_every_node_back(tmp_path):
    config = tmp_path / "provider_config"
    config.mkdir()
    tracker = steady(tmp_path, config=config)
    assert cycle(tracker) == []
    (config / "site.yaml").write_text(
        HEAD + f"  - identification: {{uuid: {NODES[0]}}}\n"
        "    traits: {additional: [CUSTOM_RACK_7]}\n")
    assert cycle(tracker) == sorted(NODES)
    assert "CUSTOM_RACK_7" in tracker.tree.record(NODES[0]).traits
    assert "CUSTOM_RACK_7" not in tracker.tree.record(NODES[1]).traits
    assert cycle(tracker) == [NODES[0]]   # the files changed it: confirmed
    assert cycle(tracker) == []
    (config / "site.yaml").unlink()
    assert cycle(tracker) == sorted(NODES)
    assert "CUSTOM_RACK_7" not in tracker.tree.record(NODES[0]).traits


def test_a_record_another_process_edited_brings_the_node_back(tmp_path):
    config = tmp_path / "provider_config"
    config.mkdir()
    (config / "site.yaml").write_text(
        HEAD + f"  - identification: {{uuid: {NODES[0]}}}\n"
        "    traits: {additional: [CUSTOM_RACK_7]}\n")
    tracker = steady(tmp_path, config=config)
    assert cycle(tracker) == [NODES[0]]   # the files changed it: confirmed
    assert cycle(tracker) == []
    path = tracker.provider_config.file.path
    document = json.loads(path.read_text())
    del document["providers"][NODES[0]]
    path.write_text(json.dumps(document))
    assert cycle(tracker) == [NODES[0]]


def test_a_node_that_failed_is_tried_again(tmp_path, monkeypatch):
    tracker = steady(tmp_path)
    tracker.tree.add_traits(NODES[0], FOREIGN)
    failing = [True]
    real = IronicDriver.update_provider_tree

    def flaky(self, tree, nodename, allocations=None):
        if failing[0] and nodename == NODES[0]:
            raise RuntimeError("injected")
        real(self, tree, nodename, allocations)

    monkeypatch.setattr(IronicDriver, "update_provider_tree", flaky)
    try:
        tracker.update_all()
    except Exception as exc:  # UpdateAllError
        assert NODES[0] in str(exc)
    failing[0] = False
    assert cycle(tracker) == [NODES[0]]
    assert cycle(tracker) == []


# -- with and without the fast path: the same trees, ledgers and results ----

EDITS = st.lists(st.tuples(
    st.sampled_from(["add foreign", "add owned", "remove owned",
                     "inventory file", "tamper ledger", "reserve",
                     "generation", "nothing"]),
    st.integers(0, len(NODES) - 1)), min_size=1, max_size=8)


def apply(edit: str, number: int, tracker: ResourceTracker,
          inventory: pathlib.Path, version: int) -> None:
    target = NODES[number]
    tree = tracker.tree
    if edit == "add foreign":
        tree.add_traits(target, FOREIGN)
    elif edit == "add owned":
        tree.add_traits(target, "CUSTOM_RAID5", "CUSTOM_GPU")
    elif edit == "remove owned":
        tree.remove_traits(target, "CUSTOM_RAID5", "CUSTOM_GPU")
    elif edit == "inventory file":
        nodes = [node(n) for n in range(len(NODES))]
        nodes[number] = node(number, *(("CUSTOM_GPU",) if version % 2
                                       else ("CUSTOM_RAID5", "CUSTOM_NVME")))
        write_nodes(inventory, *nodes)
    elif edit == "tamper ledger":
        document = json.loads(tracker.ledger_path.read_text())
        document["providers"][target] = ["CUSTOM_GPU", FOREIGN]
        tracker.ledger_path.write_text(json.dumps(document))
    elif edit == "reserve":
        tree.update_inventory(target, {rc: {"total": 1, "reserved": 1}
                                       for rc in tree.record(target).inventory})
    elif edit == "generation":
        data = tree.record(target)
        tree.update_traits(target, data.traits, (data.generation or 0) + 1)


def observed(tracker: ResourceTracker, results) -> tuple:
    tree = [(p.uuid, p.generation, sorted(p.traits),
             sorted((rc, r.reserved) for rc, r in p.inventory.items()))
            for p in tracker.tree.providers()]
    outcome = {name: (result.diff, result.drift.describe())
               for name, result in results.items()}
    return tree, dict(tracker.ledger), outcome


@settings(max_examples=40, deadline=None)
@given(rounds=st.lists(EDITS, min_size=1, max_size=4))
def test_the_fast_path_changes_nothing_a_full_cycle_would_not(rounds):
    with tempfile.TemporaryDirectory() as name:
        tmp = pathlib.Path(name)
        fast = service(tmp / "fast")
        full = service(tmp / "full", cls=NoStamp)
        assert observed(fast, fast.update_all()) == \
            observed(full, full.update_all())
        for version, edits in enumerate(rounds):
            for edit, number in edits:
                for tracker, where in ((fast, tmp / "fast"),
                                       (full, tmp / "full")):
                    apply(edit, number, tracker, where / "nodes.json",
                          version)
            seen = [observed(t, t.update_all()) for t in (fast, full)]
            assert seen[0] == seen[1]
        # Nothing changes now: after at most one confirming cycle (an
        # update that logged leaves no mark), the fast tracker skips all.
        for _ in range(2):
            fast.driver.updated.clear()
            assert observed(fast, fast.update_all()) == \
                observed(full, full.update_all())
        assert fast.driver.updated == []


def test_a_stamp_that_raises_means_the_full_update(tmp_path):
    class Raising(Counting):
        def node_stamp(self, nodename):
            raise RuntimeError("no idea")

    tracker = steady(tmp_path, cls=Raising)
    assert cycle(tracker) == sorted(NODES)


class StampedFake(FakeDriver):
    """The fake driver (a root and NUMA cells) with a stamp: its preset
    never changes, so one constant value keeps the promise."""

    def node_stamp(self, nodename):
        return "preset" if nodename in self.get_available_nodes() else None


def test_a_node_with_children_is_checked_provider_by_provider(tmp_path):
    driver = StampedFake("numa2-ht")
    driver.init_host("compute-1")
    tracker = ResourceTracker(driver, state_dir=tmp_path)
    calls = []
    real = driver.update_provider_tree
    driver.update_provider_tree = (
        lambda tree, name, allocations=None: calls.append(name)
        or real(tree, name))
    tracker.update_all()
    tracker.update_all()
    assert len(calls) == 1 and len(tracker.tree) == 3
    cell = tracker.tree.record("fake-numa2-ht_NUMA1").uuid
    document = json.loads(tracker.ledger_path.read_text())
    document["providers"][cell] = []
    tracker.ledger_path.write_text(json.dumps(document))
    tracker.update_all()
    assert len(calls) == 2          # the cell's ledger entry differed
    assert cell in tracker.ledger and tracker.ledger[cell]
    tracker.update_all()
    assert len(calls) == 2          # rewritten quietly: marked again
    tracker.tree.add_traits(cell, FOREIGN)
    tracker.update_all()
    assert len(calls) == 3 and FOREIGN in tracker.tree.record(cell).traits
    tracker.update_all()
    assert len(calls) == 3
