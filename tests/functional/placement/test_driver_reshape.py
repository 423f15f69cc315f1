"""A driver's own reshape, Nova's round trip, against a real Placement.

The driver is written as Nova's are: no ownership, no root creation.
When its tree must change shape (inventory from the root to two child
providers, or back) it raises ``ReshapeNeeded``; the tracker reads the
allocations of every consumer of the node's providers from Placement,
calls again with them, and the sync sends the tree's inventories and the
moved allocations in one ``POST /reshaper``.  A reshape Placement
refuses leaves Placement as it was (and is sent again next cycle).
"""

from __future__ import annotations

import collections
import uuid as uuidlib

import os_resource_classes as orc
import pytest
from placement_helpers import Api

from virtdriver.drivers.base import ComputeDriver, ReshapeNeeded
from virtdriver.placement.allocations import PlacementAllocations
from virtdriver.placement.ownership import TrackerOwnership
from virtdriver.placement.reshape import ClaimsPlacement, DriverPlacement
from virtdriver.placement.sync import Syncer
from virtdriver.resource_tracker.tracker import ResourceTracker

NODE = "reshaper-node"
CELLS = (f"{NODE}_CELL0", f"{NODE}_CELL1")
PROJECT = "0b5fd6b1-5c0f-4d8e-9d0e-0a1b2c3d4e5f"
FLAT = {orc.VCPU: {"total": 8, "max_unit": 8},
        orc.MEMORY_MB: {"total": 4096, "max_unit": 4096},
        orc.DISK_GB: {"total": 100, "max_unit": 100}}
CELL = {orc.VCPU: {"total": 4, "max_unit": 4},
        orc.MEMORY_MB: {"total": 2048, "max_unit": 2048}}
MOVING = (orc.VCPU, orc.MEMORY_MB)


class ReshapingDriver(ComputeDriver):
    """Flat (everything on the root) or nested (CPUs and memory on two
    cells); switching moves inventory and, given them, allocations: to
    the first cell with room, or back to the root."""

    capabilities = {}

    def __init__(self) -> None:
        self.nested = False
        self.calls: list[bool] = []   # whether allocations were passed

    def init_host(self, host: str) -> None:
        return None

    def get_available_nodes(self, refresh: bool = False) -> list[str]:
        return [NODE]

    def update_provider_tree(self, tree, nodename, allocations=None):
        self.calls.append(allocations is not None)
        has_cells = tree.exists(CELLS[0])
        on_root = orc.VCPU in tree.data(nodename).inventory
        if (has_cells != self.nested or on_root == self.nested) and \
                allocations is None and (has_cells or on_root):
            raise ReshapeNeeded()
        root = tree.data(nodename).uuid
        if self.nested:
            uuids = [tree.data(c).uuid if tree.exists(c)
                     else tree.new_child(c, nodename) for c in CELLS]
            tree.update_inventory(nodename, {orc.DISK_GB: FLAT[orc.DISK_GB]})
            for cell in CELLS:
                tree.update_inventory(cell, CELL)
        else:
            uuids = [tree.data(c).uuid for c in CELLS if tree.exists(c)]
            tree.update_inventory(nodename, FLAT)
            for cell in CELLS:
                if tree.exists(cell):
                    tree.remove(cell)
        for consumer in (allocations or {}).values():
            self._move(consumer["allocations"], root, uuids)

    def _move(self, found: dict, root: str, cells: list[str]) -> None:
        if self.nested:   # the root's CPUs and memory onto one cell
            moved = {rc: found[root]["resources"].pop(rc)
                     for rc in MOVING if rc in found.get(root, {}).get(
                         "resources", {})}
            if moved:
                target = cells[len(found) % len(cells)]
                found[target] = {"resources": moved}
        else:             # every cell's back onto the root
            for cell in cells:
                for rc, n in found.pop(cell, {}).get("resources",
                                                     {}).items():
                    res = found.setdefault(root, {"resources": {}})
                    res["resources"][rc] = res["resources"].get(rc, 0) + n
        for rp in [rp for rp, entry in found.items()
                   if not entry["resources"]]:
            del found[rp]


class Agent:
    """What the agent keeps between cycles: driver, tracker, sync."""

    def __init__(self, state_dir, client) -> None:
        self.client = client
        self.driver = ReshapingDriver()
        self.tracker = ResourceTracker(
            self.driver, state_dir=state_dir,
            allocations=PlacementAllocations(lambda: client))
        self.owned = TrackerOwnership(self.tracker)
        self.syncer = Syncer(client, state_dir)
        self.sent: list[tuple[str, str]] = []
        request = client.request

        def recorded(method, path, **kwargs):
            self.sent.append((method, path))
            return request(method, path, **kwargs)

        client.request = recorded

    def cycle(self):
        self.sent.clear()
        self.owned.note(self.tracker.update_all())
        result = self.syncer.sync(
            self.tracker.tree, owned_for=self.owned, remove=self.owned.gone,
            placement_of=DriverPlacement(self.tracker.reshapes,
                                         ClaimsPlacement(self.tracker)))
        self.owned.synced(result)
        return result


