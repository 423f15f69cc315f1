"""Device requests through the commands (``cli.main``): the fake driver's
``devices:`` list, ``[pci] alias`` in the config file, ``placement-request``
saying what Placement decides per device, ``claim``/``claims`` showing
which instance holds which device, bad aliases as one line and exit 2."""

from __future__ import annotations

import json

import pytest
import yaml

from virtdriver import cli

UUID = "11111111-2222-3333-4444-555555555555"
HOST = {"name": "devhost", "cells": 2, "cores_per_cell": 2, "devices": [
    {"address": "0000:81:00.0", "vendor_id": "10de", "product_id": "1eb8",
     "numa_node": 1},
    {"address": "0000:82:00.0", "vendor_id": "8086", "product_id": "154c",
     "vfs": 2, "numa_node": 0}]}
ALIASES = ('alias = {"name": "gpu", "vendor_id": "10de", '
           '"product_id": "1eb8", "numa_policy": "required"}\n'
           'alias = {"name": "vf", "vendor_id": "8086", '
           '"product_id": "154c"}\n')


def options(tmp_path, monkeypatch, aliases=ALIASES):
    monkeypatch.setenv("VIRTDRIVER_STATE_DIR", str(tmp_path / "state"))
    spec = tmp_path / "host.yaml"
    spec.write_text(yaml.safe_dump(HOST))
    conf = tmp_path / "virtdriver.conf"
    conf.write_text("[pci]\n" + aliases)
    return ["--driver", "fake", "--host-spec", str(spec),
            "--config-file", str(conf)]


def write(tmp_path, name, document) -> str:
    path = tmp_path / name
    path.write_text(json.dumps(document))
    return str(path)


def flavor(specs):
    return {"vcpus": 2, "memory_mb": 512, "extra_specs": specs}


def test_placement_request_says_per_device_what_placement_decides(
        tmp_path, monkeypatch, capsys):
    host = options(tmp_path, monkeypatch)
    path = write(tmp_path, "f.json", flavor({
        "hw:numa_nodes": "1", "pci_passthrough:alias": "gpu:1,vf:1"}))
    image = write(tmp_path, "i.json", {"properties": {}})
    assert cli.main(["placement-request", "--flavor", path, "--image",
                     image, *host]) == 0
    out = capsys.readouterr().out
    assert "same_subtree=1,_DEV1" in out
    assert "# device _DEV1 (alias gpu #1): CUSTOM_PCI_10DE_1EB8:1, policy " \
        "required: Placement: a provider under guest node 0's cell" in out
    assert "# device _DEV2 (alias vf #1)" in out and "policy legacy" in out
    assert "# not expressed: device-numa-legacy" in out
    assert "# microversion 1.36" in out
    # The host can hold both classes: no shortfall named.
    assert "its providers can hold every class asked" in out


@pytest.mark.parametrize("aliases, specs, words", [
    ('alias = {"name": "gpu", "vendor_id": "10de"\n', {},
     "[pci] alias #1 = "),
    (ALIASES, {"pci_passthrough:alias": "nic:1"},
     "alias 'nic' is not defined by [pci] alias (defined: gpu, vf)"),
    (ALIASES, {"pci_passthrough:alias": "vf:1",
               "hw:pci_numa_affinity_policy": "close"},
     "hw:pci_numa_affinity_policy='close' is not one of"),
])
def test_bad_aliases_are_one_line_and_exit_2(tmp_path, monkeypatch, capsys,
                                            aliases, specs, words):
    host = options(tmp_path, monkeypatch, aliases)
    path = write(tmp_path, "f.json", flavor(specs))
    image = write(tmp_path, "i.json", {"properties": {}})
    assert cli.main(["placement-request", "--flavor", path, "--image",
                     image, *host]) == 2
    err = capsys.readouterr().err
    assert words in err
    assert err.startswith("virtdriver: ") and "Traceback" not in err
    assert len(err.strip().splitlines()) <= 2


