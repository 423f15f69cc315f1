"""The reshaper against a real Placement: inventory that must move while
allocations exist (flat <-> nested, VCPU -> PCPU) moves in one POST
/reshaper, each consumer to where its claim says; a consumer whose
destination is not known refuses the whole tree and nothing changes.

The hosts are the fake driver's numa2-ht (2 cells, 16 CPUs and 32 GiB
each; cell 0 carries the host's memory reservation, so the first claim
lands on cell 1) through the real ResourceTracker, synced with a
Syncer as an agent does, restarted (a new tracker on the same state
directory) to change its shape.
"""

from __future__ import annotations

import uuid as uuidlib
from types import MappingProxyType

import os_resource_classes as orc
import pytest
from placement_helpers import Host, assert_placement_equals

from virtdriver.claims.model import Flavor, Instance
from virtdriver.conf import make_conf
from virtdriver.drivers.fake import FakeDriver
from virtdriver.drivers.fake_host import PRESETS
from virtdriver.placement.reshape import ClaimsPlacement
from virtdriver.placement.reshape_plan import (
    ConsumerNow, Current, ProviderNow, Refusal, ReshapePlan, plan_reshape)
from virtdriver.providers.inventory import Inventory
from virtdriver.providers.record import ProviderData

SHARED = {"hw:numa_nodes": "1"}
PINNED = {"hw:cpu_policy": "dedicated"}
PAGES = "CUSTOM_MEM_PAGE_SIZE_2048"


def driver(nested: bool = True, dedicated: str | None = None,
           host="numa2-ht") -> FakeDriver:
    conf = make_conf([])
    if dedicated is not None:
        conf.set_override("cpu_dedicated_set", dedicated, group="compute")
    return FakeDriver(host, conf=conf, nested=nested)


def restart(host: Host, **kwargs) -> Host:
    """The agent restarted with other options, on the same state dir."""
    return Host(host.state_dir, driver(**kwargs))


def claim(host: Host, consumer: str, vcpus: int, memory_mb: int,
          specs: dict) -> list[int]:
    """Claim ``consumer`` on the host; the host cells it landed on."""
    fit = host.tracker.instance_claim(
        Instance(consumer, Flavor(vcpus, memory_mb, specs)), host.root.name)
    return [cell.host_cell for cell in fit.cells]


class Recorder:
    """Every request a client sends, as (method, path), then sent."""

    def __init__(self, client, before=None) -> None:
        self.calls: list[tuple[str, str]] = []
        self.before = before
        self._request = client.request
        client.request = self.request

    def request(self, method, path, **kwargs):
        self.calls.append((method, path))
        if self.before is not None:
            self.before(method, path)
        return self._request(method, path, **kwargs)

    def count(self, method: str, path: str) -> int:
        return self.calls.count((method, path))


def allocations(api, consumer: str) -> dict:
    return api.client.request("GET", f"/allocations/{consumer}")


def resources(api, consumer: str) -> dict[str, dict[str, int]]:
    return {rp: entry["resources"] for rp, entry
            in allocations(api, consumer)["allocations"].items()}


def everything(api) -> dict:
    """Placement's providers (generations included), inventories,
    traits and allocations, and every consumer's record."""
    found = {}
    for uuid, provider in sorted(api.providers().items()):
        allocated = api.client.request(
            "GET", f"/resource_providers/{uuid}/allocations")
        found[uuid] = (provider, api.inventories(uuid), api.traits(uuid),
                       allocated)
    consumers = {c for _, _, _, allocated in found.values()
                 for c in allocated["allocations"]}
    return {"providers": found,
            "consumers": {c: allocations(api, c) for c in sorted(consumers)}}


# -- flat <-> nested ----------------------------------------------------------

def test_flat_to_nested_moves_the_allocation_to_its_claimed_cell(
        host_flat, client, api):
    root = host_flat.root.uuid
    consumer = api.allocate(root, {"VCPU": 2, "MEMORY_MB": 1024})
    before = allocations(api, consumer)
    nested = restart(host_flat)
    assert claim(nested, consumer, 2, 1024, SHARED) == [1]
    cell1 = nested.uuid(f"{nested.root.name}_NUMA1")
    sent = Recorder(client)

    result = nested.sync(client, placement_of=ClaimsPlacement(
        nested.tracker))

    assert result.ok, result.describe()
    assert sent.count("POST", "/reshaper") == 1
    assert resources(api, consumer) == {
        cell1: {"VCPU": 2, "MEMORY_MB": 1024}}
    after = allocations(api, consumer)
    assert after["consumer_generation"] == before["consumer_generation"] + 1
    for key in ("project_id", "user_id", "consumer_type"):
        assert after[key] == before[key]
    assert api.inventories(root) == {}
    assert_placement_equals(api, nested.tree)
    assert any(consumer in note and "POST /reshaper" in note
               for note in result.notes)
    assert set(result.get(root).inventory) == {"VCPU", "MEMORY_MB", PAGES}
    # Afterwards the economy holds: one read, no write.
    again = nested.sync(client, placement_of=ClaimsPlacement(nested.tracker))
    assert again.counts.by_method == {"GET": 1}


