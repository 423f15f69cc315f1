"""The libvirt driver reads node devices again only on libvirt's
node-device events (fakelibvirt delivers them through its default event
loop, run here as a libvirt program runs libvirt's): steady updates list
nothing, a hot-unplug is seen at the next update once its event came."""

from __future__ import annotations

import pytest

from tests.device_hosts import gpu, set_devices, sriov_nic
from virtdriver.conf.options import make_conf
from virtdriver.drivers.libvirt.driver import LibvirtDriver
from virtdriver.fakelibvirt.builders import HostBuilder, host_documents
from virtdriver.fakelibvirt.connection import register_host, unregister_host
from virtdriver.resource_tracker.tracker import ResourceTracker

GPU = "cmp1_pci_0000_84_00_0"


@pytest.fixture
def host(fakelibvirt, fakelibvirt_event_loop, tmp_path):
    if not hasattr(fakelibvirt.virConnect, "nodeDeviceEventRegisterAny"):
        pytest.skip("this fakelibvirt sends no node-device events")
    conf = tmp_path / "virtdriver.conf"
    conf.write_text("[devices]\nenabled_mdev_types = nvidia-35\n")
    fake = register_host("watched", host_documents(
        host=HostBuilder(cells=2, cores=2),
        node_devices=[gpu("0000:84:00.0", numa=1),
                      *sriov_nic("0000:3b:00.0", 2)]))
    driver = LibvirtDriver(conf=make_conf(config_files=[conf]), uri=fake.uri,
                           disk_gb=None, device_usage=lambda uuid: {})
    driver.init_host("cmp1")
    tracker = ResourceTracker(driver, state_dir=tmp_path / "state")
    yield fake, tracker, fakelibvirt_event_loop
    driver.cleanup_host("cmp1")
    unregister_host(fake.name)


def listings(fakelibvirt):
    return fakelibvirt.GLOBAL_FAULTS.calls("listAllDevices")


def test_steady_updates_list_no_device(host, fakelibvirt):
    fake, tracker, _ = host
    tracker.update_all()
    tracker.update_all()  # the first one after init_host's reading
    before = listings(fakelibvirt)
    for _ in range(3):
        tracker.update_all()
    assert listings(fakelibvirt) == before
    assert tracker.tree.exists(GPU)


def test_a_hot_unplug_is_read_at_the_next_update(host, fakelibvirt):
    fake, tracker, drain = host
    tracker.update_all()
    tracker.update_all()
    before = listings(fakelibvirt)
    set_devices(fake, sriov_nic("0000:3b:00.0", 2))  # the GPU is pulled
    assert drain()       # its events reached the driver
    tracker.update_all()
    assert listings(fakelibvirt) == before + 1
    assert not tracker.tree.exists(GPU)
    tracker.update_all()
    assert listings(fakelibvirt) == before + 1  # steady again


def test_a_change_between_init_and_the_first_update_is_seen(host,
                                                            fakelibvirt):
    fake, tracker, drain = host
    set_devices(fake, sriov_nic("0000:3b:00.0", 2))  # before any update
    assert drain()
    tracker.update_all()
    assert not tracker.tree.exists(GPU)
