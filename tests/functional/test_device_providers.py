"""Device providers through the libvirt driver and the resource tracker,
on fakelibvirt hosts built with the node-device builders.

Each of Nova's device defects named in issue 27 has a test here that
Nova's behaviour would fail (see the ``nova_defect`` names)."""

from __future__ import annotations

import dataclasses
import importlib.util
import logging
from types import MappingProxyType

import os_resource_classes as orc
import os_traits
import pytest

from tests.device_hosts import gpu, mdev, set_devices, sriov_nic
from virtdriver.capabilities.traits.device_providers import MISSING
from virtdriver.capabilities.traits.model import TraitState
from virtdriver.conf.options import make_conf
from virtdriver.drivers.base import DriverError
from virtdriver.drivers.identity import child_uuid
from virtdriver.drivers.libvirt.driver import LibvirtDriver
from virtdriver.fakelibvirt.builders import HostBuilder, host_documents
from virtdriver.fakelibvirt.connection import register_host, unregister_host
from virtdriver.fakelibvirt.nodedev_builder import (
    MdevType, NodeDevice, pci_device)
from virtdriver.resource_tracker.tracker import ResourceTracker

#: fakelibvirt can fail one node device's call (its node-device table).
_FAULTS_PER_DEVICE = importlib.util.find_spec(
    "virtdriver.fakelibvirt.nodedev_state") is not None
NODE = "cmp1"
GPU = f"{NODE}_pci_0000_84_00_0"
NIC = f"{NODE}_pci_0000_3b_00_0"
ACC = f"{NODE}_pci_0000_d8_00_0"
U1 = "3b3e6d7a-0000-4000-8000-000000000001"
CONF = """
[pci]
device_spec = {"vendor_id": "8086", "product_id": "154c", "traits": "fast"}
device_spec = {"address": "0000:d8:00.0"}
[devices]
enabled_mdev_types = nvidia-35
"""


def devices():
    return [gpu("0000:84:00.0", numa=1), *sriov_nic("0000:3b:00.0", 4, numa=0),
            pci_device("0000:d8:00.0", 0x15b3, 0x101b, class_id=0x120000)]


class Host:
    """A fake host whose devices a test changes between updates."""

    def __init__(self, tmp_path, node_devices, *, conf=CONF, nested=True,
                 name="devhost", node=NODE):
        path = tmp_path / "virtdriver.conf"
        path.write_text(conf)
        self.fake = register_host(name, host_documents(
            host=HostBuilder(cells=2, cores=2), node_devices=node_devices))
        self.usage: dict[str, dict[str, int]] = {}
        self.unreachable = False
        self.driver = LibvirtDriver(
            conf=make_conf(config_files=[path]), uri=self.fake.uri,
            nested=nested, disk_gb=None, device_usage=self.used)
        self.driver.init_host(node)
        self.tracker = ResourceTracker(self.driver,
                                       state_dir=tmp_path / "state")
        self.node = node

    def devices(self, node_devices):
        set_devices(self.fake, node_devices)

    def used(self, uuid):
        """What Placement would say is allocated on ``uuid`` (``None``
        once the test makes it unreachable)."""
        return None if self.unreachable else self.usage.get(uuid, {})

    def update(self):
        return self.tracker.update_all()[self.node]

    def record(self, name):
        return self.tracker.tree.record(name)

    def exists(self, name):
        return self.tracker.tree.exists(name)

    def use(self, name, rc, amount):
        self.usage[self.record(name).uuid] = {rc: amount}


@pytest.fixture
def make_host(fakelibvirt, tmp_path):
    made = []

    def make(node_devices=None, **kwargs):
        host = Host(tmp_path, devices() if node_devices is None
                    else node_devices, **kwargs)
        made.append(host)
        return host

    yield make
    for host in made:
        unregister_host(host.fake.name)