def test_nested_to_flat_moves_every_allocation_to_the_root(host, client,
                                                           api):
    assert host.sync(client).ok
    node = host.root.name
    cells = [host.uuid(f"{node}_NUMA{i}") for i in (0, 1)]
    on_cell1 = api.allocate(cells[1], {"VCPU": 2, PAGES: 512})
    on_cell0 = api.allocate(cells[0], {"VCPU": 1, "MEMORY_MB": 512})
    flat = restart(host, nested=False)
    root = flat.root.uuid
    sent = Recorder(client)

    # No claims needed: the root is the only provider left to offer it.
    result = flat.sync(client)

    assert result.ok, result.describe()
    assert sent.count("POST", "/reshaper") == 1
    assert resources(api, on_cell1) == {root: {"VCPU": 2, PAGES: 512}}
    assert resources(api, on_cell0) == {root: {"VCPU": 1, "MEMORY_MB": 512}}
    assert set(api.providers()) == {root}
    assert {o.uuid for o in result.outcomes if o.deleted} == set(cells)
    assert_placement_equals(api, flat.tree)
    assert flat.sync(client).counts.by_method == {"GET": 1}


@pytest.mark.parametrize("nested", [True, False], ids=["nested", "flat"])
def test_vcpu_becomes_pcpu_when_a_dedicated_set_is_configured(
        tmp_path, client, api, nested):
    shared = Host(tmp_path / "state", driver(nested=nested))
    assert shared.sync(client).ok
    node = shared.root.name
    target = shared.uuid(f"{node}_NUMA1") if nested else shared.root.uuid
    consumer = api.allocate(target, {"VCPU": 4, "MEMORY_MB": 2048})
    pinned = restart(shared, nested=nested, dedicated="0-31")
    assert claim(pinned, consumer, 4, 2048, PINNED) == [1]
    sent = Recorder(client)

    result = pinned.sync(client, placement_of=ClaimsPlacement(
        pinned.tracker))

    assert result.ok, result.describe()
    assert sent.count("POST", "/reshaper") == 1
    assert resources(api, consumer) == {target: {"PCPU": 4,
                                                 "MEMORY_MB": 2048}}
    for uuid in api.providers():
        assert "VCPU" not in api.inventories(uuid)
    assert api.inventories(target)["PCPU"]["total"] == (16 if nested else 32)
    assert_placement_equals(api, pinned.tree)


# -- refusals -----------------------------------------------------------------

def test_a_consumer_nothing_places_is_refused_and_nothing_changes(
        host_flat, client, api):
    root = host_flat.root.uuid
    claimed = api.allocate(root, {"VCPU": 2, "MEMORY_MB": 1024})
    unknown = api.allocate(root, {"VCPU": 1, "MEMORY_MB": 256})
    nested = restart(host_flat)
    claim(nested, claimed, 2, 1024, SHARED)
    before = everything(api)
    sent = Recorder(client)

    result = nested.sync(client, placement_of=ClaimsPlacement(
        nested.tracker))

    assert not result.ok
    assert result.counts.writes == 0
    assert sent.count("POST", "/reshaper") == 0
    assert everything(api) == before
    error = result.get(root).error
    assert unknown in error and claimed not in error
    assert "inventory in use" in error and "VCPU" in error
    assert root in error and repr(nested.root.name) in error
    assert "nothing in this tree was changed" in error
    assert [o.uuid for o in result.errors] == [root]

    # Once the instance is claimed, the next sync moves both.
    cells = claim(nested, unknown, 1, 256, SHARED)
    result = nested.sync(client, placement_of=ClaimsPlacement(
        nested.tracker))
    assert result.ok, result.describe()
    target = nested.uuid(f"{nested.root.name}_NUMA{cells[0]}")
    assert resources(api, unknown) == {target: {"VCPU": 1,
                                                "MEMORY_MB": 256}}
    assert api.inventories(root) == {}


