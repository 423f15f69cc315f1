"""``claim --placement-url`` writes the corrected allocation back through
the generation of the one read it claimed with: allocations written below
microversion 1.38, another writer between the read and the write, a lost
answer to the write, Placement gone; and the instance document's own
``allocations`` field."""

from __future__ import annotations

import json
import re
import uuid as uuidlib

import os_resource_classes as orc
import pytest
from fault_servers import Proxy
from test_placement_request import numa_host, schedule, write

from virtdriver import cli
from virtdriver.claims.model import Flavor
from virtdriver.claims.placement_request import placement_request
from virtdriver.placement.candidates import allocation_candidates
from virtdriver.placement.client import PlacementClient

UUID = r"[0-9a-f]{8}(-[0-9a-f]{4}){3}-[0-9a-f]{12}"
#: Thread policy isolate: the scheduler asks 2 PCPUs, the claim takes both
#: threads of 2 cores, so the write-back has something to correct.
SPECS = {"hw:cpu_policy": "dedicated", "hw:cpu_thread_policy": "isolate"}


@pytest.fixture
def cli_host(tmp_path, monkeypatch):
    monkeypatch.setenv("VIRTDRIVER_STATE_DIR", str(tmp_path / "cli-state"))
    conf = tmp_path / "virtdriver.conf"
    conf.write_text("[compute]\ncpu_dedicated_set = 0-31\n")
    return ["--driver", "fake", "--host-spec", "numa2-ht",
            "--config-file", str(conf), "--format", "json"]


@pytest.fixture
def synced(tmp_path, client):
    host = numa_host(tmp_path)
    host.sync(client)
    return host


def instance(tmp_path, **extra):
    vm = {"uuid": str(uuidlib.uuid4()),
          "flavor": {"vcpus": 2, "memory_mb": 1024, "extra_specs": SPECS},
          **extra}
    return vm, write(tmp_path / f"{vm['uuid']}.json", vm)


def claim_through(placement, fault, path, cli_host) -> int:
    """``claim --placement-url`` through a proxy that runs ``fault``."""
    proxy = Proxy(placement.url, fault=fault)
    try:
        return cli.main(["claim", "--instance", path, "--placement-url",
                         proxy.url, *cli_host])
    finally:
        proxy.close()


def request():
    return placement_request(Flavor(2, 1024, SPECS), {})


def held(client, consumer):
    return client.request("GET", f"/allocations/{consumer}")


def resources(client, consumer):
    """``{rp: {"resources": ...}}`` of what Placement holds for it."""
    return {rp: {"resources": entry["resources"]} for rp, entry
            in held(client, consumer)["allocations"].items()}


def claimed(cli_host, capsys) -> set[str]:
    capsys.readouterr()
    assert cli.main(["claims", *cli_host]) == 0
    shown = json.loads(capsys.readouterr().out)
    return {uuid for instances in shown["nodes"].values()
            for uuid in instances}


def test_an_allocation_written_below_1_38_is_corrected(
        synced, placement, client, tmp_path, cli_host, capsys):
    # Placement shows it as consumer_type 'unknown', which its PUT schema
    # refuses: the claim writes the instance's type.
    vm, path = instance(tmp_path)
    old = PlacementClient.from_url(placement.url, microversion="1.28")
    chosen = allocation_candidates(client, request())["allocation_requests"][0]
    allocation = chosen["allocations"]
    old.request("PUT", f"/allocations/{vm['uuid']}", body={
        "allocations": allocation, "project_id": str(uuidlib.uuid4()),
        "user_id": str(uuidlib.uuid4()), "consumer_generation": None})
    assert held(client, vm["uuid"])["consumer_type"] == "unknown"
    assert cli.main(["claim", "--instance", path, "--placement-url",
                     placement.url, *cli_host]) == 0
    (cell,) = allocation
    now = held(client, vm["uuid"])
    assert now["allocations"][cell]["resources"] == {orc.PCPU: 4,
                                                     orc.MEMORY_MB: 1024}
    assert now["consumer_type"] == "INSTANCE"
    assert vm["uuid"] in claimed(cli_host, capsys)


