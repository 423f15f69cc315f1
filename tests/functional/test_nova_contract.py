"""Drivers written as Nova's are, run by the real commands (issue 30).

The drivers here declare no ``ownership`` and no ``node_capabilities``,
never create their root (Nova's resource tracker does), set traits with
``add_traits``/``update_traits`` and raise ``HypervisorUnavailable``.
They are registered under the ``virtdriver.drivers`` entry point and run
through ``virtdriver sync`` (Placement embedded, on SQLite), ``report``,
``disable``/``enable`` and the agent's cycle.
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import pathlib
import uuid as uuidlib

import os_resource_classes as orc
import os_traits
import pytest
from stevedore.extension import ExtensionManager

from virtdriver import cli
from virtdriver.drivers.base import (
    ComputeDriver, HypervisorUnavailable, ProviderTreeLike)
from virtdriver.drivers.identity import root_uuid
from virtdriver.drivers.loader import NAMESPACE

NODE = "nova-node"
RACK = "CUSTOM_RACK_7"
VENDOR_PREFIX = "CUSTOM_DEV_VENDORID_"


class NovaStyleDriver(ComputeDriver):
    """Written to Nova's contract: no ownership, no node_capabilities, no
    root creation.  ``NOVASTYLE_VENDOR`` names the device vendor trait it
    adds (and it removes the one it added before); ``NOVASTYLE_DOWN``
    makes the hypervisor unreachable; ``NOVASTYLE_DROP`` makes it call
    ``update_traits`` without the traits it did not set."""

    capabilities = {"supports_multiattach": False}

    def init_host(self, host: str) -> None:
        self.host = host

    def get_available_nodes(self, refresh: bool = False) -> list[str]:
        return [NODE]

    def update_provider_tree(self, tree: ProviderTreeLike, nodename: str,
                             allocations=None) -> None:
        if os.environ.get("NOVASTYLE_DOWN"):
            raise HypervisorUnavailable(
                f"hypervisor of {nodename} does not answer; retried next "
                "cycle")
        tree.update_inventory(nodename, {
            orc.VCPU: {"total": 8, "max_unit": 8},
            orc.MEMORY_MB: {"total": 4096, "max_unit": 4096}})
        vendor = VENDOR_PREFIX + os.environ.get("NOVASTYLE_VENDOR", "10DE")
        traits = {t for t in tree.data(nodename).traits
                  if not t.startswith(VENDOR_PREFIX)}
        if os.environ.get("NOVASTYLE_DROP"):
            traits = {vendor}
        tree.update_traits(nodename, traits | {vendor})


class RootWithoutUuidDriver(NovaStyleDriver):
    """Creates its root as a porter would, having no compute node uuid;
    with ``ROOTLESS_RANDOM`` set, as before this tracker made roots: with
    a random uuid of its own."""

    def root_uuid_for(self, nodename):
        if os.environ.get("ROOTLESS_RANDOM"):
            return None   # the tracker makes no root: the driver does
        return super().root_uuid_for(nodename)

    def update_provider_tree(self, tree, nodename, allocations=None):
        if not tree.exists(nodename):
            tree.new_root(nodename, str(uuidlib.uuid4())
                          if os.environ.get("ROOTLESS_RANDOM") else None)
        super().update_provider_tree(tree, nodename, allocations)


@pytest.fixture
def drivers(monkeypatch, tmp_path):
    monkeypatch.setitem(ExtensionManager.ENTRY_POINT_CACHE, NAMESPACE, [
        importlib.metadata.EntryPoint(
            "novastyle", f"{__name__}:NovaStyleDriver", NAMESPACE),
        importlib.metadata.EntryPoint(
            "rootless", f"{__name__}:RootWithoutUuidDriver", NAMESPACE)])
    state = tmp_path / "state"
    monkeypatch.setenv("VIRTDRIVER_STATE_DIR", str(state))
    for name in ("NOVASTYLE_VENDOR", "NOVASTYLE_DOWN", "NOVASTYLE_DROP",
                 "ROOTLESS_RANDOM"):
        monkeypatch.delenv(name, raising=False)
    return state


def sync(capsys, driver="novastyle", *extra) -> tuple[int, dict, str]:
    status = cli.main(["sync", "--driver", driver, "--format", "json",
                       *extra])
    out = capsys.readouterr()
    return status, (json.loads(out.out) if out.out else {}), out.err


def placement_traits(state: pathlib.Path, uuid: str) -> set[str]:
    from virtdriver.placement.embedded import in_process_client
    client = in_process_client(state / "placement.sqlite")
    return set(client.request("GET", f"/resource_providers/{uuid}/traits")
               ["traits"])


def add_placement_trait(state: pathlib.Path, uuid: str, trait: str) -> None:
    from virtdriver.placement.embedded import in_process_client
    client = in_process_client(state / "placement.sqlite")
    body = client.request("GET", f"/resource_providers/{uuid}/traits")
    client.ensure_trait(trait) if trait.startswith("CUSTOM_") else None
    client.request("PUT", f"/resource_providers/{uuid}/traits", body={
        "traits": sorted(set(body["traits"]) | {trait}),
        "resource_provider_generation":
            body["resource_provider_generation"]})


def root_of(document: dict) -> dict:
    return next(p for p in document["tree"]["providers"]
                if p["name"] == NODE)


def test_a_root_made_with_new_root_none_is_ours_on_the_second_sync(
        drivers, capsys):
    """The issue's second-sync exit 2: a random uuid made the second run
    meet "another provider of that name"; the stable uuid makes it ours."""
    first, document, err = sync(capsys, "rootless")
    assert first == 0, err
    second, again, err = sync(capsys, "rootless")
    assert second == 0, err
    assert root_of(document)["uuid"] == root_of(again)["uuid"] == \
        root_uuid("compute-node", NODE)


def test_a_root_an_earlier_sync_made_with_a_random_uuid_stays_ours(
        drivers, capsys, monkeypatch):
    """A node synced before with a random root uuid (the sync state and
    the ledger list it): later runs keep that root, never "not ours"."""
    monkeypatch.setenv("ROOTLESS_RANDOM", "1")
    first, document, err = sync(capsys, "rootless")
    assert first == 0, err
    assert root_of(document)["uuid"] != root_uuid("compute-node", NODE)
    monkeypatch.delenv("ROOTLESS_RANDOM")
    for _ in range(2):
        status, again, err = sync(capsys, "rootless")
        assert status == 0, err
        assert root_of(again)["uuid"] == root_of(document)["uuid"]


def test_a_root_the_sync_state_names_but_the_ledger_does_not_is_not_adopted(
        drivers, capsys, monkeypatch):
    monkeypatch.setenv("ROOTLESS_RANDOM", "1")
    assert sync(capsys, "rootless")[0] == 0
    monkeypatch.delenv("ROOTLESS_RANDOM")
    (drivers / "ledger-rootless.json").unlink()
    status, _, err = sync(capsys, "rootless")
    assert status == 2   # less, never more: that root is left alone
    assert "not ours" in err


def test_the_tracker_creates_the_root_with_a_stable_uuid_and_compute_node(
        drivers, capsys):
    status, document, err = sync(capsys)
    assert status == 0, err
    root = root_of(document)
    assert root["uuid"] == root_uuid("compute-node", NODE)
    assert os_traits.COMPUTE_NODE in root["traits"]
    assert placement_traits(drivers, root["uuid"]) >= {
        os_traits.COMPUTE_NODE, VENDOR_PREFIX + "10DE"}


def test_a_trait_the_driver_set_goes_when_it_stops_and_foreign_ones_stay(
        drivers, capsys, monkeypatch):
    assert sync(capsys)[0] == 0
    uuid = root_uuid("compute-node", NODE)
    add_placement_trait(drivers, uuid, RACK)
    monkeypatch.setenv("NOVASTYLE_VENDOR", "8086")
    status, _, err = sync(capsys)
    assert status == 0, err
    traits = placement_traits(drivers, uuid)
    assert VENDOR_PREFIX + "8086" in traits
    assert VENDOR_PREFIX + "10DE" not in traits   # its own: removed
    assert RACK in traits                          # never its: kept


def test_a_driver_removing_what_it_did_not_set_is_undone(
        drivers, capsys, monkeypatch):
    """In one process (the agent's tree) the driver removes COMPUTE_NODE
    and an operator's trait with update_traits: both are put back."""
    from virtdriver.drivers.loader import load_driver
    from virtdriver.resource_tracker.tracker import ResourceTracker

    driver = load_driver("novastyle")
    driver.init_host("h")
    tracker = ResourceTracker(driver, state_dir=drivers)
    tracker.update_all()
    tracker.tree.add_traits(NODE, RACK)
    monkeypatch.setenv("NOVASTYLE_DROP", "1")
    monkeypatch.setenv("NOVASTYLE_VENDOR", "1AF4")
    tracker.update_all()
    assert tracker.tree.data(NODE).traits == {
        RACK, os_traits.COMPUTE_NODE, VENDOR_PREFIX + "1AF4"}


@pytest.mark.parametrize("bad_luck", ["lost", "edited", "key lost"])
def test_a_lost_or_edited_ledger_removes_nothing(
        drivers, capsys, monkeypatch, bad_luck):
    assert sync(capsys)[0] == 0
    uuid = root_uuid("compute-node", NODE)
    add_placement_trait(drivers, uuid, RACK)
    ledger = drivers / "ledger-novastyle.json"
    if bad_luck == "lost":
        ledger.unlink()
    elif bad_luck == "edited":   # claims the operator's trait as its own
        document = json.loads(ledger.read_text())
        document["providers"][uuid].append(RACK)
        ledger.write_text(json.dumps(document))
    else:
        (drivers / "ledger.key").unlink()
    monkeypatch.setenv("NOVASTYLE_VENDOR", "8086")
    monkeypatch.setenv("NOVASTYLE_DROP", "1")   # it asks to drop RACK
    status, _, err = sync(capsys)
    assert status == 0, err
    traits = placement_traits(drivers, uuid)
    assert RACK in traits
    # It cannot prove it set 10DE any more: kept, not removed.
    assert VENDOR_PREFIX + "10DE" in traits
    assert VENDOR_PREFIX + "8086" in traits


def test_an_unavailable_hypervisor_exits_3_and_changes_nothing(
        drivers, capsys, monkeypatch):
    status, document, _ = sync(capsys)
    assert status == 0
    uuid = root_uuid("compute-node", NODE)
    before = placement_traits(drivers, uuid)
    ledger = (drivers / "ledger-novastyle.json").read_bytes()
    monkeypatch.setenv("NOVASTYLE_DOWN", "1")
    status, _, err = sync(capsys)
    assert status == 3, err
    line = err.splitlines()[-1]
    assert line.startswith("virtdriver: ") and "does not answer" in line
    assert "Traceback" not in err
    assert placement_traits(drivers, uuid) == before
    assert (drivers / "ledger-novastyle.json").read_bytes() == ledger


def test_disable_and_enable_through_the_commands(drivers, capsys):
    uuid = root_uuid("compute-node", NODE)
    assert cli.main(["disable", NODE, "--driver", "novastyle",
                     "--reason", "RAM errors"]) == 0
    assert "RAM errors" in capsys.readouterr().out
    for _ in range(2):   # kept across runs (each a new process's tracker)
        assert sync(capsys)[0] == 0
        assert os_traits.COMPUTE_STATUS_DISABLED in placement_traits(
            drivers, uuid)
    assert cli.main(["report", "--driver", "novastyle"]) == 0
    report = capsys.readouterr().out
    assert f"node {NODE}: disabled since" in report
    assert "reason: RAM errors" in report
    assert os_traits.COMPUTE_STATUS_DISABLED in report
    assert cli.main(["enable", NODE, "--driver", "novastyle"]) == 0
    capsys.readouterr()
    assert sync(capsys)[0] == 0
    assert os_traits.COMPUTE_STATUS_DISABLED not in placement_traits(
        drivers, uuid)


def test_enable_never_removes_a_disabled_trait_someone_else_set(
        drivers, capsys):
    assert sync(capsys)[0] == 0
    uuid = root_uuid("compute-node", NODE)
    add_placement_trait(drivers, uuid, os_traits.COMPUTE_STATUS_DISABLED)
    assert cli.main(["enable", NODE, "--driver", "novastyle"]) == 0
    assert "not disabled" in capsys.readouterr().out
    assert sync(capsys)[0] == 0
    assert os_traits.COMPUTE_STATUS_DISABLED in placement_traits(
        drivers, uuid)


def test_disable_refuses_a_node_the_driver_does_not_have(drivers, capsys):
    assert cli.main(["disable", "nope", "--driver", "novastyle"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("virtdriver: disable nope: not a node")
    assert NODE in err
    assert not (drivers / "disabled-novastyle.json").exists()


def test_completion_knows_disable_and_enable(capsys):
    assert cli.main(["completion", "bash"]) == 0
    script = capsys.readouterr().out
    assert "disable" in script and "enable" in script
    assert "--reason" in script


def test_explain_says_why_a_node_is_disabled(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("VIRTDRIVER_STATE_DIR", str(tmp_path / "state"))
    fake = ["--driver", "fake", "--host-spec", "numa2-ht"]
    assert cli.main(["disable", "fake-numa2-ht", "--reason",
                     "firmware update", *fake]) == 0
    capsys.readouterr()
    assert cli.main(["explain", os_traits.HW_NUMA_ROOT, *fake]) == 0
    out = capsys.readouterr().out
    assert "node fake-numa2-ht: disabled since" in out
    assert "reason: firmware update" in out
    assert cli.main(["enable", "fake-numa2-ht", *fake]) == 0
    capsys.readouterr()
    assert cli.main(["explain", os_traits.HW_NUMA_ROOT, *fake]) == 0
    assert "disabled" not in capsys.readouterr().out


def test_a_release_a_sync_did_not_send_is_sent_by_the_next(
        drivers, capsys, monkeypatch):
    """The driver stops setting a trait, and that run's sync sends
    nothing (--dry-run; a Placement down is the same): the ledger keeps
    the trait as the driver's, so the next sync still removes it."""
    assert sync(capsys)[0] == 0
    uuid = root_uuid("compute-node", NODE)
    assert cli.main(["disable", NODE, "--driver", "novastyle"]) == 0
    capsys.readouterr()
    assert sync(capsys)[0] == 0
    assert cli.main(["enable", NODE, "--driver", "novastyle"]) == 0
    capsys.readouterr()
    monkeypatch.setenv("NOVASTYLE_VENDOR", "8086")
    assert sync(capsys, "novastyle", "--dry-run")[0] == 0
    traits = placement_traits(drivers, uuid)
    assert {VENDOR_PREFIX + "10DE", os_traits.COMPUTE_STATUS_DISABLED} <= \
        traits
    assert sync(capsys)[0] == 0
    traits = placement_traits(drivers, uuid)
    assert VENDOR_PREFIX + "10DE" not in traits
    assert os_traits.COMPUTE_STATUS_DISABLED not in traits
    assert VENDOR_PREFIX + "8086" in traits
    ledger = json.loads((drivers / "ledger-novastyle.json").read_text())
    assert VENDOR_PREFIX + "10DE" not in ledger["providers"][uuid]