def test_without_claims_a_split_across_two_cells_is_refused(host_flat,
                                                            client, api):
    consumer = api.allocate(host_flat.root.uuid, {"VCPU": 2})
    before = everything(api)
    nested = restart(host_flat)

    result = nested.sync(client)   # no placement_of: nothing says where

    assert everything(api) == before
    error = result.get(host_flat.root.uuid).error
    assert consumer in error
    assert "_NUMA0' or '" in error and "_NUMA1'" in error


def test_an_unforeseen_inventory_in_use_is_reported_then_reshaped(
        tmp_path, client, api):
    """A new state directory knows nothing of the VCPU inventory, so the
    write meets Placement's 409 first: reported naming the provider and
    the class; the next sync reshapes.  (A host without huge pages: with
    them, a provider without a record is read before the write — memory
    may be held twice there — and the reshape comes at once.)"""
    no_pages = {**PRESETS["numa2-ht"], "pages_per_cell": {}}
    first = Host(tmp_path / "one", driver(host=no_pages))
    assert first.sync(client).ok
    cell1 = first.uuid(f"{first.root.name}_NUMA1")
    consumer = api.allocate(cell1, {"VCPU": 2, "MEMORY_MB": 1024})
    fresh = Host(tmp_path / "two", driver(dedicated="0-31", host=no_pages))
    assert claim(fresh, consumer, 2, 1024, PINNED) == [1]
    placement_of = ClaimsPlacement(fresh.tracker)

    result = fresh.sync(client, placement_of=placement_of)

    error = result.get(cell1).error
    assert error.startswith("inventory in use: Placement refused to remove "
                            "VCPU from provider 'fake-numa2-ht_NUMA1' "
                            f"({cell1})")
    assert resources(api, consumer) == {cell1: {"VCPU": 2,
                                                "MEMORY_MB": 1024}}
    result = fresh.sync(client, placement_of=placement_of)
    assert result.ok, result.describe()
    assert resources(api, consumer) == {cell1: {"PCPU": 2,
                                                "MEMORY_MB": 1024}}
    assert "VCPU" not in api.inventories(cell1)


def test_a_generation_conflict_on_the_reshaper_is_planned_again(
        host_flat, client, api):
    root = host_flat.root.uuid
    consumer = api.allocate(root, {"VCPU": 2, "MEMORY_MB": 1024})
    nested = restart(host_flat)
    claim(nested, consumer, 2, 1024, SHARED)

    def other_writer(method, path):
        if (method, path) == ("POST", "/reshaper") and \
                sent.count(method, path) == 1:
            api.add_traits(root, "CUSTOM_OTHERS")

    sent = Recorder(client, other_writer)
    result = nested.sync(client, placement_of=ClaimsPlacement(
        nested.tracker), sleep=lambda _: None)

    assert result.ok, result.describe()
    assert sent.count("POST", "/reshaper") == 2
    assert result.conflicts >= 1
    assert "CUSTOM_OTHERS" in api.traits(root)
    assert resources(api, consumer) == {
        nested.uuid(f"{nested.root.name}_NUMA1"): {"VCPU": 2,
                                                   "MEMORY_MB": 1024}}


def test_a_dry_run_plans_the_reshape_and_sends_no_write(host_flat, client,
                                                        api):
    consumer = api.allocate(host_flat.root.uuid, {"VCPU": 2,
                                                  "MEMORY_MB": 1024})
    nested = restart(host_flat)
    claim(nested, consumer, 2, 1024, SHARED)
    before = everything(api)

    result = nested.sync(client, dry_run=True,
                         placement_of=ClaimsPlacement(nested.tracker))

    assert result.counts.writes == 0
    assert everything(api) == before
    assert any(note.startswith("dry run: the tree of") and consumer in note
               for note in result.notes)


@pytest.fixture
def host_flat(tmp_path, client) -> Host:
    """numa2-ht in flat mode, synced."""
    host = Host(tmp_path / "state", driver(nested=False))
    assert host.sync(client).ok
    return host


# -- the planner alone --------------------------------------------------------

ROOT, CELL0, CELL1 = (str(uuidlib.UUID(int=n)) for n in (1, 2, 3))
C = str(uuidlib.UUID(int=9))


def inventory(**totals) -> MappingProxyType:
    return MappingProxyType({rc: Inventory(total) for rc, total
                             in totals.items()})


