"""Device providers synced to a real Placement: created under their NUMA
cells, a vanished device with and without an allocation, an operator's
trait kept, a vendor trait removed when the device is swapped."""

from __future__ import annotations

from types import SimpleNamespace

import os_resource_classes as orc
import os_traits
import pytest
from placement_helpers import Host

from tests.device_hosts import gpu, set_devices, sriov_nic
from virtdriver.capabilities.traits.device_providers import MISSING
from virtdriver.conf.options import make_conf
from virtdriver.drivers.libvirt.driver import LibvirtDriver
from virtdriver.fakelibvirt.builders import HostBuilder, host_documents
from virtdriver.fakelibvirt.connection import register_host, unregister_host
from virtdriver.fakelibvirt.nodedev_builder import pci_device
from virtdriver.placement.usages import provider_usage

CONF = """
[pci]
device_spec = {"vendor_id": "8086", "product_id": "154c"}
device_spec = {"address": "0000:d8:00.0"}
[devices]
enabled_mdev_types = nvidia-35
"""
GPU, NIC, ACC = ("host_pci_0000_84_00_0", "host_pci_0000_3b_00_0",
                 "host_pci_0000_d8_00_0")


def devices(accelerator=(0x15b3, 0x101b)):
    return [gpu("0000:84:00.0", numa=1), *sriov_nic("0000:3b:00.0", 2),
            pci_device("0000:d8:00.0", *accelerator, class_id=0x120000)]


@pytest.fixture
def device_host(tmp_path, client, fakelibvirt, fakelibvirt_event_loop):
    # The driver hears node-device events through fakelibvirt's event loop,
    # run as an agent runs libvirt's; a swap waits for their delivery.
    path = tmp_path / "virtdriver.conf"
    path.write_text(CONF)
    fake = register_host("placementdevs", host_documents(
        host=HostBuilder(cells=2, cores=2), node_devices=devices()))
    driver = LibvirtDriver(conf=make_conf(config_files=[path]),
                           uri=fake.uri, disk_gb=None,
                           device_usage=provider_usage(client))
    host = Host(tmp_path / "state", driver)
    host.fake = fake
    host.drain = fakelibvirt_event_loop
    yield host
    unregister_host(fake.name)


def swap(host, node_devices):
    """A hot-plug: the devices change, their events reach the driver."""
    set_devices(host.fake, node_devices)
    assert host.drain()


def cycle(host, client):
    host.update()
    result = host.sync(client)
    assert result.ok, result.describe()
    return result


def test_device_providers_are_created_under_their_cells(
        device_host, client, api):
    cycle(device_host, client)
    listed = api.providers()
    gpu_uuid = device_host.uuid(GPU)
    assert listed[gpu_uuid]["parent_provider_uuid"] == \
        device_host.uuid("host_NUMA1")
    assert listed[device_host.uuid(NIC)]["parent_provider_uuid"] == \
        device_host.uuid("host_NUMA1")  # sriov_nic's default node 1
    assert listed[device_host.uuid(ACC)]["parent_provider_uuid"] == \
        device_host.root.uuid
    assert api.inventories(gpu_uuid)[orc.VGPU]["total"] == 16
    assert api.inventories(device_host.uuid(NIC))[
        "CUSTOM_PCI_8086_154C"]["total"] == 2
    assert {os_traits.HW_NIC_SRIOV, os_traits.COMPUTE_MANAGED_PCI_DEVICE,
            "CUSTOM_PCI_VENDOR_8086"} <= api.traits(device_host.uuid(NIC))
    assert "CUSTOM_MDEV_TYPE_NVIDIA_35" in api.traits(gpu_uuid)


def test_a_vanished_device_without_allocation_goes_in_the_same_sync(
        device_host, client, api):
    cycle(device_host, client)
    gpu_uuid = device_host.uuid(GPU)
    swap(device_host, devices()[1:])
    result = cycle(device_host, client)
    assert gpu_uuid not in api.providers()
    assert gpu_uuid in {o.uuid for o in result.outcomes if o.deleted}