def test_device_providers_sit_under_their_numa_cell(make_host):
    host = make_host()
    host.update()
    tree = host.tracker.tree
    parent = {name: tree.record(tree.record(name).parent_uuid).name
              for name in (GPU, NIC, ACC)}
    assert parent == {GPU: f"{NODE}_NUMA1", NIC: f"{NODE}_NUMA0",
                      ACC: NODE}  # no <numa> node: the root
    gpu_p, nic_p, acc_p = (host.record(n) for n in (GPU, NIC, ACC))
    assert gpu_p.inventory[orc.VGPU].total == 16
    assert nic_p.inventory["CUSTOM_PCI_8086_154C"].total == 4
    assert acc_p.inventory["CUSTOM_PCI_15B3_101B"].total == 1
    assert gpu_p.uuid == child_uuid(host.record(NODE).uuid, GPU)
    assert {os_traits.COMPUTE_MANAGED_PCI_DEVICE, os_traits.HW_NIC_SRIOV,
            "CUSTOM_FAST", "CUSTOM_PCI_VENDOR_8086",
            "CUSTOM_PCI_PRODUCT_8086_154C",
            "CUSTOM_PCI_CLASS_0200"} <= nic_p.traits
    assert {"CUSTOM_MDEV_TYPE_NVIDIA_35", "CUSTOM_PCI_VENDOR_10DE",
            "CUSTOM_PCI_CLASS_0302"} <= gpu_p.traits
    assert os_traits.COMPUTE_MANAGED_PCI_DEVICE not in gpu_p.traits
    # nothing of a device lands on the root or a cell
    for name in (NODE, f"{NODE}_NUMA0", f"{NODE}_NUMA1"):
        assert not {t for t in host.record(name).traits
                    if t.startswith("CUSTOM_PCI") or t == "CUSTOM_FAST"}
    assert not host.update().diff  # steady


def test_uuids_are_the_same_on_every_run(make_host, tmp_path):
    first = make_host()
    first.update()
    uuids = {n: first.record(n).uuid for n in (GPU, NIC, ACC)}
    second = make_host(name="devhost2")
    second.update()
    assert {n: second.record(n).uuid for n in (GPU, NIC, ACC)} == uuids


def test_flat_mode_keeps_device_providers_under_the_root(make_host):
    host = make_host(nested=False)
    host.update()
    root = host.record(NODE).uuid
    assert all(host.record(n).parent_uuid == root for n in (GPU, NIC, ACC))


def test_evidence_names_the_node_device_element(make_host):
    host = make_host()
    host.update()
    report = host.driver.node_capabilities(NODE).traits
    vendor = report.results["CUSTOM_PCI_VENDOR_10DE"]
    assert vendor.state is TraitState.ASSERTED
    assert vendor.family == "pci vendor"
    (evidence,) = vendor.evidence
    assert evidence.document == "node device pci_0000_84_00_0"
    assert evidence.element == "capability[@type='pci']/vendor/@id"
    fast = report.results["CUSTOM_FAST"]
    assert fast.evidence[0].document == "[pci] device_spec #1"


def test_nova_defect_operator_trait_kept_vendor_trait_follows_the_device(
        make_host):
    """Nova replaces a PCI provider's whole trait set (an operator's
    trait is wiped) and never removes what it added: here the operator's
    trait stays across cycles and the old vendor's trait goes when the
    device is swapped for another vendor's."""
    host = make_host()
    host.update()
    host.tracker.tree.add_traits(ACC, "CUSTOM_RACK_7")
    host.update()
    assert "CUSTOM_RACK_7" in host.record(ACC).traits
    host.devices([gpu("0000:84:00.0", numa=1),
                  *sriov_nic("0000:3b:00.0", 4, numa=0),
                  pci_device("0000:d8:00.0", 0x1002, 0x71c4,
                             class_id=0x030000)])
    host.update()
    traits = host.record(ACC).traits
    assert "CUSTOM_RACK_7" in traits
    assert "CUSTOM_PCI_VENDOR_1002" in traits
    assert "CUSTOM_PCI_VENDOR_15B3" not in traits
    assert "CUSTOM_PCI_PRODUCT_15B3_101B" not in traits
    assert set(host.record(ACC).inventory) == {"CUSTOM_PCI_1002_71C4"}


def test_nova_defect_vanished_gpu_provider_is_deleted(make_host, caplog):
    """Nova never deletes a vanished GPU's provider."""
    host = make_host()
    host.update()
    host.devices(devices()[1:])
    with caplog.at_level(logging.INFO):
        result = host.update()
    assert not host.exists(GPU)
    assert len(result.diff.deleted) == 1
    assert host.exists(NIC) and host.exists(ACC)