def desired_nested(**cell) -> list[ProviderData]:
    cell = cell or {"VCPU": 8, "MEMORY_MB": 4096}
    return [ProviderData(ROOT, "cn", None, None, ROOT,
                         inventory(DISK_GB=100)),
            ProviderData(CELL0, "cn_NUMA0", None, ROOT, ROOT,
                         inventory(**cell)),
            ProviderData(CELL1, "cn_NUMA1", None, ROOT, ROOT,
                         inventory(**cell))]


def flat_now(used: dict[str, int], consumer_type="INSTANCE") -> Current:
    root = ProviderNow(ROOT, "cn", ROOT, 5, inventory(
        VCPU=16, MEMORY_MB=8192, DISK_GB=100), {C: used})
    record = ConsumerNow(C, 1, "p", "u", consumer_type, {ROOT: used})
    return Current({ROOT: root}, {C: record})


def test_plan_moves_claimed_classes_and_keeps_the_rest_where_offered():
    current = flat_now({"VCPU": 2, "MEMORY_MB": 1024, "DISK_GB": 10})
    plan = plan_reshape(current, desired_nested(),
                        {C: {CELL1: {"VCPU": 2, "MEMORY_MB": 1024}}}.get)

    assert isinstance(plan, ReshapePlan)
    assert plan.in_use == {ROOT: ("MEMORY_MB", "VCPU")}
    assert [uuid for uuid, _, _ in plan.create] == [CELL0, CELL1]
    body = plan.body({CELL0: 0, CELL1: 0})
    assert body["allocations"][C] == {
        "allocations": {ROOT: {"resources": {"DISK_GB": 10}},
                        CELL1: {"resources": {"VCPU": 2,
                                              "MEMORY_MB": 1024}}},
        "project_id": "p", "user_id": "u", "consumer_generation": 1,
        "consumer_type": "INSTANCE"}
    assert body["inventories"][ROOT]["resource_provider_generation"] == 5
    assert set(body["inventories"][ROOT]["inventories"]) == {"DISK_GB"}
    with pytest.raises(ValueError):
        plan.body()   # the cells' generations are not known yet


@pytest.mark.parametrize("answer, why", [
    ({CELL1: {"VCPU": 4, "MEMORY_MB": 1024}},
     "its claim accounts for CPU (VCPU + PCPU) 4, MEMORY_MB 1024 but "
     "Placement allocates CPU (VCPU + PCPU) 2, MEMORY_MB 1024"),
    ({CELL1: {"PCPU": 2, "MEMORY_MB": 1024}},
     "its PCPU 2 on 'cn_NUMA1' would be on a provider that will not "
     "offer it"),
    ({CELL1: {"VCPU": 2, "MEMORY_MB": 1024, "DISK_GB": 1}},
     "its claim names DISK_GB"),
    ({str(uuidlib.UUID(int=77)): {"VCPU": 2, "MEMORY_MB": 1024}},
     "not in the tree"),
])
def test_plan_refuses_a_claim_that_does_not_hold(answer, why):
    refused = plan_reshape(flat_now({"VCPU": 2, "MEMORY_MB": 1024}),
                           desired_nested(), {C: answer}.get)
    assert isinstance(refused, Refusal)
    assert why in refused.consumers[C]
    assert C in refused.message(ROOT) and "VCPU" in refused.message(ROOT)


def test_plan_refuses_what_would_not_fit_and_untyped_consumers():
    answer = {C: {CELL1: {"VCPU": 2, "MEMORY_MB": 1024}}}.get
    small = plan_reshape(flat_now({"VCPU": 2, "MEMORY_MB": 1024}),
                         desired_nested(VCPU=1, MEMORY_MB=4096), answer)
    assert "would not fit: 2 used of a capacity of 1" in \
        small.consumers[C]
    untyped = plan_reshape(flat_now({"VCPU": 2, "MEMORY_MB": 1024},
                                    consumer_type="unknown"),
                           desired_nested(), answer)
    assert "no consumer type" in untyped.consumers[C]
    below = plan_reshape(flat_now({"VCPU": 2, "MEMORY_MB": 1024},
                                  consumer_type=None),
                         desired_nested(), answer, consumer_types=False)
    assert "consumer_type" not in below.body(
        {CELL0: 0, CELL1: 0})["allocations"][C]


def test_plan_is_none_when_no_allocation_stands_in_the_way():
    # Only DISK_GB is used, and the root keeps it.
    assert plan_reshape(flat_now({"DISK_GB": 10}), desired_nested()) is None


def test_plan_without_a_claim_refuses_vcpu_no_provider_offers():
    current = flat_now({orc.VCPU: 2})
    refused = plan_reshape(current, desired_nested(PCPU=8))
    assert "no provider of the tree will offer it" in refused.consumers[C]