def test_a_vanished_device_with_an_allocation_stays_until_freed(
        device_host, client, api):
    cycle(device_host, client)
    gpu_uuid = device_host.uuid(GPU)
    consumer = api.allocate(gpu_uuid, {orc.VGPU: 2})
    swap(device_host, devices()[1:])
    for _ in range(2):  # no cycle fails
        cycle(device_host, client)
    inventory = api.inventories(gpu_uuid)[orc.VGPU]
    assert (inventory["total"], inventory["reserved"]) == (16, 16)
    assert MISSING in api.traits(gpu_uuid)
    api.free(consumer)
    cycle(device_host, client)
    assert gpu_uuid not in api.providers()


def test_an_operators_trait_stays_and_the_old_vendor_trait_goes(
        device_host, client, api):
    cycle(device_host, client)
    acc = device_host.uuid(ACC)
    api.add_traits(acc, "CUSTOM_RACK_7")
    for _ in range(2):
        cycle(device_host, client)
        assert "CUSTOM_RACK_7" in api.traits(acc)
    swap(device_host, devices(accelerator=(0x1002, 0x71c4)))
    cycle(device_host, client)
    traits = api.traits(acc)
    assert "CUSTOM_RACK_7" in traits
    assert "CUSTOM_PCI_VENDOR_1002" in traits
    assert "CUSTOM_PCI_VENDOR_15B3" not in traits
    assert set(api.inventories(acc)) == {"CUSTOM_PCI_1002_71C4"}


def test_a_device_gaining_a_numa_node_moves_with_its_allocation(
        device_host, client, api):
    cycle(device_host, client)
    acc = device_host.uuid(ACC)
    consumer = api.allocate(acc, {"CUSTOM_PCI_15B3_101B": 1})
    swap(device_host, [*devices()[:-1], pci_device(
        "0000:d8:00.0", 0x15b3, 0x101b, class_id=0x120000, numa_node=0)])
    result = cycle(device_host, client)
    listed = api.providers()
    assert listed[acc]["parent_provider_uuid"] == \
        device_host.uuid("host_NUMA0")
    assert result.get(acc).reparented_from == \
        device_host.root.uuid
    usages = api.client.request(
        "GET", f"/resource_providers/{acc}/usages")["usages"]
    assert usages == {"CUSTOM_PCI_15B3_101B": 1}
    allocations = api.client.request("GET", f"/allocations/{consumer}")
    assert set(allocations["allocations"]) == {acc}
    assert not cycle(device_host, client).counts.writes  # steady again


def test_an_upgrade_from_root_level_inventory_is_reshaped(
        tmp_path, client, api, fakelibvirt):
    """A root that held the device's class itself (an older release) with
    an allocation on it: the reshaper moves the allocation to the device
    provider in one request."""
    fake = register_host("placementupgrade", host_documents(
        host=HostBuilder(cells=2, cores=2), node_devices=devices()))
    try:
        def driver(conf):
            path = tmp_path / "upgrade.conf"
            path.write_text(conf)
            return LibvirtDriver(conf=make_conf(config_files=[path]),
                                 uri=fake.uri, disk_gb=None,
                                 device_usage=provider_usage(client))

        old = Host(tmp_path / "state", driver(""))
        old.tracker.tree.update_inventory(old.root.uuid, {
            "CUSTOM_PCI_15B3_101B": {"total": 1}})
        assert old.sync(client).ok
        root = old.root.uuid
        consumer = api.allocate(root, {"CUSTOM_PCI_15B3_101B": 1})

        new = Host(tmp_path / "state", driver(CONF))
        result = new.sync(client)
        assert result.ok, result.describe()
        acc = new.uuid(ACC)
        assert "CUSTOM_PCI_15B3_101B" not in api.inventories(root)
        allocations = api.client.request("GET", f"/allocations/{consumer}")
        assert allocations["allocations"][acc]["resources"] == {
            "CUSTOM_PCI_15B3_101B": 1}
        assert root not in allocations["allocations"]
    finally:
        unregister_host(fake.name)


