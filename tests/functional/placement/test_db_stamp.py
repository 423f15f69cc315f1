"""The embedded database's stamp (:mod:`virtdriver.placement.db_stamp`):
what makes it stale, and the sync replayed on the sync state without a
request — against a real Placement, so the state is one a real sync
wrote."""

from __future__ import annotations

import dataclasses
import os
import sqlite3

import pytest
from placement_helpers import Host

from virtdriver.placement.db_stamp import DatabaseStamp
from virtdriver.placement.marker import Marker
from virtdriver.placement.state import FILE_NAME


def database(path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with sqlite3.connect(path) as connection:
        connection.execute("CREATE TABLE t (a INTEGER)")
        connection.execute("INSERT INTO t VALUES (1)")
    connection.close()


@pytest.fixture
def stamp(tmp_path):
    state = tmp_path / "state"
    database(state / "placement.sqlite")
    (state / FILE_NAME).write_text("{}\n")
    stamp = DatabaseStamp(state / "placement.sqlite", state, "in-process:x")
    stamp.record()
    assert stamp.matches()
    return stamp


def test_a_write_with_the_mtime_put_back_is_noticed(stamp):
    before = stamp.db.stat()
    with sqlite3.connect(stamp.db) as connection:
        connection.execute("UPDATE t SET a = 2")
    connection.close()
    os.utime(stamp.db, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert stamp.db.stat().st_size == before.st_size
    assert not stamp.matches()


def test_the_same_bytes_in_another_file_are_noticed(stamp):
    data = stamp.db.read_bytes()
    stamp.db.unlink()
    stamp.db.write_bytes(data)
    assert not stamp.matches()


def test_a_changed_state_file_is_noticed(stamp):
    (stamp.state_dir / FILE_NAME).write_text("[]\n")
    assert not stamp.matches()


@pytest.mark.parametrize("suffix", ["-journal", "-wal"])
def test_a_journal_beside_the_database_means_unknown(stamp, suffix):
    stamp.db.with_name(stamp.db.name + suffix).write_bytes(b"")
    assert stamp.current() is None and not stamp.matches()


@pytest.mark.parametrize("text", [None, "", "{", '{"format": "other"}'])
def test_a_missing_or_bad_stamp_never_matches(stamp, text):
    if text is None:
        stamp.forget()
    else:
        stamp.path.write_text(text)
    assert not stamp.matches()


def test_a_synced_tree_replays_without_a_request(tmp_path, placement):
    host = Host(tmp_path / "state")
    client = placement.client()
    assert host.sync(client).ok
    database(tmp_path / "state" / "placement.sqlite")
    stamp = DatabaseStamp(tmp_path / "state" / "placement.sqlite",
                          tmp_path / "state", client.endpoint)
    stamp.record()
    sent = client.counts

    result = stamp.replay(host.tree, Marker(host.marker),
                          owned_for=host.owned, remove=host.owned.gone)

    assert result is not None and result.ok and not result.changed
    assert result.counts.total == 0 and client.counts == sent
    assert result.notes[0].startswith("embedded Placement not started")
    assert stamp.matches()   # the replay saved nothing
    # A marking aggregate no provider carries (the file replaced), none
    # at all, or one just repaired: Placement is needed.
    for marker in (Marker("0c5d2b4e-6b62-4c8e-9d1a-3f1f4a1b2c3d"),
                   Marker(None, "could not save"),
                   Marker(host.marker, "replaced")):
        assert stamp.replay(host.tree, marker, owned_for=host.owned) is None
    assert client.counts == sent

    # The tree changed: Placement is needed, and nothing was sent.
    cell = next(p for p in host.tree.providers() if p.inventory)
    inventory = dict(cell.inventory)
    rc, record = sorted(inventory.items())[0]
    inventory[rc] = dataclasses.replace(record, reserved=record.reserved + 1)
    assert host.tree.update_inventory(cell.uuid, inventory)
    assert stamp.replay(host.tree, Marker(host.marker),
                        owned_for=host.owned) is None
    assert client.counts == sent


def test_a_state_of_another_service_is_not_replayed(tmp_path, placement):
    host = Host(tmp_path / "state")
    assert host.sync(placement.client()).ok
    database(tmp_path / "state" / "placement.sqlite")
    stamp = DatabaseStamp(tmp_path / "state" / "placement.sqlite",
                          tmp_path / "state", "in-process:sqlite:///other")
    stamp.record()
    assert stamp.replay(host.tree, Marker(host.marker),
                        owned_for=host.owned) is None

