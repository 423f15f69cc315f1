"""Device requests end to end on a real Placement: a fake host with
devices under its cells, the request ``placement-request`` builds, the
candidates Placement offers, and the claim taking concrete devices within
each candidate (recorded, shown, freed)."""

from __future__ import annotations

import json
import uuid as uuidlib

import pytest
from placement_helpers import Host

from virtdriver.claims.allocation import AllocationRefused
from virtdriver.claims.device_request import parse_aliases
from virtdriver.claims.fit import DoesNotFit
from virtdriver.claims.model import Flavor, Instance
from virtdriver.claims.placement_request import placement_request
from virtdriver.drivers.fake import FakeDriver
from virtdriver.placement.candidates import allocation_candidates

NAME = "fake-dev"
SPEC = {"name": NAME, "cells": 2, "cores_per_cell": 4,
        "memory_mb_per_cell": 4096, "devices": [
            {"address": "0000:81:00.0", "vendor_id": "10de",
             "product_id": "1eb8", "numa_node": 0},
            {"address": "0000:82:00.0", "vendor_id": "8086",
             "product_id": "154c", "vfs": 2, "numa_node": 1},
            {"address": "0000:83:00.0", "vendor_id": "8086",
             "product_id": "154c", "vfs": 2},
            {"address": "0000:84:00.0", "vendor_id": "10de",
             "product_id": "2236", "mdev_type": "nvidia-35",
             "instances": 2, "numa_node": 1}]}
ALIASES = parse_aliases([
    '{"name": "gpu", "vendor_id": "10de", "product_id": "1eb8"}',
    '{"name": "vf", "vendor_id": "8086", "product_id": "154c"}'])


@pytest.fixture
def host(tmp_path):
    return Host(tmp_path / "state", FakeDriver(SPEC))


def _vm(specs, image=None):
    return Instance(str(uuidlib.uuid4()), Flavor(2, 512, specs), image or {})


def _candidates(placement, host, vm):
    client = placement.client()
    host.sync(client)
    request = placement_request(vm.flavor, vm.image_properties,
                                aliases=ALIASES)
    body = allocation_candidates(client, request)
    return [{rp: e["resources"] for rp, e in c["allocations"].items()}
            for c in body["allocation_requests"]]


def test_required_vf_lands_with_guest_node_0_on_the_vf_cell(placement,
                                                            host):
    vm = _vm({"hw:numa_nodes": "1", "pci_passthrough:alias": "vf:1",
              "hw:pci_numa_affinity_policy": "required"})
    candidates = _candidates(placement, host, vm)
    cell1 = host.uuid(f"{NAME}_NUMA1")
    pool = host.uuid(f"{NAME}_pci_0000_82_00_0")
    # Only the pool under cell 1, with the guest node on cell 1: the
    # rootless pool (no NUMA node) and cell 0 are never offered.
    assert candidates and all(set(c) == {cell1, pool} for c in candidates)
    fit = host.tracker.instance_claim(vm, NAME, allocations=candidates[0],
                                      aliases=ALIASES)
    assert fit.cells[0].host_cell == 1
    (device,) = fit.devices
    assert (device.provider, device.cell, device.units) == (
        f"{NAME}_pci_0000_82_00_0", 1, ("0000:82:10.0",))
    # A second VF of the pool is the other unit; a third has none left.
    other = _vm(vm.flavor.extra_specs)
    again = host.tracker.instance_claim(other, NAME, allocations=candidates[0],
                                        aliases=ALIASES)
    assert again.devices[0].units == ("0000:82:10.1",)
    third = _vm(vm.flavor.extra_specs)
    with pytest.raises(AllocationRefused) as refused:
        host.tracker.instance_claim(third, NAME, allocations=candidates[0],
                                    aliases=ALIASES)
    assert "alias vf #1" in str(refused.value)
    assert f"{NAME}_pci_0000_82_00_0 (cell 1) has 0 free" in str(
        refused.value)
    # Released: its VF is free again, and the next claim takes it.
    host.tracker.release(vm.uuid)
    taken = host.tracker.instance_claim(third, NAME,
                                        allocations=candidates[0],
                                        aliases=ALIASES)
    assert taken.devices[0].units == ("0000:82:10.0",)


def test_legacy_candidate_on_the_other_cell_is_refused_as_documented(
        placement, host):
    vm = _vm({"hw:numa_nodes": "1", "pci_passthrough:alias": "gpu:1",
              "hw:cpu_policy": "shared"})
    candidates = _candidates(placement, host, vm)
    cell1 = host.uuid(f"{NAME}_NUMA1")
    wrong = [c for c in candidates if cell1 in c]
    assert wrong, candidates      # the GPU floats: cell 1 is offered too
    with pytest.raises(AllocationRefused) as refused:
        host.tracker.instance_claim(vm, NAME, allocations=wrong[0],
                                    aliases=ALIASES)
    assert refused.value.cases == ("device-numa-legacy",)
    assert f"{NAME}_pci_0000_81_00_0 (cell 0)" in str(refused.value)
    right = [c for c in candidates if cell1 not in c]
    fit = host.tracker.instance_claim(vm, NAME, allocations=right[0],
                                      aliases=ALIASES)
    assert fit.devices[0].units == ("0000:81:00.0",)


