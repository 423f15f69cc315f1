"""The upgrade to small-page ``MEMORY_MB`` against a real Placement: a
tree synced when a cell's ``MEMORY_MB`` still held its huge pages' memory,
with an instance on huge pages allocated ``MEMORY_MB`` and pages for the
same memory, is reshaped in one ``POST /reshaper``: the repeat is dropped
as the total goes down, every other allocation stays as it is."""

from __future__ import annotations

import pytest
from placement_helpers import Host, assert_placement_equals
from test_placement_reshape import PAGES, Recorder, driver, resources

from virtdriver.drivers.host_resources import CellResources

#: numa2-ht: 32 GiB a cell, 1024 pages of 2 MiB (2 GiB) of it.
CELL_MB, HUGE_MB = 32768, 2048


@pytest.fixture
def old_model(monkeypatch):
    """Publish trees as before: MEMORY_MB the cell's whole memory."""
    monkeypatch.setattr(CellResources, "small_memory_mb",
                        property(lambda cell: cell.total_memory_mb))
    monkeypatch.setattr(CellResources, "small_capacity_mb",
                        property(lambda cell: cell.memory_mb))
    return monkeypatch


def allocated_before_upgrade(tmp_path, client, api, old_model):
    """An old tree with a huge-page instance and a small-page one on
    NUMA1; the state directory as the old version left it."""
    host = Host(tmp_path / "state")
    assert host.sync(client).ok
    cell1 = host.uuid(f"{host.root.name}_NUMA1")
    assert api.inventories(cell1)["MEMORY_MB"]["total"] == CELL_MB
    huge = api.allocate(cell1, {"VCPU": 2, "MEMORY_MB": 1024, PAGES: 512})
    small = api.allocate(cell1, {"VCPU": 1, "MEMORY_MB": 512})
    old_model.undo()
    return cell1, huge, small


@pytest.mark.parametrize("state", ["kept", "lost"])
def test_the_upgrade_drops_memory_held_twice_in_one_reshape(
        tmp_path, client, api, old_model, state):
    cell1, huge, small = allocated_before_upgrade(tmp_path, client, api,
                                                  old_model)
    state_dir = tmp_path / ("state" if state == "kept" else "new-state")
    upgraded = Host(state_dir, driver())
    sent = Recorder(client)

    result = upgraded.sync(client)

    assert result.ok, result.describe()
    assert sent.count("POST", "/reshaper") == 1
    assert resources(api, huge) == {cell1: {"VCPU": 2, PAGES: 512}}
    assert resources(api, small) == {cell1: {"VCPU": 1, "MEMORY_MB": 512}}
    assert api.inventories(cell1)["MEMORY_MB"]["total"] == CELL_MB - HUGE_MB
    assert_placement_equals(api, upgraded.tree)
    assert any(huge in note and "POST /reshaper" in note
               for note in result.notes)
    # Afterwards nothing is suspected: one read, no write.
    assert upgraded.sync(client).counts.by_method == {"GET": 1}


def test_an_upgraded_tree_with_nothing_held_twice_is_not_reshaped(
        tmp_path, client, api, old_model):
    host = Host(tmp_path / "state")
    assert host.sync(client).ok
    cell1 = host.uuid(f"{host.root.name}_NUMA1")
    small = api.allocate(cell1, {"VCPU": 1, "MEMORY_MB": 512})
    old_model.undo()
    upgraded = Host(tmp_path / "state", driver())
    sent = Recorder(client)

    assert upgraded.sync(client).ok
    assert sent.count("POST", "/reshaper") == 0
    assert resources(api, small) == {cell1: {"VCPU": 1, "MEMORY_MB": 512}}
    assert api.inventories(cell1)["MEMORY_MB"]["total"] == CELL_MB - HUGE_MB
