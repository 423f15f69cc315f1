"""A claim that takes the scheduler's allocation: pinned within exactly
the cells it names, or refused with the reason, changing nothing.  The
fake driver's numa2-ht host (2 cells, 8 cores x 2 threads each, every CPU
dedicated) through the real ResourceTracker."""

from __future__ import annotations

import json
import uuid as uuidlib

import os_resource_classes as orc
import pytest

from virtdriver import cli
from virtdriver.claims.allocation import AllocationRefused
from virtdriver.claims.model import Flavor, Instance
from virtdriver.conf import make_conf
from virtdriver.drivers.fake import FakeDriver
from virtdriver.resource_tracker.tracker import ResourceTracker

NODE = "fake-numa2-ht"


def tracker(state) -> ResourceTracker:
    conf = make_conf([])
    conf.set_override("cpu_dedicated_set", "0-31", group="compute")
    driver = FakeDriver("numa2-ht", conf=conf)
    driver.init_host("compute-1")
    made = ResourceTracker(driver, state_dir=state)
    made.update_all()
    return made


def cell(t, cell_id) -> str:
    return t.tree.data(f"{NODE}_NUMA{cell_id}").uuid


def instance(vcpus=4, memory=2048, **specs) -> Instance:
    return Instance(str(uuidlib.uuid4()), Flavor(vcpus, memory, {
        "hw:cpu_policy": "dedicated", **specs}))


def state_of(t) -> tuple:
    return (t.claims_path.read_bytes() if t.claims_path.exists() else None,
            [(p.uuid, p.generation) for p in t.tree.providers()])


def test_the_claim_pins_within_the_cell_the_allocation_names(tmp_path):
    t = tracker(tmp_path)
    for cell_id in (1, 0):
        vm = instance()
        found = t.instance_claim(vm, NODE, allocations={
            cell(t, cell_id): {orc.PCPU: 4, orc.MEMORY_MB: 2048}})
        assert [c.host_cell for c in found.cells] == [cell_id]


def test_two_guest_nodes_follow_the_cells_by_their_amounts(tmp_path):
    t = tracker(tmp_path)
    vm = instance(6, 3072, **{
        "hw:numa_nodes": "2", "hw:numa_cpus.0": "0-3",
        "hw:numa_mem.0": "2048", "hw:numa_cpus.1": "4-5",
        "hw:numa_mem.1": "1024"})
    found = t.instance_claim(vm, NODE, allocations={
        cell(t, 0): {orc.PCPU: 2, orc.MEMORY_MB: 1024},
        cell(t, 1): {orc.PCPU: 4, orc.MEMORY_MB: 2048}})
    assert {c.guest_cell: c.host_cell for c in found.cells} == {0: 1, 1: 0}


@pytest.mark.parametrize("allocation, words", [
    ({0: {orc.PCPU: 2, orc.MEMORY_MB: 1024},
      1: {orc.PCPU: 2, orc.MEMORY_MB: 1024}},
     ["uses 2 cell(s)", "1 guest node(s)"]),
    ({0: {orc.PCPU: 3, orc.MEMORY_MB: 2048}},
     ["cell 0's allocation MEMORY_MB:2048,PCPU:3", "PCPU:4"]),
    ({"root": {orc.PCPU: 4, orc.MEMORY_MB: 2048}},
     ["compute node (root)"]),
], ids=["two cells for one node", "wrong amounts", "on the root"])
def test_an_allocation_that_is_not_this_instance_is_refused(
        tmp_path, allocation, words):
    t = tracker(tmp_path)
    before = state_of(t)
    allocations = {(t.tree.data(NODE).uuid if k == "root" else cell(t, k)): v
                   for k, v in allocation.items()}
    with pytest.raises(AllocationRefused) as refused:
        t.instance_claim(instance(), NODE, allocations=allocations)
    assert all(w in str(refused.value) for w in words), str(refused.value)
    assert state_of(t) == before


def test_a_cell_without_sibling_pairs_is_refused_naming_the_case(tmp_path):
    """Cell 0 keeps 4 free PCPUs, one thread of each of 4 cores: PCPU:4
    fits Placement's count, not thread policy require."""
    t = tracker(tmp_path)
    # Four 1-vCPU instances take one thread of 4 cores (prefer packs
    # them... so pin 3-vCPU instances: each takes a whole core and one
    # thread of the next), then whole cores go to an 8-vCPU instance.
    for _ in range(4):
        t.instance_claim(instance(3, 256), NODE, allocations={
            cell(t, 0): {orc.PCPU: 3, orc.MEMORY_MB: 256}})
    vm = instance(2, 1024, **{"hw:cpu_thread_policy": "require"})
    before = state_of(t)
    with pytest.raises(AllocationRefused) as refused:
        t.instance_claim(vm, NODE, allocations={
            cell(t, 0): {orc.PCPU: 2, orc.MEMORY_MB: 1024}})
    message = str(refused.value)
    assert "within the allocated cells 0" in message
    assert "thread-policy-require" in message and \
        refused.value.cases == ("thread-policy-require",)
    assert state_of(t) == before
    # The same request lands fine where the allocation says cell 1.
    assert t.instance_claim(vm, NODE, allocations={
        cell(t, 1): {orc.PCPU: 2, orc.MEMORY_MB: 1024}}).cells[0].host_cell \
        == 1


def test_without_an_allocation_the_claim_is_as_before(tmp_path):
    t = tracker(tmp_path)
    found = t.instance_claim(instance(), NODE)
    assert len(found.cells) == 1


def test_the_claim_command_takes_an_allocations_document(tmp_path, capsys,
                                                         monkeypatch):
    monkeypatch.setenv("VIRTDRIVER_STATE_DIR", str(tmp_path / "state"))
    conf = tmp_path / "virtdriver.conf"
    conf.write_text("[compute]\ncpu_dedicated_set = 0-31\n")
    host = ["--driver", "fake", "--host-spec", "numa2-ht",
            "--config-file", str(conf), "--format", "json"]
    t = tracker(tmp_path / "probe")   # the same host: the same uuids
    vm = {"uuid": str(uuidlib.uuid4()),
          "flavor": {"vcpus": 4, "memory_mb": 2048,
                     "extra_specs": {"hw:cpu_policy": "dedicated"}}}
    (tmp_path / "vm.json").write_text(json.dumps(vm))
    (tmp_path / "alloc.json").write_text(json.dumps({"allocations": {
        cell(t, 1): {"resources": {"PCPU": 4, "MEMORY_MB": 2048}}},
        "consumer_generation": 1}))
    assert cli.main(["claim", "--instance", str(tmp_path / "vm.json"),
                     "--allocations", str(tmp_path / "alloc.json"),
                     *host]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert [c["host_cell"] for c in shown["claim"]["cells"]] == [1], shown
    (tmp_path / "alloc.json").write_text(json.dumps({"allocations": {
        cell(t, 0): {"resources": {"PCPU": 3, "MEMORY_MB": 2048}}}}))
    vm["uuid"] = str(uuidlib.uuid4())
    (tmp_path / "vm.json").write_text(json.dumps(vm))
    assert cli.main(["claim", "--instance", str(tmp_path / "vm.json"),
                     "--allocations", str(tmp_path / "alloc.json"),
                     *host]) == 1
    assert "no guest node's request" in capsys.readouterr().err