def test_claim_and_claims_show_which_instance_holds_which_device(
        tmp_path, monkeypatch, capsys):
    host = options(tmp_path, monkeypatch)

    def vm(policy):
        return write(tmp_path, f"{policy}.json", {
            "uuid": UUID, "flavor": flavor({
                "hw:numa_nodes": "1", "pci_passthrough:alias": "gpu:1,vf:1",
                "hw:pci_numa_affinity_policy": policy}),
            "image": {"properties": {}}, "allocations": {}})

    # legacy: the GPU is on cell 1, the VFs on cell 0: no cell for guest
    # node 0 has both; refused naming the devices and cells (exit 1).
    assert cli.main(["claim", "--instance", vm("legacy"), *host]) == 1
    err = capsys.readouterr().err
    assert "alias gpu #1" in err
    assert ("devhost_pci_0000_81_00_0 (cell 1) is not on guest node 0's "
            "cell 0 (policy legacy)") in err
    assert cli.main(["claim", "--instance", vm("preferred"), *host]) == 0
    out = capsys.readouterr().out
    assert ("device alias gpu #1: devhost_pci_0000_81_00_0 (cell 1) "
            "CUSTOM_PCI_10DE_1EB8: 0000:81:00.0") in out
    assert cli.main(["claims", "--format", "json", *host]) == 0
    listing = json.loads(capsys.readouterr().out)
    devices = listing["nodes"]["devhost"][UUID]["devices"]
    assert [d["units"] for d in devices] == [["0000:81:00.0"],
                                             ["0000:82:10.0"]]
    assert cli.main(["release", "--instance", UUID, *host]) == 0
    capsys.readouterr()
    assert cli.main(["claims", "--format", "json", *host]) == 0
    assert UUID not in json.dumps(json.loads(capsys.readouterr().out))


def test_the_fake_hosts_devices_are_providers_under_their_cells(
        tmp_path, monkeypatch, capsys):
    """As the libvirt driver publishes them: under the cell of their NUMA
    node, their traits on them and never on the root or the cells."""
    host = options(tmp_path, monkeypatch)
    assert cli.main(["report", "--format", "json", *host]) == 0
    providers = {p["name"]: p for p in
                 json.loads(capsys.readouterr().out)["providers"]}
    gpu, pool = providers["devhost_pci_0000_81_00_0"], \
        providers["devhost_pci_0000_82_00_0"]
    assert gpu["parent_provider_uuid"] == providers["devhost_NUMA1"]["uuid"]
    assert pool["parent_provider_uuid"] == providers["devhost_NUMA0"]["uuid"]
    assert pool["inventories"]["CUSTOM_PCI_8086_154C"]["total"] == 2
    assert {"HW_NIC_SRIOV", "CUSTOM_PCI_VENDOR_8086"} <= set(pool["traits"])
    assert "CUSTOM_PCI_VENDOR_10DE" in gpu["traits"]
    for name in ("devhost", "devhost_NUMA0", "devhost_NUMA1"):
        assert not {t for t in providers[name]["traits"]
                    if t.startswith("CUSTOM_PCI") or t in (
                        "HW_NIC_SRIOV", "COMPUTE_MANAGED_PCI_DEVICE")}, name


@pytest.mark.parametrize("aliases, alias, words", [
    (ALIASES, "nic:1", "invalid device request: flavor "
     "pci_passthrough:alias='nic:1': alias 'nic' is not defined"),
    ("alias = [1]\n", "gpu:1", "invalid device request: [pci] alias #1 = "
     "'[1]': not a JSON object"),
])
def test_claim_refuses_bad_aliases_in_one_line_exit_2(
        tmp_path, monkeypatch, capsys, aliases, alias, words):
    host = options(tmp_path, monkeypatch, aliases)
    instance = write(tmp_path, "vm.json", {
        "uuid": UUID, "flavor": flavor({"pci_passthrough:alias": alias}),
        "image": {"properties": {}}, "allocations": {}})
    assert cli.main(["claim", "--instance", instance, *host]) == 2
    err = capsys.readouterr().err
    assert err.startswith("virtdriver: ") and words in err, err
    assert len(err.strip().splitlines()) <= 2 and "Traceback" not in err
