"""The libvirt driver reads node devices once per update, and anything
short of a complete answer is unknown, never "no device".

fakelibvirt serves builder hosts; its fault injection and libvirt's own
error objects stand for what a real daemon does under bad luck (a call
refused, a device unplugged between the listing and its XML).
"""

from __future__ import annotations

import pytest

from virtdriver.capabilities.devices import (
    DevicesUnknown, HostDevices, PCIAddress)
from virtdriver.drivers.libvirt import devices as devices_module
from virtdriver.drivers.libvirt.devices import (
    NODEDEV_SESSION, DeviceParseCache, read_devices)
from virtdriver.drivers.libvirt.driver import LibvirtDriver
from virtdriver.fakelibvirt.builders import (
    HostBuilder, MdevType, host_documents, mdev_device, pci_device)
from virtdriver.fakelibvirt.documents import HostDocuments
from virtdriver.resource_tracker.provider_tree import ProviderTree

UUID = "4b20d080-1b54-4048-85b3-a6a62d165c01"


def documents(extra=()) -> HostDocuments:
    return host_documents(HostBuilder(cells=2), node_devices=[
        pci_device("0000:81:00.0", 0x10DE, 0x1EB8, numa_node=1,
                   class_id=0x030200, iommu_group=40,
                   mdev_types=[MdevType("nvidia-222", "GRID T4-1B", 15)]),
        pci_device("0000:82:00.0", 0x8086, 0x1521, numa_node=0,
                   virtual_functions=["0000:82:10.0", "0000:82:10.4"],
                   max_vfs=7),
        pci_device("0000:82:10.0", 0x8086, 0x1520,
                   physical_function="0000:82:00.0"),
        pci_device("0000:82:10.4", 0x8086, 0x1520,
                   physical_function="0000:82:00.0"),
        mdev_device(UUID, "nvidia-222", "0000:81:00.0"),
        *extra])


@pytest.fixture
def conn(fakelibvirt):
    return fakelibvirt.connection_for(documents())


def test_a_host_reads_into_the_model(conn):
    reading = read_devices(conn, "fake:///h")
    assert isinstance(reading, HostDevices)
    assert reading.source == "fake:///h"
    gpu = reading.by_address("0000:81:00.0")
    assert (gpu.vendor_id, gpu.numa_node, gpu.is_display) == ("10de", 1,
                                                              True)
    assert gpu.mdev_types[0].available_instances == 15
    pf = reading.by_address("0000:82:00.0")
    assert [str(vf.address) for vf in reading.virtual_functions_of(pf)] == [
        "0000:82:10.0", "0000:82:10.4"]
    assert reading.mdevs_of(gpu.name)[0].uuid == UUID
    assert reading.vanished == () and reading.ignored == ()


def test_a_refused_listing_is_unknown(fakelibvirt, conn):
    conn.fail("listAllDevices",
              error_code=fakelibvirt.VIR_ERR_INTERNAL_ERROR,
              message="udev is gone")
    reading = read_devices(conn, "fake:///h")
    assert isinstance(reading, DevicesUnknown)
    assert reading.reason.startswith("fake:///h listAllDevices(0) failed: ")
    assert "udev is gone" in reading.reason
    assert "VIR_ERR_INTERNAL_ERROR" in reading.reason


def no_api(fakelibvirt, conn):
    conn.fail("listAllDevices", error_code=fakelibvirt.VIR_ERR_NO_SUPPORT,
              repeat=True)


def test_no_node_device_api_reads_the_node_device_daemon(fakelibvirt, conn):
    no_api(fakelibvirt, conn)
    daemon = fakelibvirt.connection_for(documents())
    opened = []

    def opener(uri):
        opened.append(uri)
        return daemon

    reading = read_devices(conn, "qemu:///embed", opener=opener,
                           nodedev_uri="nodedev:///system?socket=/x")
    assert opened == ["nodedev:///system?socket=/x"]
    assert isinstance(reading, HostDevices)
    assert reading.source == "nodedev:///system?socket=/x"
    assert reading == read_devices(
        fakelibvirt.connection_for(documents()), "other")
    assert daemon.closed  # the daemon's connection is not left open


