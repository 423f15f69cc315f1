"""The granular request against a real Placement holding our NUMA tree."""

from __future__ import annotations

import json
import uuid as uuidlib

import os_resource_classes as orc
import pytest
from placement_helpers import Host

from virtdriver import cli
from virtdriver.claims.model import Flavor
from virtdriver.claims.placement_request import placement_request
from virtdriver.conf.options import make_conf
from virtdriver.drivers.fake import FakeDriver
from virtdriver.placement.candidates import allocation_candidates


def numa_host(tmp_path, preset="numa2-ht", dedicated="0-31") -> Host:
    conf = make_conf([])
    conf.set_override("cpu_dedicated_set", dedicated, group="compute")
    return Host(tmp_path / "state", FakeDriver(preset, conf=conf))


@pytest.fixture
def synced(tmp_path, client):
    host = numa_host(tmp_path)
    host.sync(client)
    return host


def cells(host):
    root = host.root.name
    return {host.uuid(f"{root}_NUMA{i}"): i for i in (0, 1)}


def test_two_guest_nodes_land_on_two_cells_each_whole(synced, client):
    request = placement_request(
        Flavor(8, 4096, {"hw:numa_nodes": "2", "hw:cpu_policy": "dedicated",
                         "hw:mem_page_size": "2048"}), {})
    body = allocation_candidates(client, request)
    by_cell = cells(synced)
    assert body["allocation_requests"]
    for candidate in body["allocation_requests"]:
        one, two = (candidate["mappings"][s][0] for s in ("1", "2"))
        assert {one, two} == set(by_cell)     # isolate: a cell each
        for uuid in by_cell:
            resources = candidate["allocations"][uuid]["resources"]
            # 2 GiB of 2 MiB pages: the pages alone, no MEMORY_MB.
            assert resources == {orc.PCPU: 4,
                                 "CUSTOM_MEM_PAGE_SIZE_2048": 1024}


def test_a_node_bigger_than_any_cell_gets_no_candidate(synced, client):
    # 16 dedicated CPUs a cell: one guest node of 20 PCPUs fits no cell,
    # although the host has 32 (an unnumbered request would split them).
    request = placement_request(
        Flavor(20, 1024, {"hw:cpu_policy": "dedicated"}), {})
    assert allocation_candidates(client, request)["allocation_requests"] \
        == []


def test_image_traits_go_to_the_root_and_are_honoured(synced, client):
    flavor = Flavor(2, 1024, {"hw:cpu_policy": "dedicated"})
    wanted = placement_request(flavor, {"trait:CUSTOM_NOT_HERE": "required"})
    refused = placement_request(flavor, {"trait:COMPUTE_NODE": "forbidden"})
    plain = placement_request(flavor, {"trait:COMPUTE_NODE": "required"})
    assert "root_required=CUSTOM_NOT_HERE" in wanted.query_string()
    client.ensure_trait("CUSTOM_NOT_HERE")
    assert allocation_candidates(client, wanted)["allocation_requests"] == []
    assert allocation_candidates(client, refused)["allocation_requests"] == []
    assert allocation_candidates(client, plain)["allocation_requests"]


def write(path, document):
    path.write_text(json.dumps(document))
    return str(path)


