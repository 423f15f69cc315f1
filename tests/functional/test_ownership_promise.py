"""The ownership promise under tampering and failure (issue 9).

The tracker never touches what it does not own, and a failed update
changes nothing — tree (generations included), ledger file and the
driver's memory — so that a retry does exactly what the failed attempt
would have done.  Everything runs through ``ResourceTracker`` as
production does, with the real fake and ironic drivers.
"""

from __future__ import annotations

import json
import logging
import os
import pathlib
import uuid as uuidlib

import os_traits
import pytest

from virtdriver import cli
from virtdriver.drivers.base import DriverError
from virtdriver.drivers.fake import FakeDriver
from virtdriver.drivers.identity import root_uuid
from virtdriver.drivers.ironic import IronicDriver
from virtdriver.resource_tracker import tracker as tracker_module
from virtdriver.resource_tracker.ledger import LedgerError
from virtdriver.resource_tracker.provider_tree import ProviderTree
from virtdriver.resource_tracker.tracker import ResourceTracker

NODE = "fake-numa2-ht"
GOLD = "1be26c0b-03f2-4d2e-ae87-c02d7f33c123"
SILVER = "2c5e9a51-7f0e-4e55-9a43-0d3b2f7e8a10"
FOREIGN = os_traits.COMPUTE_STATUS_DISABLED
VENDOR = "CUSTOM_DEV_VENDORID_10DE"


def fake(preset="numa2-ht", cls=FakeDriver):
    driver = cls(preset)
    driver.init_host("compute-1")
    return driver


def tamper(path: pathlib.Path, **entries) -> None:
    document = json.loads(path.read_text())
    document["providers"].update(entries)
    path.write_text(json.dumps(document))


def state(tracker: ResourceTracker) -> tuple:
    """Everything an update may change, generations included."""
    tree = [(p.uuid, p.name, p.generation, p.parent_uuid,
             sorted(p.traits), sorted(p.inventory), sorted(p.aggregates))
            for p in tracker.tree.providers()]
    ledger = (tracker.ledger_path.read_bytes()
              if tracker.ledger_path.exists() else None)
    return tree, ledger


# -- a tampered or stale ledger never deletes a foreign provider --------------

def test_foreign_root_listed_in_the_ledger_is_not_deleted(tmp_path, caplog):
    tracker = ResourceTracker(fake(), state_dir=tmp_path)
    tracker.update_all()
    foreign = tracker.tree.new_root("sharing-provider")
    tracker.tree.add_traits(foreign, FOREIGN)
    tamper(tracker.ledger_path, **{foreign: []})
    with caplog.at_level(logging.WARNING):
        results = tracker.update_all()
    assert tracker.tree.record(foreign).traits == {FOREIGN}
    assert "only the ledger lists it" in results["sharing-provider"].kept[
        tracker.tree.record(foreign).label]
    assert not results["sharing-provider"].diff
    assert "not removed" in caplog.text


def test_a_restarted_tracker_keeps_a_foreign_root_named_like_an_old_node(
        tmp_path):
    """After a restart only the derived uuid proves a gone node's root."""
    first = ResourceTracker(fake(), state_dir=tmp_path)
    first.update_all()
    tree = ProviderTree.from_json(first.tree.to_json())
    imposter = str(uuidlib.uuid4())
    tree.new_root("old-compute", imposter)
    ours = tree.new_root("older-compute", root_uuid("fake", "older-compute"))
    tamper(first.ledger_path, **{imposter: [], ours: []})
    restarted = ResourceTracker(fake(), state_dir=tmp_path, tree=tree)
    results = restarted.update_all()
    assert tree.exists(imposter) and results["old-compute"].kept
    assert not tree.exists(ours)
    assert results["older-compute"].diff.deleted == [ours]
    assert ours not in restarted.ledger and imposter in restarted.ledger


def test_a_foreign_child_under_our_root_is_never_touched(tmp_path):
    tracker = ResourceTracker(fake(), state_dir=tmp_path)
    tracker.update_all()
    gpu = tracker.tree.new_child("cyborg-gpu", NODE, str(uuidlib.uuid4()))
    tracker.tree.add_traits(gpu, VENDOR, os_traits.HW_CPU_X86_AVX512F)
    tamper(tracker.ledger_path, **{gpu: [VENDOR]})
    tracker = ResourceTracker(tracker.driver, state_dir=tmp_path,
                              tree=tracker.tree)
    result = tracker.update_available_resource(NODE)
    assert tracker.tree.record(gpu).traits == {
        VENDOR, os_traits.HW_CPU_X86_AVX512F}
    assert result.diff.get(gpu) is None
    assert gpu not in tracker.ledger


def test_a_gone_root_with_a_foreign_child_is_kept(tmp_path):
    driver = fake()
    tracker = ResourceTracker(driver, state_dir=tmp_path)
    tracker.update_all()
    gpu = tracker.tree.new_child("cyborg-gpu", NODE, str(uuidlib.uuid4()))
    driver.get_available_nodes = lambda refresh=False: []
    results = tracker.update_all()
    assert tracker.tree.exists(NODE) and tracker.tree.exists(gpu)
    assert "someone else's" in next(iter(results[NODE].kept.values()))


def test_derived_child_uuids_make_two_runs_agree(tmp_path):
    one = ResourceTracker(fake(), state_dir=tmp_path / "a")
    two = ResourceTracker(fake(), state_dir=tmp_path / "b")
    one.update_all()
    two.update_all()
    assert one.tree.to_json() == two.tree.to_json()
    assert len(one.tree) == 3


# -- a failed update changes nothing, and a retry does what it would have ----