def allocate(api: Api, consumer: str, allocations: dict) -> None:
    api.client.request("PUT", f"/allocations/{consumer}", body={
        "allocations": {rp: {"resources": res}
                        for rp, res in allocations.items()},
        "project_id": PROJECT, "user_id": PROJECT,
        "consumer_generation": None, "consumer_type": "INSTANCE"})


def allocations_of(api: Api, consumer: str) -> dict:
    body = api.client.request("GET", f"/allocations/{consumer}")
    return {rp: entry["resources"]
            for rp, entry in body["allocations"].items()}


@pytest.fixture
def agent(tmp_path, placement):
    return Agent(tmp_path / "state", placement.client())


def test_root_to_children_and_back_with_consumers_allocated(agent, api):
    assert agent.cycle().ok
    root = agent.tracker.tree.data(NODE).uuid
    consumers = [str(uuidlib.uuid4()) for _ in range(2)]
    allocate(api, consumers[0], {root: {"VCPU": 2, "MEMORY_MB": 512,
                                        "DISK_GB": 10}})
    allocate(api, consumers[1], {root: {"VCPU": 1, "MEMORY_MB": 256}})

    agent.driver.nested = True
    result = agent.cycle()
    assert result.ok, result
    assert agent.driver.calls[-2:] == [False, True]   # the round trip
    assert agent.sent.count(("POST", "/reshaper")) == 1
    forward = collections.Counter(m for m, _ in agent.sent)
    cells = [agent.tracker.tree.data(c).uuid for c in CELLS]
    first = allocations_of(api, consumers[0])
    assert first[root] == {"DISK_GB": 10}
    assert [first[c] for c in cells if c in first] == [
        {"VCPU": 2, "MEMORY_MB": 512}]
    second = allocations_of(api, consumers[1])
    assert list(second.values()) == [{"VCPU": 1, "MEMORY_MB": 256}]
    assert set(second) <= set(cells)
    assert set(api.inventories(root)) == {"DISK_GB"}
    assert agent.tracker.reshapes == {}   # sent: forgotten

    agent.driver.nested = False
    result = agent.cycle()
    assert result.ok, result
    assert agent.sent.count(("POST", "/reshaper")) == 1
    assert allocations_of(api, consumers[0]) == {
        root: {"VCPU": 2, "MEMORY_MB": 512, "DISK_GB": 10}}
    assert allocations_of(api, consumers[1]) == {
        root: {"VCPU": 1, "MEMORY_MB": 256}}
    assert set(api.providers()) == {root}
    back = collections.Counter(m for m, _ in agent.sent)
    # The steady state after: no reshape, no write.
    assert agent.cycle().ok and ("POST", "/reshaper") not in agent.sent
    print(f"\nreshape requests: root->cells {sum(forward.values())} "
          f"{dict(forward)}, cells->root {sum(back.values())} {dict(back)} "
          f"(each one POST /reshaper); then steady {len(agent.sent)}")


def test_a_refused_reshape_leaves_placement_as_it_was(agent, api):
    assert agent.cycle().ok
    root = agent.tracker.tree.data(NODE).uuid
    consumer = str(uuidlib.uuid4())
    allocate(api, consumer, {root: {"VCPU": 2, "MEMORY_MB": 512}})
    before = (api.providers().keys(), api.inventories(root),
              allocations_of(api, consumer))
    request = agent.client.request

    def refuse(method, path, **kwargs):
        if path == "/reshaper":
            from virtdriver.placement.errors import PlacementRequestError
            raise PlacementRequestError(
                "POST /reshaper: 400 refused (test)", method=method,
                path=path, status=400)
        return request(method, path, **kwargs)

    agent.client.request = refuse
    agent.driver.nested = True
    result = agent.cycle()
    assert not result.ok
    assert "reshape failed" in str(result.errors[0].error)
    assert (api.providers().keys(), api.inventories(root),
            allocations_of(api, consumer)) == before
    assert root in agent.tracker.reshapes   # kept for the next cycle

    agent.client.request = request
    assert agent.cycle().ok
    assert root not in allocations_of(api, consumer)
    assert sum(r["VCPU"] for r in allocations_of(api, consumer).values()) == 2