def test_no_node_device_api_and_no_daemon_is_unknown(fakelibvirt, conn):
    no_api(fakelibvirt, conn)

    def opener(uri):
        raise fakelibvirt.libvirtError("Failed to connect socket")

    reading = read_devices(conn, "qemu:///embed", opener=opener,
                           nodedev_uri="nodedev:///system")
    assert isinstance(reading, DevicesUnknown)
    assert "VIR_ERR_NO_SUPPORT" in reading.reason
    assert "nodedev:///system did not answer" in reading.reason
    assert "[libvirt] nodedev_uri" in reading.reason


def test_no_session_daemon_is_unknown_without_starting_one(
        fakelibvirt, conn, monkeypatch, tmp_path):
    # libvirt would autostart a session daemon; a reading must not.
    no_api(fakelibvirt, conn)
    monkeypatch.setattr(devices_module, "default_nodedev_uri",
                        lambda: NODEDEV_SESSION)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))

    def opener(uri):
        raise AssertionError(f"opened {uri}")

    reading = read_devices(conn, "qemu:///embed", opener=opener)
    assert isinstance(reading, DevicesUnknown)
    assert f"no socket at {tmp_path}/libvirt/virtnodedevd-sock" \
        in reading.reason


class Unplugging:
    """A connection whose device ``gone`` is unplugged after the listing
    (``again``: plugged back before the second look, as a udev remove/add
    pair would)."""

    def __init__(self, fakelibvirt, conn, gone: str, again: bool = False,
                 code: int | None = None):
        self.fake, self.conn, self.gone, self.again = (fakelibvirt, conn,
                                                       gone, again)
        self.code = code

    def listAllDevices(self, flags):  # noqa: N802
        return [Device(self, d) for d in self.conn.listAllDevices(flags)]

    def nodeDeviceLookupByName(self, name):  # noqa: N802
        if name == self.gone and not self.again:
            raise self.fake.errors.no_node_device(name)
        return self.conn.nodeDeviceLookupByName(name)


class Device:
    def __init__(self, owner, device):
        self.owner, self.device = owner, device

    def name(self):
        return self.device.name()

    def XMLDesc(self, flags):  # noqa: N802
        if self.device.name() == self.owner.gone:
            if self.owner.code is not None:
                raise self.owner.fake.errors.make_error(
                    self.owner.code, 0, "internal error: udev said no")
            raise self.owner.fake.errors.no_node_device(self.device.name())
        return self.device.XMLDesc(flags)


def test_a_device_gone_between_list_and_read_is_left_out_and_named(
        fakelibvirt, conn):
    reading = read_devices(Unplugging(fakelibvirt, conn, "pci_0000_82_10_4"),
                           "fake:///h")
    assert isinstance(reading, HostDevices)
    assert reading.vanished == ("pci_0000_82_10_4",)
    assert reading.by_address("0000:82:10.4") is None
    assert reading.by_address("0000:82:10.0") is not None


def test_a_device_back_by_the_second_look_is_read(fakelibvirt, conn):
    reading = read_devices(
        Unplugging(fakelibvirt, conn, "pci_0000_82_10_4", again=True),
        "fake:///h")
    assert reading.vanished == ()
    assert reading.by_address("0000:82:10.4") is not None


def test_any_other_error_on_one_device_makes_all_unknown(fakelibvirt, conn):
    reading = read_devices(
        Unplugging(fakelibvirt, conn, "pci_0000_82_10_4",
                   code=fakelibvirt.VIR_ERR_INTERNAL_ERROR), "fake:///h")
    assert isinstance(reading, DevicesUnknown)
    assert "reading node device pci_0000_82_10_4 failed" in reading.reason
    assert "the listing is incomplete" in reading.reason


