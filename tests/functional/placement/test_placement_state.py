"""The persisted sync state is a cache: a lost, stale, edited or forged
file costs reads, never a deletion or a lost foreign trait."""

from __future__ import annotations

import json
import os

import os_traits
import pytest
from placement_helpers import reads_without_state

from virtdriver.placement.state import (
    FILE_NAME, MAX_BYTES, SyncState, SyncStateFile, checksum)


def forge(state_dir, edit) -> None:
    """Rewrite the state file through ``edit(state_doc)`` with a
    recomputed checksum: what a deliberate forger would write."""
    path = state_dir / FILE_NAME
    doc = json.loads(path.read_text())
    edit(doc["state"])
    doc["checksum"] = checksum(doc["state"])
    path.write_text(json.dumps(doc))


def test_the_file_is_written_only_when_it_changed(host, client):
    host.sync(client)
    path = host.state_dir / FILE_NAME
    before = path.stat().st_mtime_ns, path.read_bytes()
    os.utime(path, ns=(1, 1))
    host.update()
    assert host.sync(client).counts.by_method == {"GET": 1}
    assert path.stat().st_mtime_ns == 1
    assert path.read_bytes() == before[1]


def test_a_hand_edited_file_is_ignored_and_costs_reads(host, client, api):
    host.sync(client)
    path = host.state_dir / FILE_NAME
    path.write_text(path.read_text().replace('"generation": ',
                                             '"generation": 1'))

    result = host.sync(client)

    assert result.ok and not result.changed
    assert any("checksum" in note for note in result.notes)
    assert result.counts.writes == 0
    assert result.counts.reads == reads_without_state(host.tree)
    # A good file again: the next sync trusts it.
    assert host.sync(client).counts.by_method == {"GET": 1}


@pytest.mark.parametrize("content, reason", [
    (b"\xff\xfe not text", "not UTF-8"),
    (b"{not json", "not JSON"),
    (b'{"format": "something-else"}', "not a virtdriver-placement-sync"),
    (b'[' * 100000 + b']' * 100000, "not JSON"),
])
def test_an_unreadable_file_is_ignored(host, client, content, reason):
    host.sync(client)
    (host.state_dir / FILE_NAME).write_bytes(content)

    result = host.sync(client)

    assert result.ok and result.counts.writes == 0
    assert any(reason in note for note in result.notes), result.notes


def test_a_huge_file_is_ignored_unread(host, client, opened):
    path = host.state_dir / FILE_NAME
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as handle:
        handle.truncate(MAX_BYTES + 1)
    opened.clear()

    state = SyncStateFile(host.state_dir).load()

    assert "over the limit" in state.note
    assert str(path) not in opened


def test_a_forged_file_cannot_make_the_sync_delete_a_provider(
        host, client, api):
    """The file lists someone else's provider as last synced by us; the
    tree does not have it: only the caller's ownership could vouch."""
    host.sync(client)
    stranger = "5b0c8f9e-3d2a-4f1b-9c8e-7a6d5c4b3a21"
    api.client.create_provider(stranger, "someone-elses", None)

    def claim(state):
        state["providers"][stranger] = {
            "name": "someone-elses", "parent": None, "root": stranger,
            "generation": 0, "inventories": {}, "traits": [],
            "aggregates": []}
    forge(host.state_dir, claim)

    result = host.sync(client)

    assert stranger in api.providers()
    assert "does not vouch" in result.get(stranger).kept
    assert result.counts.writes == 0


def test_a_forged_file_cannot_make_the_sync_remove_a_foreign_trait(
        host, client, api):
    """The file, at Placement's real generation, leaves out a foreign
    trait; when the tree then changes, the write is based on what
    Placement has, not on the file."""
    host.sync(client)
    root = host.root.uuid
    api.add_traits(root, "CUSTOM_OPERATOR")
    host.sync(client)            # reads the new generation, writes nothing

    def drop(state):
        entry = state["providers"][root]
        entry["traits"] = [t for t in entry["traits"]
                           if t != "CUSTOM_OPERATOR"]
    forge(host.state_dir, drop)
    asserted = os_traits.HW_CPU_X86_AVX512F
    host.tree.add_traits(root, asserted)   # as if the driver asserted it

    result = host.sync(client)

    assert result.ok
    assert {"CUSTOM_OPERATOR", asserted} <= api.traits(root)
    assert result.get(root).traits_added == {asserted}
    assert not result.get(root).traits_removed


def test_a_forged_file_cannot_make_the_sync_remove_a_foreign_aggregate(
        host, client, api):
    host.sync(client)
    root = host.root.uuid
    nova = "1f0e9d8c-7b6a-4a5f-8e4d-3c2b1a0f9e8d"
    api.set_aggregates(root, {nova})
    host.sync(client)

    def drop(state):
        state["providers"][root]["aggregates"] = []
    forge(host.state_dir, drop)
    ours = "8a4c2a6e-60f1-4a9e-9a3e-2c1d7a6b5e01"
    host.tree.add_aggregates(root, ours)

    result = host.sync(client)

    assert result.ok and api.aggregates(root) == {nova, ours, host.marker}


def test_a_file_claiming_custom_names_exist_does_not_break_the_sync(
        host, client, api, tmp_path):
    """Against a new, empty Placement the file says CUSTOM_ names exist
    (it described another one): the sync creates them when Placement
    says they are unknown."""
    state = SyncState(client.endpoint)
    state.custom_classes.add("CUSTOM_MEM_PAGE_SIZE_2048")
    SyncStateFile(host.state_dir).save(state)

    result = host.sync(client)

    assert result.ok, result.describe()
    cell = host.tree.providers()[1]
    assert "CUSTOM_MEM_PAGE_SIZE_2048" in api.inventories(cell.uuid)
    # The first cell's write was refused, the names created, the write
    # retried; the other cell's went through at once.
    assert result.names_recreated == 1


def test_a_state_of_another_placement_is_not_trusted(host, client, api):
    host.sync(client)

    def elsewhere(state):
        state["endpoint"] = "http://127.0.0.1:1"
    forge(host.state_dir, elsewhere)

    result = host.sync(client)

    assert result.ok and result.counts.writes == 0
    assert result.counts.reads == reads_without_state(host.tree)


def test_a_state_file_round_trips(host, client):
    host.sync(client)
    path = host.state_dir / FILE_NAME
    loaded = SyncStateFile(host.state_dir).load()

    assert loaded.note is None
    assert set(loaded.providers) == {p.uuid for p in host.tree.providers()}
    for provider in host.tree.providers():
        known = loaded.providers[provider.uuid]
        assert known.traits == provider.traits
        assert dict(known.inventory) == dict(provider.inventory)
    doc = json.loads(path.read_text())
    assert doc["checksum"] == checksum(doc["state"])
    assert doc["state"]["microversion"] == client.microversion