def test_gone_while_allocated_stays_reserved_then_goes(make_host, caplog):
    host = make_host()
    host.update()
    host.tracker.tree.add_traits(GPU, "CUSTOM_OPERATOR")
    host.use(GPU, orc.VGPU, 3)
    host.devices(devices()[1:])
    with caplog.at_level(logging.WARNING):
        host.update()
        host.update()
    gpu_p = host.record(GPU)
    inventory = gpu_p.inventory[orc.VGPU]
    assert (inventory.total, inventory.reserved) == (16, 16)
    assert {MISSING, "CUSTOM_OPERATOR", "CUSTOM_MDEV_TYPE_NVIDIA_35"} <= \
        gpu_p.traits
    lines = [r for r in caplog.records if GPU in r.getMessage()
             and "allocated" in r.getMessage()]
    assert len(lines) == 1  # one log line, not one per cycle
    host.usage.clear()  # the last allocation went
    host.update()
    assert not host.exists(GPU)


def test_unlisted_while_allocated_stays_then_goes(make_host, tmp_path):
    host = make_host()
    host.update()
    host.use(ACC, "CUSTOM_PCI_15B3_101B", 1)
    # the operator drops the accelerator's rule and restarts the driver
    path = tmp_path / "restarted.conf"
    path.write_text(CONF.replace(
        'device_spec = {"address": "0000:d8:00.0"}\n', ""))
    host.driver = host.tracker.driver = LibvirtDriver(
        conf=make_conf(config_files=[path]), uri=host.fake.uri,
        disk_gb=None, device_usage=host.used)
    host.driver.init_host(NODE)
    host.update()
    kept = host.record(ACC)
    assert MISSING in kept.traits
    inventory = kept.inventory["CUSTOM_PCI_15B3_101B"]
    assert (inventory.total, inventory.reserved) == (1, 1)
    host.usage.clear()
    host.update()
    assert not host.exists(ACC) and host.exists(GPU)


def test_retyped_while_allocated_keeps_the_old_inventory(make_host):
    host = make_host()
    host.update()
    host.use(GPU, orc.VGPU, 2)
    host.devices([gpu("0000:84:00.0", numa=1, class_id=0x120000),
                  *devices()[1:]])
    host.update()
    gpu_p = host.record(GPU)
    assert set(gpu_p.inventory) == {orc.VGPU}
    assert gpu_p.inventory[orc.VGPU].reserved == 16
    assert MISSING in gpu_p.traits
    host.usage.clear()
    host.update()
    assert set(host.record(GPU).inventory) == {"CUSTOM_MDEV_NVIDIA_35"}
    assert MISSING not in host.record(GPU).traits


def test_total_never_below_what_is_used(make_host):
    host = make_host()
    host.update()
    host.use(GPU, orc.VGPU, 10)
    host.devices([gpu("0000:84:00.0", numa=1,
                      types=(MdevType("nvidia-35", None, 4),)),
                  *devices()[1:]])
    host.update()
    inventory = host.record(GPU).inventory[orc.VGPU]
    assert (inventory.total, inventory.reserved) == (10, 6)


def test_existing_mdevs_count_in_the_total(make_host):
    host = make_host([gpu("0000:84:00.0", numa=1,
                          types=(MdevType("nvidia-35", None, 15),)),
                      mdev(U1, "nvidia-35", "0000:84:00.0")])
    host.update()
    assert host.record(GPU).inventory[orc.VGPU].total == 16


@pytest.mark.parametrize("failure", ["listing", "one document"])
def test_nova_defect_a_listing_error_is_not_no_device(
        make_host, fakelibvirt, failure):
    """Nova counts a libvirt error while listing devices as "no device";
    here devices are unknown — also when the listing fails half-way: no
    provider created, changed or removed, and their traits stay."""
    host = make_host()
    host.update()
    host.tracker.tree.add_traits(GPU, "CUSTOM_OPERATOR")
    before = {n: host.record(n) for n in (GPU, NIC, ACC)}
    host.devices(devices()[1:])  # the GPU is gone, but we cannot tell
    if failure == "listing":
        fakelibvirt.fail("listAllDevices", repeat=True,
                         message="nodedev driver gone")
    elif _FAULTS_PER_DEVICE:  # the listing fails half-way
        fakelibvirt.fail("nodeDevice.XMLDesc", on_call=3, repeat=True,
                         message="nodedev driver gone")
    else:  # the listing fails half-way: one document unreadable
        docs = dict(host.fake.documents.node_devices)
        docs["pci_0000_3c_00_1"] = (
            "<device><name>pci_0000_3c_00_1</name><capability type='pci'>"
            "<domain>0</domain><bus>60</bus><slot>0</slot><function>1"
            "</function><product id='nodedev driver gone'/>"
            "<vendor id='0x8086'/></capability></device>")
        host.fake.documents = dataclasses.replace(
            host.fake.documents, node_devices=MappingProxyType(docs))
    host.update()
    host.update()
    for name, record in before.items():
        now = host.record(name)
        assert now.traits == record.traits | (
            {"CUSTOM_OPERATOR"} if name == GPU else set())
        assert now.inventory == record.inventory
    facts = host.driver.node_capabilities(NODE).facts
    assert "nodedev driver gone" in str(facts["devices"])
    fakelibvirt.GLOBAL_FAULTS.clear()
    host.devices(devices()[1:])
    host.update()
    assert not host.exists(GPU)  # known again: now it goes


