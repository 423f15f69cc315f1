"""Several processes on one state directory lose nothing of each other's.

Each tracker re-reads the ledger under the directory's OS file lock and
changes only its own entries, so two processes sharing a ledger file keep
both sets; a process that cannot get the lock in time fails naming the
holder.
"""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys
import textwrap
import uuid as uuidlib

import pytest

from virtdriver.drivers.fake import FakeDriver
from virtdriver.filelock import LockTimeout
from virtdriver.resource_tracker.tracker import LOCK_FILE, ResourceTracker

WORKER = textwrap.dedent("""
    import json, os, pathlib, sys, time
    from virtdriver.drivers.ironic import IronicDriver
    from virtdriver.resource_tracker.tracker import ResourceTracker
    inventory, state, rounds = sys.argv[1], sys.argv[2], int(sys.argv[3])
    driver = IronicDriver(inventory_path=inventory)
    driver.init_host("conductor")
    print("ready", flush=True)
    sys.stdin.readline()
    tracker = ResourceTracker(driver, state_dir=pathlib.Path(state),
                              driver_name="ironic")
    path = pathlib.Path(inventory)
    for round in range(rounds):        # one long-lived tracker, as an agent
        nodes = json.loads(path.read_text())
        for node in nodes["nodes"]:    # new traits: the ledger must change
            node["traits"] = [node["traits"][0].rsplit("_R", 1)[0]
                              + f"_R{round}"]
        path.write_text(json.dumps(nodes))
        os.utime(path, ns=(round * 10**9, round * 10**9))
        tracker.update_all()
        time.sleep(0.01)               # let the other process interleave
        json.loads(tracker.ledger_path.read_text())   # always whole
""")


def inventory(path: pathlib.Path, count: int) -> list[str]:
    uuids = [str(uuidlib.uuid4()) for _ in range(count)]
    path.write_text(json.dumps({"nodes": [
        {"uuid": u, "name": f"{path.stem}-{i}", "resource_class": "gold",
         "traits": [f"CUSTOM_{path.stem.upper()}_{i}_R0"]}
        for i, u in enumerate(uuids)]}))
    return uuids


def test_two_processes_sharing_a_ledger_keep_each_others_entries(tmp_path):
    state = tmp_path / "state"
    expected = set()
    workers = []
    for name in ("east", "west"):
        path = tmp_path / f"{name}.json"
        expected |= set(inventory(path, 5))
        workers.append(subprocess.Popen(
            [sys.executable, "-c", WORKER, str(path), str(state), "30"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True))
    for worker in workers:
        assert worker.stdout.readline().strip() == "ready"
    for worker in workers:          # start both rounds at once
        worker.stdin.write("go\n")
        worker.stdin.flush()
    for worker in workers:
        worker.stdin.close()
        assert worker.wait(timeout=120) == 0
    ledger = json.loads((state / "ledger-ironic.json").read_text())
    assert set(ledger["providers"]) == expected
    for traits in ledger["providers"].values():
        assert [t for t in traits if t.startswith("CUSTOM_")][0].endswith(
            "_R29")


def test_a_held_state_directory_fails_naming_the_holder(tmp_path):
    holder = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(f"""
            import sys, time
            from virtdriver.filelock import exclusive_lock
            with exclusive_lock({str(tmp_path / LOCK_FILE)!r}, purpose="x"):
                print("held", flush=True)
                sys.stdin.readline()
        """)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        driver = FakeDriver("small")
        driver.init_host("compute-1")
        with pytest.raises(LockTimeout) as caught:
            ResourceTracker(driver, state_dir=tmp_path, lock_timeout=0.2)
        message = str(caught.value)
        assert f"pid {holder.pid}" in message
        assert str(tmp_path) in message and "Wait for that process" in message
    finally:
        holder.stdin.close()
        holder.wait(timeout=30)
    tracker = ResourceTracker(driver, state_dir=tmp_path, lock_timeout=5)
    tracker.update_all()
    assert tracker.ledger