def test_unusable_xml_from_libvirt_is_unknown(fakelibvirt):
    broken = pci_device("0000:83:00.0", 0x8086, 0x1520)
    broken = type(broken)(broken.name, broken.xml.replace(
        "<bus>131</bus>", "<bus>lots</bus>"), broken.capabilities,
        broken.parent)
    conn = fakelibvirt.connection_for(documents([broken]))
    reading = read_devices(conn, "fake:///h")
    assert isinstance(reading, DevicesUnknown)
    assert reading.reason.startswith("node device XML not usable: "
                                     "fake:///h node device pci_0000_83_00_0")
    assert "<bus>: text 'lots'" in reading.reason


def test_unchanged_documents_are_not_parsed_again(fakelibvirt, conn):
    cache = DeviceParseCache()
    first = read_devices(conn, "fake:///h", cache=cache)
    again = read_devices(conn, "fake:///h", cache=cache)
    assert all(a is b for a, b in zip(first.pci, again.pci, strict=True))
    assert len(cache) == 6     # the five above and the computer
    changed = fakelibvirt.connection_for(documents([
        pci_device("0000:83:00.0", 0x8086, 0x1520)]))
    third = read_devices(changed, "fake:///h", cache=cache)
    assert third.by_address("0000:83:00.0") is not None
    assert third.by_address("0000:81:00.0") is first.by_address(
        "0000:81:00.0")
    assert len(cache) == 7


@pytest.mark.parametrize("events", [False, True],
                         ids=["no node-device events", "events heard"])
def test_the_driver_reads_devices_once_per_update(fakelibvirt, request,
                                                  events):
    # Where the connection delivers node-device events (an event loop
    # runs, as with real libvirt), an update reads again only after one
    # (drivers/libvirt/device_watch.py); where the registration is
    # refused, every update reads.
    if events:
        request.getfixturevalue("fakelibvirt_event_loop")
    else:
        fakelibvirt.fail("nodeDeviceEventRegisterAny", repeat=True)
    host = fakelibvirt.register_host("devices1", documents())
    try:
        driver = LibvirtDriver(uri="fake:///devices1", disk_gb=None)
        driver.init_host("node")
        (conn,) = host.connections()
        assert conn.calls("listAllDevices") == 1  # the first reading
        for update in (1, 2, 3):
            driver.update_provider_tree(ProviderTree(), "node")
            assert conn.calls("listAllDevices") == (1 if events else update)
        driver.node_capabilities("node")  # not an update: no re-read
        assert conn.calls("listAllDevices") == (1 if events else 3)
        facts = driver.node_capabilities("node").facts["devices"]
        assert facts == {"known": True, "source": "fake:///devices1",
                         "pci_functions": 4, "mdev_parents": 1, "mdevs": 1,
                         "vanished": [], "ignored": []}
        assert driver.session.reading().devices.by_address(
            PCIAddress(0, 0x81, 0, 0)).numa_node == 1
    finally:
        fakelibvirt.unregister_host("devices1")


def test_report_says_why_devices_are_unknown(tmp_path, capsys):
    from virtdriver import cli
    from virtdriver.fakelibvirt.documents import RecordedError
    from virtdriver.fakelibvirt.snapshot import write_snapshot

    import dataclasses
    refused = dataclasses.replace(documents(), node_devices={},
                                  node_devices_error=RecordedError(
                                      9, 22, "no node-device daemon"))
    write_snapshot(tmp_path / "unknown", refused, "qemu:///embed")
    write_snapshot(tmp_path / "known", documents(), "qemu:///system")

    assert cli.main(["report", "--snapshot", str(tmp_path / "unknown")]) == 0
    out = capsys.readouterr().out
    assert "devices: unknown (" in out and "no node-device daemon" in out
    assert cli.main(["report", "--snapshot", str(tmp_path / "known")]) == 0
    assert "devices: 4 PCI functions, 1 mdev parents, 1 mdevs" in \
        capsys.readouterr().out


def test_a_hand_written_snapshot_has_unknown_devices_not_none(tmp_path,
                                                             capsys):
    from virtdriver import cli

    (tmp_path / "capabilities.xml").write_text(HostBuilder(cells=1).to_xml())
    assert cli.main(["report", "--snapshot", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "devices: unknown (" in out
    assert "a snapshot written by hand records no node devices" in out
