"""The marking aggregate through ``virtdriver sync`` (issue 26): a
replaced ``placement-aggregate`` is put on every provider even when the
embedded database is as the last sync left it; a damaged file is replaced
with a warning on stderr; a file that cannot be saved is a visible error
(exit 2) and no sync mints a new aggregate on every provider.

A file that cannot be saved is a real one: the damaged file made
immutable (``chattr +i``), so even root cannot replace it; the tests skip
where the filesystem has no such flag."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import uuid as uuidlib

import pytest

from virtdriver import cli
from virtdriver.placement.marker import FILE_NAME

FAKE = ["--driver", "fake", "--host-spec", "numa2-ht"]


@pytest.fixture
def state_dir(tmp_path, monkeypatch):
    path = tmp_path / "state"
    monkeypatch.setenv("VIRTDRIVER_STATE_DIR", str(path))
    return path


def run_sync(capsys, *args: str) -> tuple[int, dict | None, str]:
    status = cli.main(["sync", "--format", "json", *args])
    captured = capsys.readouterr()
    return (status, json.loads(captured.out) if captured.out else None,
            captured.err)


def sync_process(state, *args: str) -> tuple[int, dict | None, str]:
    """``sync --format json`` in a child (one embedded database per
    process)."""
    env = {**os.environ, "VIRTDRIVER_STATE_DIR": str(state)}
    code = ("import sys\nfrom virtdriver import cli\n"
            f"sys.exit(cli.main(['sync', '--format', 'json', "
            f"*{list(args)!r}]))")
    done = subprocess.run([sys.executable, "-c", code], env=env, text=True,
                          capture_output=True, timeout=120)
    return (done.returncode, json.loads(done.stdout) if done.stdout
            else None, done.stderr)


def aggregates_in(db) -> dict[str, set[str]]:
    """Provider uuid → its aggregates, read from the embedded database."""
    with sqlite3.connect(db) as connection:
        rows = connection.execute(
            "SELECT rp.uuid, pa.uuid FROM resource_providers rp LEFT JOIN "
            "resource_provider_aggregates rpa ON rpa.resource_provider_id ="
            " rp.id LEFT JOIN placement_aggregates pa ON pa.id = "
            "rpa.aggregate_id").fetchall()
    connection.close()
    found: dict[str, set[str]] = {}
    for provider, aggregate in rows:
        found.setdefault(provider, set())
        if aggregate:
            found[provider].add(aggregate)
    return found


@pytest.fixture
def immutable():
    """``make(path)``: path's flags get ``i`` (undone after the test)."""
    made = []

    def make(path):
        done = subprocess.run(["chattr", "+i", str(path)],
                              capture_output=True, text=True)
        if done.returncode != 0:
            pytest.skip(f"no immutable flag here: {done.stderr.strip()}")
        made.append(path)

    yield make
    for path in made:
        subprocess.run(["chattr", "-i", str(path)], check=False)


def test_a_replaced_aggregate_file_is_synced_not_skipped(tmp_path,
                                                         placement_pool):
    state = tmp_path / "state"
    db = state / "placement.sqlite"
    status, first, err = sync_process(state, *FAKE)
    assert (status, err) == (0, "")
    old = (state / FILE_NAME).read_text().strip()
    providers = {p["uuid"] for p in first["tree"]["providers"]}
    assert {uuid: aggs for uuid, aggs in aggregates_in(db).items()} == {
        uuid: {old} for uuid in providers}

    new = str(uuidlib.uuid4())
    (state / FILE_NAME).write_text(new + "\n")
    status, second, err = sync_process(state, *FAKE)

    # The database is as the last sync left it, but no provider carries
    # the new aggregate: Placement is started and marks every one.
    assert (status, err) == (0, "")
    assert second["sync"]["requests"]["writes"] == len(providers)
    assert not any(note.startswith("embedded Placement not started")
                   for note in second["sync"]["notes"])
    assert all(new in aggs for aggs in aggregates_in(db).values())


def test_a_damaged_file_is_replaced_with_a_warning_on_stderr(
        state_dir, placement, api, capsys):
    url = ["--placement-url", placement.url]
    assert run_sync(capsys, *url, *FAKE)[0] == 0
    (state_dir / FILE_NAME).write_text("not a uuid\n")

    status, doc, err = run_sync(capsys, *url, *FAKE)

    assert status == 0
    new = (state_dir / FILE_NAME).read_text().strip()
    assert str(uuidlib.UUID(new)) == new
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "held no uuid" in lines[0] and new in lines[0]
    assert doc["sync"]["marker_problem"] == lines[0]
    assert doc["sync"]["unmarked"] is False
    assert all(new in api.aggregates(p["uuid"])
               for p in doc["tree"]["providers"])


def test_an_unsavable_file_exits_2_and_mints_no_aggregate(
        state_dir, placement, api, capsys, immutable):
    url = ["--placement-url", placement.url]
    status, first, _ = run_sync(capsys, *url, *FAKE)
    assert status == 0
    mark = (state_dir / FILE_NAME).read_text().strip()
    uuids = [p["uuid"] for p in first["tree"]["providers"]]
    path = state_dir / FILE_NAME
    path.write_text("damaged\n")
    immutable(path)
    root = uuids[0]
    owned = sorted(t for t in api.traits(root) if t.startswith("COMPUTE_"))

    for _ in range(3):
        # Someone takes an owned trait away: the sync still puts it back.
        api.remove_traits(root, owned[0])
        status, doc, err = run_sync(capsys, *url, *FAKE)

        assert status == 2
        lines = err.strip().splitlines()
        assert len(lines) == 1, err
        assert lines[0].startswith("virtdriver: could not save the marking "
                                   f"aggregate in {path}")
        assert "then sync again" in lines[0]
        assert doc["sync"]["unmarked"] is True
        assert owned[0] in api.traits(root)
        # No aggregate minted: every provider keeps exactly the old mark.
        assert {uuid: api.aggregates(uuid) for uuid in uuids} == {
            uuid: {mark} for uuid in uuids}
    assert path.read_text() == "damaged\n"


def test_the_agents_cycle_says_it_and_fails(tmp_path, placement,
                                            immutable):
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    path = state / FILE_NAME
    path.write_text("damaged\n")
    path.chmod(0o600)
    immutable(path)
    env = dict(os.environ, VIRTDRIVER_STATE_DIR=str(state))

    done = subprocess.run(
        [sys.executable, "-m", "virtdriver.cli", "agent", "--once",
         "--placement-url", placement.url, *FAKE], env=env, text=True,
        capture_output=True, timeout=120)

    assert done.returncode == 2
    [line] = done.stderr.splitlines()
    assert "cycle 1: synced, 3 providers changed" in line
    assert f"could not save the marking aggregate in {path}" in line
