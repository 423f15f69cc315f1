"""``virtdriver claim``, a flat ``virtdriver sync``, an allocation on the
root, then a nested sync: the allocation moves to the cell the claim says,
in one reshape, through the command line (real Placement on loopback).
Without the claims no cell could be chosen (two offer the classes)."""

from __future__ import annotations

import json

from placement_helpers import Api

from virtdriver import cli

UUID = "4d0f6b1e-1c9a-4c55-8f0e-2a7c3c1d9b11"
FAKE = ["--driver", "fake", "--host-spec", "numa2-ht"]


def test_switching_to_nested_moves_an_allocation_to_its_claimed_cell(
        tmp_path, monkeypatch, placement, capsys):
    monkeypatch.setenv("VIRTDRIVER_STATE_DIR", str(tmp_path / "state"))
    api = Api(placement)
    url = ["--placement-url", placement.url]
    instance = tmp_path / "instance.json"
    instance.write_text(json.dumps({
        "uuid": UUID, "flavor": {"vcpus": 2, "memory_mb": 1024,
                                 "extra_specs": {"hw:numa_nodes": "1"}}}))
    assert cli.main(["claim", "--instance", str(instance), *FAKE]) == 0
    capsys.readouterr()
    assert cli.main(["sync", "--format", "json", *url, *FAKE,
                     "--flat"]) == 0
    capsys.readouterr()
    root = api.client.list_providers()[0]["uuid"]
    api.client.request("PUT", f"/allocations/{UUID}", body={
        "allocations": {root: {"resources": {"VCPU": 2, "MEMORY_MB": 1024}}},
        "project_id": UUID, "user_id": UUID, "consumer_generation": None,
        "consumer_type": "INSTANCE"})

    status = cli.main(["sync", "--format", "json", *url, *FAKE])
    out = capsys.readouterr()
    assert status == 0, out.err
    tree = json.loads(out.out)["tree"]["providers"]
    claims = json.loads((tmp_path / "state" / "claims-fake.json").read_text())
    cell_id = claims["nodes"]["fake-numa2-ht"]["instances"][UUID][
        "cells"][0]["host_cell"]
    cell = next(p["uuid"] for p in tree
                if p["name"] == f"fake-numa2-ht_NUMA{cell_id}")
    allocations = api.client.request("GET", f"/allocations/{UUID}")[
        "allocations"]
    assert set(allocations) == {cell}
    assert allocations[cell]["resources"] == {"VCPU": 2, "MEMORY_MB": 1024}
    assert "VCPU" not in api.inventories(root)