class Generational(FakeDriver):
    """Bumps its root's generation (as a sync would) and then may fail."""

    fail = False

    def update_provider_tree(self, tree, nodename, allocations=None):
        super().update_provider_tree(tree, nodename)
        data = tree.record(nodename)
        tree.update_traits(nodename, data.traits, (data.generation or 0) + 1)
        if self.fail:
            raise DriverError("hypervisor went away")


def test_a_generation_only_change_is_rolled_back(tmp_path):
    tracker = ResourceTracker(fake(cls=Generational), state_dir=tmp_path)
    tracker.update_all()
    before = state(tracker)
    tracker.driver.fail = True
    with pytest.raises(DriverError):
        tracker.update_available_resource(NODE)
    assert state(tracker) == before


def write_nodes(path: pathlib.Path, *nodes: dict) -> None:
    path.write_text(json.dumps({"nodes": list(nodes)}))
    tick = int.from_bytes(os.urandom(4), "big") * 1000
    os.utime(path, ns=(tick, tick))


def gold(*traits: str) -> dict:
    return {"uuid": GOLD, "name": "rack1-u07", "resource_class": "gold",
            "traits": list(traits)}


SILVER_NODE = {"uuid": SILVER, "name": "rack2-u01", "resource_class": "gold",
               "traits": ["CUSTOM_RAID5"]}


class FaultyIronic(IronicDriver):
    """The ironic driver with a fault injected at one named step."""

    fail_at: str | None = None

    def _maybe_fail(self, step: str) -> None:
        if self.fail_at == step:
            raise DriverError(f"injected fault at {step}")

    def ownership_for(self, nodename):
        found = super().ownership_for(nodename)
        self._maybe_fail("ownership_for")
        return found

    def update_provider_tree(self, tree, nodename, allocations=None):
        super().update_provider_tree(tree, nodename)
        if not tree.exists("half-done"):
            tree.new_root("half-done")
        self._maybe_fail("update_provider_tree")

    def node_capabilities(self, nodename):
        self._maybe_fail("node_capabilities")
        return super().node_capabilities(nodename)


def _failing(*args, **kwargs):
    raise OSError(28, "No space left on device")


def _boom(*args, **kwargs):
    raise RuntimeError("injected fault in the tracker")


STEPS = {
    "ownership_for": None, "update_provider_tree": None,
    "node_capabilities": None,
    "settle": ("settle_provider", _boom), "diff": ("diff", _boom),
    "ledger save": ("os.replace", _failing),
}


def ironic_tracker(tmp_path: pathlib.Path) -> ResourceTracker:
    """A tracker whose driver set CUSTOM_RAID5 on GOLD and whose
    inventory no longer names it: the next update must remove it."""
    tmp_path.mkdir()
    path = tmp_path / "nodes.json"
    write_nodes(path, gold("CUSTOM_RAID5"), SILVER_NODE)
    driver = FaultyIronic(inventory_path=str(path))
    driver.init_host("conductor-1")
    tracker = ResourceTracker(driver, state_dir=tmp_path / "state")
    tracker.update_all()
    tracker.tree.remove("half-done")
    tracker.tree.add_traits(GOLD, "CUSTOM_RACK_7")          # an operator's
    write_nodes(path, gold(), SILVER_NODE)
    return tracker


@pytest.mark.parametrize("step", sorted(STEPS))
@pytest.mark.parametrize("call", ["update_available_resource", "update_all"])
def test_every_failing_step_changes_nothing_and_a_retry_converges(
        step, call, tmp_path, monkeypatch):
    tracker = ironic_tracker(tmp_path / "faulty")
    clean = ironic_tracker(tmp_path / "clean")
    before = state(tracker)
    memory = tracker.driver.ownership_for(GOLD)
    patch = STEPS[step]
    if patch is None:
        tracker.driver.fail_at = step
    elif patch[0] == "os.replace":
        monkeypatch.setattr("os.replace", patch[1])
    else:
        monkeypatch.setattr(tracker_module, *patch)
    args = (GOLD,) if call == "update_available_resource" else ()
    with pytest.raises((DriverError, LedgerError, RuntimeError)):
        getattr(tracker, call)(*args)
    monkeypatch.undo()
    tracker.driver.fail_at = None
    assert state(tracker) == before
    assert tracker.driver.ownership_for(GOLD) == memory
    assert "CUSTOM_RAID5" in memory.static
    for each in (tracker, clean):
        getattr(each, call)(*args)
        each.tree.remove("half-done")
    assert tracker.tree.to_json() == clean.tree.to_json()
    assert "CUSTOM_RAID5" not in tracker.tree.record(GOLD).traits
    assert "CUSTOM_RACK_7" in tracker.tree.record(GOLD).traits
    assert tracker.ledger == clean.ledger


def test_two_report_runs_print_the_same_tree(capsys):
    outputs = []
    for _ in range(2):
        assert cli.main(["report", "--driver", "fake", "--host-spec",
                         "numa4-large", "--format", "json"]) == 0
        outputs.append(capsys.readouterr().out)
    assert outputs[0] == outputs[1]
    assert json.loads(outputs[0])["providers"][1]["uuid"] == \
        str(uuidlib.uuid5(uuidlib.UUID(
            json.loads(outputs[0])["providers"][0]["uuid"]),
            "fake-numa4-large_NUMA0"))


def test_manages_names_what_the_driver_made_in_this_process(tmp_path):
    tracker = ResourceTracker(fake(), state_dir=tmp_path)
    tracker.update_all()
    foreign = tracker.tree.new_root("sharing-provider")
    assert all(tracker.manages(p.uuid) for p in tracker.tree.providers()
               if p.uuid != foreign)
    assert not tracker.manages(foreign)
    restarted = ResourceTracker(fake(), state_dir=tmp_path,
                                tree=tracker.tree)
    assert not restarted.manages(tracker.tree.record(NODE).uuid)