def test_vgpu_from_resources_and_an_allocation_not_asked(placement, host):
    vm = _vm({"hw:numa_nodes": "1", "resources:VGPU": "1",
              "hw:pci_numa_affinity_policy": "required"})
    (candidate,) = {json.dumps(c, sort_keys=True): c for c in
                    _candidates(placement, host, vm)}.values()
    fit = host.tracker.instance_claim(vm, NAME, allocations=candidate,
                                      aliases=ALIASES)
    assert fit.devices[0].units == ("new-mdev-0",)
    host.tracker.release(vm.uuid)
    # The same allocation for a flavor that asks no device: refused.
    plain = _vm({"hw:numa_nodes": "1"})
    with pytest.raises(AllocationRefused, match="no device request"):
        host.tracker.instance_claim(plain, NAME, allocations=candidate,
                                    aliases=ALIASES)


def test_without_allocation_the_claim_chooses_and_refuses_naming_cells(
        host):
    vm = _vm({"hw:numa_nodes": "1", "pci_passthrough:alias": "gpu:1",
              "hw:pci_numa_affinity_policy": "required"})
    fit = host.tracker.instance_claim(vm, NAME, aliases=ALIASES)
    assert fit.cells[0].host_cell == 0 and fit.devices[0].cell == 0
    with pytest.raises(DoesNotFit) as refused:
        host.tracker.instance_claim(_vm(vm.flavor.extra_specs), NAME,
                                    aliases=ALIASES)
    assert "alias gpu #1" in str(refused.value)
    assert "(cell 0) has 0 free" in str(refused.value)


def test_claims_file_records_devices_and_old_files_still_load(host):
    vm = _vm({"pci_passthrough:alias": "vf:2"})
    fit = host.tracker.instance_claim(vm, NAME, aliases=ALIASES)
    assert sum(len(d.units) for d in fit.devices) == 2
    path = next(host.state_dir.glob("claims*.json"))
    text = path.read_text()
    assert '"devices"' in text and "0000:8" in text
    # A claim without devices is written as before devices existed (no
    # "devices" key), and such a record loads.
    plain = _vm({"hw:numa_nodes": "1"})
    host.tracker.instance_claim(plain, NAME)
    record = json.loads(path.read_text())
    assert "devices" not in _find(record, plain.uuid)
    assert "devices" in _find(record, vm.uuid)
    loaded = host.tracker.claims()[NAME].instances
    assert loaded[vm.uuid].devices == fit.devices
    assert loaded[plain.uuid].devices == ()


def _find(document, key):
    if isinstance(document, dict):
        if key in document:
            return document[key]
        for value in document.values():
            found = _find(value, key)
            if found is not None:
                return found
    return None


def test_libvirt_driver_on_fakelibvirt_claims_real_vfs_and_mdevs(
        tmp_path, placement, fakelibvirt):
    """The same path through the libvirt driver: units are the VFs and
    the mdevs its node devices name (an existing mdev reused first)."""
    from tests.device_hosts import gpu, mdev, sriov_nic
    from virtdriver.conf.options import make_conf
    from virtdriver.drivers.libvirt.driver import LibvirtDriver
    from virtdriver.fakelibvirt.builders import HostBuilder, host_documents
    from virtdriver.fakelibvirt.connection import (
        register_host, unregister_host)

    conf = tmp_path / "virtdriver.conf"
    conf.write_text(
        "[pci]\n"
        'device_spec = {"vendor_id": "8086", "product_id": "154c"}\n'
        'alias = {"name": "vf", "vendor_id": "8086", "product_id": "154c",'
        ' "numa_policy": "required"}\n'
        "[devices]\nenabled_mdev_types = nvidia-35\n")
    existing = "4b20d080-1b54-4048-85b3-a6a62d165c01"
    fake = register_host("devclaims", host_documents(
        host=HostBuilder(cells=2, cores=2), node_devices=[
            gpu("0000:84:00.0", numa=1), *sriov_nic("0000:3b:00.0", 2),
            mdev(existing, "nvidia-35", "0000:84:00.0")]))
    try:
        options = make_conf(config_files=[conf])
        from virtdriver.conf.pci_alias import pci_aliases
        aliases = pci_aliases(options)
        driver = LibvirtDriver(conf=options, uri=fake.uri, disk_gb=None)
        host = Host(tmp_path / "state", driver)
        client = placement.client()
        host.sync(client)
        vm = _vm({"hw:numa_nodes": "1", "pci_passthrough:alias": "vf:1",
                  "resources:VGPU": "1",
                  "hw:pci_numa_affinity_policy": "required"})
        request = placement_request(vm.flavor, {}, aliases=aliases)
        body = allocation_candidates(client, request)
        (candidate, *_) = [{rp: e["resources"] for rp, e in
                            c["allocations"].items()}
                           for c in body["allocation_requests"]]
        fit = host.tracker.instance_claim(vm, "host", allocations=candidate,
                                          aliases=aliases)
        units = {d.resource_class: d.units for d in fit.devices}
        assert fit.cells[0].host_cell == 1
        assert units["VGPU"] == (existing,)
        (vf,) = units["CUSTOM_PCI_8086_154C"]
        vfs = {str(d.address) for d in driver._reading().devices.pci
               if d.physical_function is not None}
        assert vf in vfs
    finally:
        unregister_host(fake.name)