@pytest.mark.parametrize("allocated", [False, True])
def test_a_device_gaining_a_numa_node_moves_under_its_cell(
        make_host, allocated):
    """Same uuid under the cell: the sync re-parents it, allocations
    and all (tests/functional/placement/test_placement_devices.py)."""
    host = make_host()
    host.update()
    before = host.record(ACC)
    assert before.parent_uuid == host.record(NODE).uuid
    if allocated:
        host.use(ACC, "CUSTOM_PCI_15B3_101B", 1)
    host.tracker.tree.add_traits(ACC, "CUSTOM_OPERATOR")
    host.devices([*devices()[:-1], pci_device(
        "0000:d8:00.0", 0x15b3, 0x101b, class_id=0x120000, numa_node=1)])
    host.update()
    moved = host.record(ACC)
    assert moved.parent_uuid == host.record(f"{NODE}_NUMA1").uuid
    assert moved.uuid == before.uuid == child_uuid(
        host.record(NODE).uuid, ACC)
    assert moved.inventory == before.inventory
    assert moved.traits == before.traits | {"CUSTOM_OPERATOR"}
    assert MISSING not in moved.traits


def test_a_restarted_tracker_recognises_a_device_provider_under_a_cell(
        make_host, tmp_path):
    host = make_host()
    host.update()
    host.tracker.tree.add_traits(GPU, "CUSTOM_OPERATOR")
    again = ResourceTracker(host.driver, state_dir=tmp_path / "state")
    again.tree.populate_from_iterable(
        [{"uuid": r.uuid, "name": r.name, "parent_provider_uuid":
          r.parent_uuid, "generation": 1, "traits": sorted(r.traits),
          "inventories": {rc: dict(inv.items()) if hasattr(inv, "items")
                          else inv for rc, inv in r.inventory.items()}}
         for r in (host.tracker.tree.record(u) for u in
                   host.tracker.tree.get_provider_uuids(NODE))])
    again.update_all()
    traits = again.tree.record(GPU).traits
    assert "CUSTOM_OPERATOR" in traits  # foreign, kept
    assert "CUSTOM_MDEV_TYPE_NVIDIA_35" in traits  # ours, still reconciled
    host.devices(devices()[1:])
    again.update_all()
    assert not again.tree.exists(GPU)


def test_a_provider_name_past_200_characters_is_refused(make_host):
    node = "n" * 185
    with pytest.raises(DriverError) as info:
        host = make_host(node=node)
        host.update()
    message = str(info.value)
    assert "past Placement's 200" in message and "device_spec #" in message


def test_conflicting_rules_fail_the_update_naming_both(make_host):
    host = make_host(conf=CONF + '\n[pci]\ndevice_spec = {"vendor_id": '
                     '"10de"}\n')
    with pytest.raises(DriverError, match="sold twice"):
        host.update()


def test_nova_defect_non_pci_mdev_parents_become_providers(
        make_host, corpus_dir):
    """Nova crashes on s390's AP matrix and CSS parents (no PCI
    address); here they are providers named from their libvirt name."""
    parents = []
    for name in ("ap_matrix_mdev_types.xml", "css_0_0_fffe_mdev_types.xml"):
        xml = (corpus_dir / "nodedev" / name).read_text()
        parents.append(NodeDevice(
            xml.split("<name>")[1].split("</name>")[0], xml, ()))
    host = make_host(parents, conf="[devices]\nenabled_mdev_types = "
                     "vfio_ap-passthrough, vfio_ccw-io\n[mdev_vfio_ccw-io]\n"
                     "device_addresses = 0.0.fffe\n")
    host.update()
    ap, css = host.record(f"{NODE}_ap_matrix"), host.record(
        f"{NODE}_css_0_0_fffe")
    assert ap.inventory["CUSTOM_MDEV_VFIO_AP_PASSTHROUGH"].total == 65536
    assert css.inventory["CUSTOM_MDEV_VFIO_CCW_IO"].total == 1
    assert "CUSTOM_MDEV_TYPE_VFIO_CCW_IO" in css.traits
    assert ap.parent_uuid == host.record(NODE).uuid


