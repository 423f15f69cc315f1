"""sync() against a real Placement: a nested NUMA host from the fake
driver through the real ResourceTracker."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import threading

import os_traits
import pytest
from placement_helpers import (
    assert_placement_equals, expected_writes, reads_without_state)

from virtdriver.filelock import LockTimeout
from virtdriver.placement.state import SyncState, SyncStateFile
from virtdriver.placement.sync import sync, sync_state_dir
from virtdriver.resource_tracker.provider_tree import ProviderTree


def test_first_sync_of_a_nested_host(host, client, api):
    result = host.sync(client)

    assert result.ok and result.changed, result.describe()
    assert_placement_equals(api, host.tree)
    cells = [p for p in host.tree.providers() if p.parent_uuid]
    assert len(cells) == 2
    assert {o.uuid for o in result.outcomes if o.created} == {
        p.uuid for p in host.tree.providers()}
    # GET / (microversion), the marked listing (empty) and the new root's
    # in_tree listing; nothing else is read.
    assert result.counts.by_method.get("GET") == 3
    assert result.counts.writes == expected_writes(host.tree)
    assert result.counts.by_method["POST"] == 3
    for provider in host.tree.providers():
        assert api.traits(provider.uuid) == provider.traits


def test_steady_state_is_one_read_and_no_write(host, client):
    host.sync(client)
    for _ in range(3):
        host.update()
        result = host.sync(client)
        assert result.ok and not result.changed
        assert result.counts.by_method == {"GET": 1}
        assert result.outcomes == ()


def test_steady_state_across_a_process_restart(host, placement, client):
    """A second process with its own client and the state from the file:
    one read for the tree, no write (the microversion is remembered)."""
    first = host.sync(client)
    assert first.ok
    script = textwrap.dedent("""
        import json, pathlib, sys
        from virtdriver.drivers.fake import FakeDriver
        from virtdriver.placement.loopback import PlacementServer
        from virtdriver.placement.ownership import TrackerOwnership
        from virtdriver.placement.sync import sync_state_dir
        from virtdriver.resource_tracker.tracker import ResourceTracker
        state_dir, url = pathlib.Path(sys.argv[1]), sys.argv[2]
        driver = FakeDriver("numa2-ht")
        driver.init_host("host")
        tracker = ResourceTracker(driver, state_dir=state_dir)
        owned = TrackerOwnership(tracker)
        owned.note(tracker.update_all())
        server = PlacementServer("unused", port=int(url.rsplit(":", 1)[1]))
        result = sync_state_dir(tracker.tree, server.client(),
                                owned_for=owned, state_dir=state_dir)
        print(json.dumps({"ok": result.ok, "changed": result.changed,
                          "counts": dict(result.counts.by_method)}))
    """)
    for _ in range(2):
        done = subprocess.run(
            [sys.executable, "-c", script, str(host.state_dir),
             placement.url], capture_output=True, text=True, timeout=60,
            env={**os.environ, "PYTHONPATH": os.getcwd()})
        assert done.returncode == 0, done.stderr
        report = json.loads(done.stdout)
        assert report == {"ok": True, "changed": False,
                          "counts": {"GET": 1}}


def test_a_lost_state_costs_reads_not_writes(host, client):
    host.sync(client)
    SyncStateFile(host.state_dir).path.unlink()

    result = host.sync(client)

    assert result.ok and not result.changed
    # The listing, then three parts per provider (no trusted record; the
    # client negotiated its microversion already).
    assert result.counts.writes == 0
    assert result.counts.reads == reads_without_state(host.tree)


def test_foreign_traits_survive_every_sync(host, client, api):
    host.sync(client)
    root = host.root.uuid
    cell = host.uuid(f"{host.root.name}_NUMA0")
    api.add_traits(root, "CUSTOM_OPERATOR_GOLD",
                   os_traits.COMPUTE_STATUS_DISABLED)
    api.add_traits(cell, "CUSTOM_OPERATOR_CELL")

    first = host.sync(client)
    # Two providers moved: each re-read (3 parts), nothing written.
    assert first.ok and first.counts.writes == 0
    assert first.counts.reads == 1 + 2 * 3
    for _ in range(4):
        host.update()
        result = host.sync(client)
        assert result.ok and result.counts.by_method == {"GET": 1}
    assert {"CUSTOM_OPERATOR_GOLD", os_traits.COMPUTE_STATUS_DISABLED} <= \
        api.traits(root)
    assert "CUSTOM_OPERATOR_CELL" in api.traits(cell)
    assert host.root.traits <= api.traits(root)


def test_an_owned_trait_removed_by_others_comes_back(host, client, api):
    host.sync(client)
    root = host.root.uuid
    owned = os_traits.HW_CPU_HYPERTHREADING
    assert owned in host.root.traits
    api.remove_traits(root, owned)

    result = host.sync(client)

    assert result.ok
    assert owned in api.traits(root)
    outcome = result.get(root)
    assert outcome.traits_added == {owned}
    assert outcome.removed_by_others == {owned}
    assert result.counts.by_method == {"GET": 4, "PUT": 1}


def test_an_unsupported_owned_trait_added_by_others_is_removed(
        host, client, api):
    host.sync(client)
    root = host.root.uuid
    unsupported = os_traits.HW_CPU_X86_AVX512F
    assert host.driver.ownership.owns(unsupported)
    assert unsupported not in host.root.traits
    api.add_traits(root, unsupported, "CUSTOM_SOMEONES")

    result = host.sync(client)

    assert result.ok
    traits = api.traits(root)
    assert unsupported not in traits and "CUSTOM_SOMEONES" in traits
    assert result.get(root).added_by_others == {unsupported}
    assert result.get(root).traits_removed == {unsupported}


def test_a_provider_someone_else_put_under_our_root_is_left_alone(
        host, client, api):
    host.sync(client)
    other = "0d7d5f6c-8a0b-4d59-9a43-3f0c8b1e2a77"
    api.client.create_provider(other, "neutron-agent-bw", host.root.uuid)
    api.add_traits(other, "CUSTOM_VNIC_TYPE_NORMAL")

    for _ in range(2):
        host.update()
        result = host.sync(client)
        # Not even read: the steady listing holds only our marked ones.
        assert result.ok and result.counts.writes == 0
        assert result.counts.by_method == {"GET": 1}
    assert other in api.providers()
    assert api.traits(other) == {"CUSTOM_VNIC_TYPE_NORMAL"}


def test_aggregates_others_set_survive_and_ours_are_added(
        host, client, api):
    root = host.root.uuid
    ours, nova = ("8a4c2a6e-60f1-4a9e-9a3e-2c1d7a6b5e01",
                  "1f0e9d8c-7b6a-4a5f-8e4d-3c2b1a0f9e8d")
    host.tree.update_aggregates(root, [ours])
    host.sync(client)
    assert api.aggregates(root) == {ours, host.marker}
    api.set_aggregates(root, {ours, nova, host.marker})

    host.tree.update_aggregates(root, [])
    result = host.sync(client)

    # Ours (set by this process) leaves; Nova's host aggregate stays.
    assert result.ok and api.aggregates(root) == {nova, host.marker}
    assert result.get(root).aggregates_removed == {ours}


def test_dry_run_reports_and_writes_nothing(host, client, api):
    result = sync(host.tree, client, owned_for=host.owned,
                  state=SyncState(), dry_run=True)

    assert result.dry_run and result.changed
    assert {o.uuid for o in result.outcomes if o.created} == {
        p.uuid for p in host.tree.providers()}
    assert result.counts.writes == 0
    assert api.providers() == {}


def test_a_second_process_on_the_state_dir_waits_then_fails_clearly(
        host, client):
    """The sync holds the state directory's lock (the ledger's) from
    loading its state to saving it; another holder makes it wait."""
    held = threading.Event()
    release = threading.Event()

    def holder():
        with SyncStateFile(host.state_dir).locked():
            held.set()
            release.wait(10)

    thread = threading.Thread(target=holder)
    thread.start()
    try:
        held.wait(10)
        with pytest.raises(LockTimeout, match="locked"):
            sync_state_dir(host.tree, client, owned_for=host.owned,
                           state_dir=host.state_dir, lock_timeout=0.2)
    finally:
        release.set()
        thread.join()
    assert client.counts.total == 0


def test_an_empty_tree_with_no_state_sends_nothing(client):
    result = sync(ProviderTree(), client, owned_for=lambda uuid: None,
                  state=SyncState())
    assert result.ok and result.counts.total == 0