def test_claim_placement_url_keeps_device_allocations_rebuild_keeps_devices(
        tmp_path, placement, monkeypatch, capsys):
    """Through the commands: the scheduler's allocation with a VF, a claim
    that corrects the cell's PCPUs (thread policy isolate) and leaves the
    VF's allocation as given; a rebuild check keeps the devices; a
    release frees them."""
    import yaml

    from test_placement_request import schedule

    from virtdriver import cli
    from virtdriver.conf.options import make_conf
    monkeypatch.setenv("VIRTDRIVER_STATE_DIR", str(tmp_path / "cli-state"))
    spec = dict(SPEC, threads_per_core=2)
    spec_path = tmp_path / "host.yaml"
    spec_path.write_text(yaml.safe_dump(spec))
    conf_path = tmp_path / "virtdriver.conf"
    conf_path.write_text(
        "[compute]\ncpu_dedicated_set = 0-15\n[pci]\n"
        'alias = {"name": "vf", "vendor_id": "8086", "product_id": "154c"}\n')
    conf = make_conf(config_files=[conf_path])
    host = Host(tmp_path / "state", FakeDriver(spec, conf=conf))
    client = placement.client()
    host.sync(client)
    specs = {"hw:cpu_policy": "dedicated", "hw:cpu_thread_policy": "isolate",
             "hw:numa_nodes": "1", "pci_passthrough:alias": "vf:1",
             "hw:pci_numa_affinity_policy": "required"}
    uuid = str(uuidlib.uuid4())
    given = schedule(client, placement_request(
        Flavor(2, 512, specs), {}, aliases=ALIASES), uuid)
    pool = host.uuid(f"{NAME}_pci_0000_82_00_0")
    assert given[pool]["resources"] == {"CUSTOM_PCI_8086_154C": 1}
    vm = tmp_path / "vm.json"
    vm.write_text(json.dumps({"uuid": uuid, "flavor": {
        "vcpus": 2, "memory_mb": 512, "extra_specs": specs}}))
    options = ["--driver", "fake", "--host-spec", str(spec_path),
               "--config-file", str(conf_path), "--format", "json"]
    assert cli.main(["claim", "--instance", str(vm), "--placement-url",
                     placement.url, *options]) == 0
    claim = json.loads(capsys.readouterr().out)["claim"]
    assert claim["devices"][0]["units"] == ["0000:82:10.0"]
    now = client.request("GET", f"/allocations/{uuid}")["allocations"]
    assert now[pool]["resources"] == {"CUSTOM_PCI_8086_154C": 1}
    (cell,) = set(now) - {pool}
    assert now[cell]["resources"]["PCPU"] == 4      # corrected: 2 cores
    image = tmp_path / "image.json"
    image.write_text(json.dumps({"properties": {}}))
    assert cli.main(["rebuild-check", "--instance", str(vm), "--image",
                     str(image), "--placement-url", placement.url,
                     *options]) == 0
    capsys.readouterr()
    assert cli.main(["claims", *options]) == 0
    listing = json.loads(capsys.readouterr().out)
    assert listing["nodes"][NAME][uuid]["devices"] == claim["devices"]
    assert listing["usages"][pool] == {"CUSTOM_PCI_8086_154C": 1}
    assert cli.main(["release", "--instance", uuid, *options]) == 0
    capsys.readouterr()
    assert cli.main(["claims", *options]) == 0
    assert pool not in json.loads(capsys.readouterr().out)["usages"]


def test_placement_request_command_shows_where_each_device_landed(
        tmp_path, placement, host, capsys):
    """``placement-request --placement-url`` names each device group's
    provider beside each guest node's cell."""
    from virtdriver import cli
    host.sync(placement.client())
    flavor = tmp_path / "flavor.json"
    flavor.write_text(json.dumps({"vcpus": 2, "memory_mb": 512,
                                  "extra_specs": {
                                      "hw:numa_nodes": "1",
                                      "resources:VGPU": "1",
                                      "hw:pci_numa_affinity_policy":
                                          "required"}}))
    image = tmp_path / "image.json"
    image.write_text(json.dumps({"properties": {}}))
    assert cli.main(["placement-request", "--flavor", str(flavor),
                     "--image", str(image), "--placement-url",
                     placement.url]) == 0
    out = capsys.readouterr().out
    mdev = host.uuid(f"{NAME}_pci_0000_84_00_0")
    cell1 = host.uuid(f"{NAME}_NUMA1")
    assert "1 candidate(s)" in out
    assert f"1. guest node 0 -> {cell1}, device _DEV1 -> {mdev}" in out