def test_nova_defect_max_instances_keeps_every_parent_provider(make_host):
    """Nova deletes the providers of parents past max_instances (with
    whatever is allocated on them); here the total is capped."""
    host = make_host(
        [gpu(f"0000:8{i}:00.0", numa=i % 2) for i in range(3)],
        conf="[devices]\nenabled_mdev_types = nvidia-35\n"
             "[mdev_nvidia-35]\nmax_instances = 20\n")
    host.update()
    totals = [host.record(f"{NODE}_pci_0000_8{i}_00_0").inventory
              for i in range(3)]
    assert [inv[orc.VGPU].total if inv else 0 for inv in totals] == [
        16, 4, 0]
    assert host.exists(f"{NODE}_pci_0000_82_00_0")


def test_nova_defect_the_mdev_type_trait_follows_the_active_type(
        make_host, tmp_path):
    """Nova leaves the type trait to operators and removes nothing; here
    a parent re-typed by the operator loses the old type's trait."""
    two = (MdevType("nvidia-35", None, 16), MdevType("nvidia-36", None, 8))
    host = make_host([gpu("0000:84:00.0", numa=1, types=two)])
    host.update()
    assert "CUSTOM_MDEV_TYPE_NVIDIA_35" in host.record(GPU).traits
    path = tmp_path / "retyped.conf"
    path.write_text("[devices]\nenabled_mdev_types = nvidia-36\n")
    host.driver = host.tracker.driver = LibvirtDriver(
        conf=make_conf(config_files=[path]), uri=host.fake.uri,
        disk_gb=None, device_usage=host.used)
    host.driver.init_host(NODE)
    host.update()
    gpu_p = host.record(GPU)
    assert "CUSTOM_MDEV_TYPE_NVIDIA_36" in gpu_p.traits
    assert "CUSTOM_MDEV_TYPE_NVIDIA_35" not in gpu_p.traits
    assert gpu_p.inventory[orc.VGPU].total == 8


def test_when_allocations_cannot_be_known_nothing_is_removed(make_host):
    """Fail safe: a gone or re-typed device whose allocations cannot be
    read keeps its provider, reserved and marked, until they can."""
    host = make_host()
    host.update()
    host.unreachable = True
    host.devices([gpu("0000:84:00.0", numa=1, class_id=0x120000),
                  *sriov_nic("0000:3b:00.0", 4, numa=0)])
    host.update()
    for name in (GPU, ACC):  # re-typed, gone
        kept = host.record(name)
        assert MISSING in kept.traits
        assert all(inv.reserved == inv.total
                   for inv in kept.inventory.values())
    assert orc.VGPU in host.record(GPU).inventory
    host.unreachable = False
    host.update()
    assert not host.exists(ACC)
    assert set(host.record(GPU).inventory) == {"CUSTOM_MDEV_NVIDIA_35"}


def test_a_switch_to_flat_keeps_an_allocated_vanished_device_provider(
        make_host, tmp_path):
    """The cells go; a device provider under one, kept for its
    allocations, moves under the root with its traits and reservation
    rather than going with its cell."""
    host = make_host()
    host.update()
    host.use(GPU, orc.VGPU, 2)
    host.tracker.tree.add_traits(GPU, "CUSTOM_OPERATOR")
    host.devices(devices()[1:])
    host.update()
    path = tmp_path / "flat.conf"
    path.write_text(CONF)
    host.driver = host.tracker.driver = LibvirtDriver(
        conf=make_conf(config_files=[path]), uri=host.fake.uri,
        disk_gb=None, nested=False, device_usage=host.used)
    host.driver.init_host(NODE)
    host.update()
    kept = host.record(GPU)
    assert kept.parent_uuid == host.record(NODE).uuid
    assert {MISSING, "CUSTOM_OPERATOR"} <= kept.traits
    assert kept.inventory[orc.VGPU].reserved == kept.inventory[orc.VGPU].total
    assert not host.exists(f"{NODE}_NUMA1")