def test_another_writer_between_read_and_write_is_not_overwritten(
        synced, placement, client, tmp_path, cli_host, capsys):
    vm, path = instance(tmp_path)
    given = schedule(client, request(), vm["uuid"])
    (cell,) = given
    theirs = {cell: {"resources": {orc.PCPU: 2, orc.MEMORY_MB: 2048}}}
    seen = []

    def other_writer(n, method, path):
        if path.startswith(f"/allocations/{vm['uuid']}"):
            seen.append(method)
            if len(seen) == 2:     # after our read, before our next request
                body = held(client, vm["uuid"])
                client.request("PUT", f"/allocations/{vm['uuid']}", body={
                    "allocations": theirs, "project_id": body["project_id"],
                    "user_id": body["user_id"], "consumer_type": "INSTANCE",
                    "consumer_generation": body["consumer_generation"]})
        return None

    status = claim_through(placement, other_writer, path, cli_host)
    err = capsys.readouterr().err
    assert status == 2, err
    assert "changed in Placement after it was read" in err
    assert "was released" in err
    assert resources(client, vm["uuid"]) == theirs
    assert vm["uuid"] not in claimed(cli_host, capsys)
    assert seen[:2] == ["GET", "PUT"]     # one read, then the guarded write


def test_a_lost_answer_to_the_write_keeps_the_claim(
        synced, placement, client, tmp_path, cli_host, capsys):
    # Placement saves the PUT, its answer is a 500; the client's retry
    # gets a 409 (the generation moved): re-read, it is ours, done.
    vm, path = instance(tmp_path)
    (cell,) = schedule(client, request(), vm["uuid"])
    puts = []

    def lose_first_put(n, method, path):
        if method == "PUT" and path.startswith("/allocations/"):
            puts.append(n)
            return "500-after" if len(puts) == 1 else None
        return None

    status = claim_through(placement, lose_first_put, path, cli_host)
    assert status == 0, capsys.readouterr().err
    assert len(puts) == 2            # the retry happened and got its 409
    assert held(client, vm["uuid"])["allocations"][cell]["resources"] == {
        orc.PCPU: 4, orc.MEMORY_MB: 1024}
    assert vm["uuid"] in claimed(cli_host, capsys)


def test_placement_gone_during_the_write_releases_and_exits_3(
        synced, placement, client, tmp_path, cli_host, capsys):
    vm, path = instance(tmp_path)
    given = schedule(client, request(), vm["uuid"])

    def fail_puts(n, method, path):
        return "503" if method == "PUT" else None

    status = claim_through(placement, fail_puts, path, cli_host)
    err = capsys.readouterr().err
    assert status == 3, err
    assert "was released" in err and "claim again" in err
    assert resources(client, vm["uuid"]) == {
        rp: {"resources": res["resources"]} for rp, res in given.items()}
    assert vm["uuid"] not in claimed(cli_host, capsys)


def test_the_instance_documents_allocations_are_the_scheduled_ones(
        synced, placement, client, tmp_path, cli_host, capsys):
    # A provider of another host: refused as through --allocations.
    elsewhere = {str(uuidlib.uuid4()): {"resources": {orc.PCPU: 2,
                                                      orc.MEMORY_MB: 1024}}}
    vm, path = instance(tmp_path, allocations=elsewhere)
    allocations = write(tmp_path / "alloc.json", {"allocations": elsewhere})
    capsys.readouterr()
    by_flag = cli.main(["claim", "--instance", instance(tmp_path)[1],
                        "--allocations", allocations, *cli_host])
    flag_err = capsys.readouterr().err
    assert by_flag == 1, flag_err
    assert cli.main(["claim", "--instance", path, *cli_host]) == by_flag
    own_err = capsys.readouterr().err
    assert "cannot be pinned within the scheduler's allocation" in own_err
    assert re.sub(UUID, "U", own_err) == re.sub(UUID, "U", flag_err)
    assert vm["uuid"] not in claimed(cli_host, capsys)


def test_instance_allocations_that_contradict_the_given_ones_are_refused(
        synced, placement, client, tmp_path, cli_host, capsys):
    vm, _ = instance(tmp_path)
    given = schedule(client, request(), vm["uuid"])
    (cell,) = given
    other = {cell: {"resources": {orc.PCPU: 2, orc.MEMORY_MB: 512}}}
    vm["allocations"] = other
    path = write(tmp_path / "vm.json", vm)
    assert cli.main(["claim", "--instance", path, "--placement-url",
                     placement.url, *cli_host]) == 2
    err = capsys.readouterr().err
    assert "differ from those of Placement" in err
    assert vm["uuid"] not in claimed(cli_host, capsys)
    # The same allocations as Placement's: accepted.
    vm["allocations"] = {rp: {"resources": r["resources"]}
                         for rp, r in given.items()}
    path = write(tmp_path / "vm.json", vm)
    assert cli.main(["claim", "--instance", path, "--placement-url",
                     placement.url, *cli_host]) == 0
