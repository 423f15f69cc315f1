"""Device providers from this machine's real PCI functions, read through
a private node-device daemon (qemu:///embed has no node-device API),
with sysfs as the independent witness of what exists."""

from __future__ import annotations

import pathlib

import pytest

from virtdriver.conf.options import make_conf
from virtdriver.drivers.libvirt.driver import LibvirtDriver
from virtdriver.resource_tracker.tracker import ResourceTracker

pytestmark = pytest.mark.real
SYSFS = pathlib.Path("/sys/bus/pci/devices")


def functions() -> dict[str, tuple[str, str]]:
    found = {}
    for path in sorted(SYSFS.iterdir()) if SYSFS.is_dir() else ():
        found[path.name] = ((path / "vendor").read_text().strip()[2:],
                            (path / "device").read_text().strip()[2:])
    return found


def suffix(address: str) -> str:
    return "pci_" + address.replace(":", "_").replace(".", "_")


@pytest.fixture
def tracker_for(embed_uri, nodedev_daemon, tmp_path):
    def make(specs: list[str]) -> ResourceTracker:
        path = tmp_path / "virtdriver.conf"
        path.write_text(f"[libvirt]\nnodedev_uri = {nodedev_daemon.uri}\n"
                        "[pci]\n" + "".join(f"device_spec = {s}\n"
                                            for s in specs))
        driver = LibvirtDriver(conf=make_conf(config_files=[path]),
                               uri=embed_uri, disk_gb=None)
        driver.init_host("realhost")
        return ResourceTracker(driver, state_dir=tmp_path / "state")
    return make


def test_listed_real_functions_become_providers_and_no_other(tracker_for):
    seen = functions()
    if not seen:
        pytest.skip(f"this machine shows no PCI function in {SYSFS}")
    address, (vendor, product) = sorted(seen.items())[-1]
    tracker = tracker_for([f'{{"vendor_id": "{vendor}", "product_id": '
                           f'"{product}"}}'])
    tracker.update_all()
    names = {tracker.tree.record(u).name
             for u in tracker.tree.get_provider_uuids("realhost")}
    listed = {a for a, ids in seen.items() if ids == (vendor, product)}
    devices = {n for n in names if "_pci_" in n}
    assert devices == {f"realhost_{suffix(a)}" for a in listed}
    record = tracker.tree.record(f"realhost_{suffix(address)}")
    rc = f"CUSTOM_PCI_{vendor.upper()}_{product.upper()}"
    assert record.inventory[rc].total == 1
    assert f"CUSTOM_PCI_VENDOR_{vendor.upper()}" in record.traits


def test_a_rule_by_address_glob_lists_exactly_that_slot(tracker_for):
    seen = functions()
    if len(seen) < 2:
        pytest.skip("needs two PCI functions")
    address = sorted(seen)[1]
    domain, bus, rest = address.split(":")
    tracker = tracker_for([f'{{"address": "*:{bus}:{rest.split(".")[0]}.*"}}'])
    tracker.update_all()
    devices = {tracker.tree.record(u).name
               for u in tracker.tree.get_provider_uuids("realhost")
               if "_pci_" in tracker.tree.record(u).name}
    expected = {f"realhost_{suffix(a)}" for a in seen
                if a.split(":")[1:] and a.split(":")[1] == bus
                and a.split(":")[2].split(".")[0] == rest.split(".")[0]}
    assert devices == expected and devices


def test_real_libvirt_takes_the_node_device_callbacks(nodedev_daemon):
    """The watch registers on a real node-device connection: a reading
    is then kept until an event (or max_age)."""
    import libvirt

    from virtdriver.capabilities.devices.model import HostDevices
    from virtdriver.drivers.libvirt.connection import ensure_event_loop
    from virtdriver.drivers.libvirt.device_watch import DeviceWatch

    ensure_event_loop()
    conn = libvirt.openReadOnly(nodedev_daemon.uri)
    watch = DeviceWatch()
    try:
        assert watch.needs_read(conn, nodedev_daemon.uri, None)
        watch.reading()
        devices = HostDevices.build(source=nodedev_daemon.uri)
        assert not watch.needs_read(conn, nodedev_daemon.uri, devices)
    finally:
        watch.close()
        conn.close()