def test_the_command_prints_the_query_then_placement_candidates(
        synced, placement, tmp_path, capsys):
    flavor = write(tmp_path / "flavor.json", {
        "vcpus": 4, "memory_mb": 2048,
        "extra_specs": {"hw:numa_nodes": "2", "hw:cpu_policy": "dedicated"}})
    image = write(tmp_path / "image.json", {"properties": {}})
    assert cli.main(["placement-request", "--flavor", flavor,
                     "--image", image]) == 0
    text = capsys.readouterr().out
    assert text.startswith("resources1=MEMORY_MB:1024,PCPU:2&required1="
                           "HW_NUMA_ROOT&resources2=")
    assert cli.main(["placement-request", "--flavor", flavor, "--image",
                     image, "--placement-url", placement.url,
                     "--format", "json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["microversion"] == "1.35"
    # Two cells, two guest nodes, isolate: node 0 on either cell.
    assert len(shown["candidates"]) == 2
    assert {tuple(sorted(c["groups"].values())) for c in shown["candidates"]
            } == {tuple(sorted(cells(synced)))}


def test_the_command_refuses_bad_input_with_exit_2(tmp_path, capsys):
    flavor = write(tmp_path / "flavor.json", {
        "vcpus": 4, "memory_mb": 2048, "extra_specs": {"hw:numa_nodes": "2"}})
    image = write(tmp_path / "image.json",
                  {"properties": {"hw_numa_nodes": "2"}})
    assert cli.main(["placement-request", "--flavor", flavor,
                     "--image", image]) == 2
    err = capsys.readouterr().err
    assert "ImageNUMATopologyForbidden" in err and "Traceback" not in err


def schedule(client, request, consumer) -> dict:
    """What a scheduler does: the first candidate becomes the allocation."""
    chosen = allocation_candidates(client, request)["allocation_requests"][0]
    client.request("PUT", f"/allocations/{consumer}", body={
        "allocations": chosen["allocations"],
        "project_id": str(uuidlib.uuid4()), "user_id": str(uuidlib.uuid4()),
        "consumer_generation": None, "consumer_type": "INSTANCE"})
    return chosen["allocations"]


def test_claim_reads_the_allocation_and_corrects_it_to_what_it_takes(
        synced, placement, client, tmp_path, monkeypatch, capsys):
    """Thread policy isolate: Placement was told 2 PCPUs, the claim holds
    both threads of 2 cores; afterwards Placement holds 4 for it."""
    monkeypatch.setenv("VIRTDRIVER_STATE_DIR", str(tmp_path / "cli-state"))
    conf = tmp_path / "virtdriver.conf"
    conf.write_text("[compute]\ncpu_dedicated_set = 0-31\n")
    host = ["--driver", "fake", "--host-spec", "numa2-ht",
            "--config-file", str(conf), "--format", "json"]
    specs = {"hw:cpu_policy": "dedicated", "hw:cpu_thread_policy": "isolate"}
    vm = {"uuid": str(uuidlib.uuid4()),
          "flavor": {"vcpus": 2, "memory_mb": 1024, "extra_specs": specs,
                     "root_gb": 0}}
    given = schedule(client, placement_request(
        Flavor(2, 1024, specs), {}), vm["uuid"])
    (cell_uuid,) = given
    assert given[cell_uuid]["resources"][orc.PCPU] == 2
    path = write(tmp_path / "vm.json", vm)
    assert cli.main(["claim", "--instance", path, "--placement-url",
                     placement.url, *host]) == 0
    claimed = json.loads(capsys.readouterr().out)["claim"]
    held = client.request("GET", f"/allocations/{vm['uuid']}")["allocations"]
    assert held[cell_uuid]["resources"] == {orc.PCPU: 4, orc.MEMORY_MB: 1024}
    assert cells(synced)[cell_uuid] == claimed["cells"][0]["host_cell"]


def test_with_a_driver_the_command_says_why_a_node_offers_no_candidate(
        tmp_path, client, placement, monkeypatch, capsys):
    # A flavor with a root disk on a host that offers no DISK_GB: no
    # candidate, and now a reason; described with disk_gb, a candidate.
    monkeypatch.setenv("VIRTDRIVER_STATE_DIR", str(tmp_path / "cli-state"))
    flavor = write(tmp_path / "flavor.json", {
        "vcpus": 2, "memory_mb": 1024, "root_gb": 20})
    image = write(tmp_path / "image.json", {"properties": {}})
    args = ["placement-request", "--flavor", flavor, "--image", image,
            "--placement-url", placement.url, "--format", "json"]
    numa_host(tmp_path).sync(client)
    assert cli.main([*args, "--driver", "fake", "--host-spec",
                     "numa2-ht"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["candidates"] == []
    (short,) = shown["host"]["shortfalls"]
    assert (short["resource_class"], short["amount"], short["most"]) == (
        orc.DISK_GB, 20, 0)
    spec = tmp_path / "disk.yaml"
    spec.write_text("name: disky\ncells: 2\ndisk_gb: 100\n")
    Host(tmp_path / "state2", FakeDriver(str(spec))).sync(client)
    assert cli.main([*args, "--driver", "fake", "--host-spec",
                     str(spec)]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["host"] == {"node": "disky", "shortfalls": []}
    assert shown["candidates"] and all(
        any(orc.DISK_GB in res for res in c["allocations"].values())
        for c in shown["candidates"])
    # A host option without its driver is refused, not ignored.
    assert cli.main([*args, "--host-spec", str(spec)]) == 2
    assert "--host-spec applies only to --driver fake" in \
        capsys.readouterr().err