def test_the_agent_keeps_an_allocated_vanished_device_reserved(
        tmp_path, placement, api, fakelibvirt, fakelibvirt_event_loop):
    from virtdriver import agent as agent_lib

    path = tmp_path / "agent.conf"
    path.write_text(CONF)
    fake = register_host("agentdevs", host_documents(
        host=HostBuilder(cells=2, cores=2), node_devices=devices()))
    lines: list[str] = []
    agent = agent_lib.Agent(lambda: agent_lib.Setup(
        key=None, directory=tmp_path / "state", driver_name="libvirt",
        make_driver=lambda: LibvirtDriver(
            conf=make_conf(config_files=[path]), uri=fake.uri,
            disk_gb=None),
        hostname="cmp1", provider_config=None, target="test",
        connect=placement.client), interval=0, log=lines.append,
        classify=lambda e: 2)
    try:
        assert agent.cycle().status == agent_lib.OK, lines
        gpu_uuid = agent._state.tracker.tree.record(
            "cmp1_pci_0000_84_00_0").uuid
        consumer = api.allocate(gpu_uuid, {orc.VGPU: 1})
        swap(SimpleNamespace(fake=fake, drain=fakelibvirt_event_loop),
             devices()[1:])
        assert agent.cycle().status == agent_lib.OK, lines
        inventory = api.inventories(gpu_uuid)[orc.VGPU]
        assert inventory["reserved"] == inventory["total"] == 16
        assert MISSING in api.traits(gpu_uuid)
        api.free(consumer)
        assert agent.cycle().status == agent_lib.OK, lines
        assert gpu_uuid not in api.providers()
    finally:
        agent.close()
        unregister_host(fake.name)


def test_a_switch_to_flat_moves_device_providers_to_the_root(
        device_host, tmp_path, client, api):
    cycle(device_host, client)
    gpu_uuid = device_host.uuid(GPU)
    consumer = api.allocate(gpu_uuid, {orc.VGPU: 1})
    guest = api.allocate(device_host.uuid("host_NUMA1"), {orc.VCPU: 2})
    path = tmp_path / "flat.conf"
    path.write_text(CONF)
    flat = Host(tmp_path / "state", LibvirtDriver(
        conf=make_conf(config_files=[path]), uri=device_host.fake.uri,
        disk_gb=None, nested=False, device_usage=provider_usage(client)))
    result = flat.sync(client)
    assert result.ok, result.describe()
    listed = api.providers()
    assert listed[gpu_uuid]["parent_provider_uuid"] == flat.root.uuid
    assert not any(p["name"].startswith("host_NUMA") for p in
                   listed.values())
    allocations = api.client.request("GET", f"/allocations/{consumer}")
    assert set(allocations["allocations"]) == {gpu_uuid}
    moved = api.client.request("GET", f"/allocations/{guest}")
    assert set(moved["allocations"]) == {flat.root.uuid}  # reshaped


def test_a_one_shot_sync_keeps_an_allocated_vanished_device_and_the_rest_syncs(
        tmp_path, client, api, fakelibvirt):
    """A new process (``virtdriver sync``) never saw the vanished GPU:
    its provider is not in the tree, nothing can take its VGPU
    allocation, so it is left out of the reshape and kept by the
    deletions — while the rest of the tree syncs; it goes once free."""
    path = tmp_path / "oneshot.conf"
    path.write_text(CONF)
    fake = register_host("oneshotdevs", host_documents(
        host=HostBuilder(cells=2, cores=2), node_devices=devices()))

    def one_shot():
        host = Host(tmp_path / "state", LibvirtDriver(
            conf=make_conf(config_files=[path]), uri=fake.uri, disk_gb=None))
        return host, host.sync(client)

    try:
        first, result = one_shot()
        assert result.ok, result.describe()
        gpu_uuid, acc = first.uuid(GPU), first.uuid(ACC)
        consumer = api.allocate(gpu_uuid, {orc.VGPU: 1})
        set_devices(fake, devices(accelerator=(0x1002, 0x71c4))[1:])
        _, result = one_shot()
        assert gpu_uuid in api.providers()
        assert not result.get(gpu_uuid).deleted
        assert "CUSTOM_PCI_VENDOR_1002" in api.traits(acc)  # not held
        api.free(consumer)
        _, result = one_shot()
        assert gpu_uuid not in api.providers()
    finally:
        unregister_host(fake.name)
