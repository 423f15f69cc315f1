"""The libvirt driver reads this machine's real PCI functions through a
private node-device daemon, and a snapshot of them replays identically.

sysfs (``/sys/bus/pci/devices``) is the independent witness: every PCI
function the kernel shows must be read, with its vendor, product and
class.  ``qemu:///embed`` has no node-device API, so the driver must fall
back to the daemon; without one, devices are unknown, never "none".
"""

from __future__ import annotations

import json
import pathlib

import libvirt
import pytest

from virtdriver import cli
from virtdriver.capabilities.devices import DevicesUnknown, HostDevices
from virtdriver.drivers.libvirt import connection
from virtdriver.drivers.libvirt.devices import read_devices

pytestmark = pytest.mark.real
SYSFS = pathlib.Path("/sys/bus/pci/devices")


def sysfs_functions() -> dict[str, tuple[str, str, int]]:
    """Address to (vendor, product, class) of every PCI function."""
    found = {}
    for path in sorted(SYSFS.iterdir()) if SYSFS.is_dir() else ():
        def read(name, path=path):
            return (path / name).read_text().strip()
        found[path.name] = (read("vendor")[2:], read("device")[2:],
                            int(read("class"), 16))
    return found


@pytest.fixture(scope="module")
def functions():
    found = sysfs_functions()
    if not found:
        pytest.skip(f"this machine shows no PCI function in {SYSFS}")
    return found


@pytest.fixture(scope="module")
def daemon_reading(nodedev_daemon):
    conn = libvirt.openReadOnly(nodedev_daemon.uri)
    try:
        return read_devices(conn, nodedev_daemon.uri)
    finally:
        conn.close()


@pytest.fixture(scope="module")
def embed_conn(embed_uri):
    conn, _ = connection.open_connection(embed_uri)
    yield conn
    conn.close()


def as_seen(reading: HostDevices) -> dict[str, tuple[str, str, int]]:
    return {str(d.address): (d.vendor_id, d.product_id, d.class_code)
            for d in reading.pci}


def test_the_daemon_lists_every_pci_function_sysfs_shows(daemon_reading,
                                                          functions):
    assert isinstance(daemon_reading, HostDevices), daemon_reading
    assert as_seen(daemon_reading) == functions
    for device in daemon_reading.pci:
        assert device.name == device.address.nova_suffix
        assert daemon_reading.by_address(str(device.address)) is device


def test_embed_has_no_node_device_api_so_the_driver_reads_the_daemon(
        embed_conn, embed_uri, nodedev_daemon, daemon_reading):
    with pytest.raises(libvirt.libvirtError) as refused:
        embed_conn.listAllDevices(0)
    assert refused.value.get_error_code() == libvirt.VIR_ERR_NO_SUPPORT

    reading = read_devices(embed_conn, embed_uri,
                           nodedev_uri=nodedev_daemon.uri)

    assert reading == daemon_reading
    assert reading.source == nodedev_daemon.uri


def test_embed_without_a_daemon_is_unknown_not_no_device(embed_conn,
                                                         embed_uri,
                                                         tmp_path):
    nowhere = f"nodedev:///system?socket={tmp_path}/no-daemon-sock"

    reading = read_devices(embed_conn, embed_uri, nodedev_uri=nowhere)

    assert isinstance(reading, DevicesUnknown)
    assert not reading.known
    assert "VIR_ERR_NO_SUPPORT" in reading.reason
    assert nowhere in reading.reason
    assert "nodedev_uri" in reading.reason  # what to do


def config_file(tmp_path, nodedev_uri) -> str:
    path = tmp_path / "virtdriver.conf"
    path.write_text(f"[libvirt]\nnodedev_uri = {nodedev_uri}\n")
    return str(path)


def test_host_command_says_what_it_read(embed_uri, nodedev_daemon, functions,
                                        tmp_path, capsys):
    conf = config_file(tmp_path, nodedev_daemon.uri)
    assert cli.main(["host", "--uri", embed_uri, "--config-file", conf,
                     "--format", "json"]) == 0
    devices = json.loads(capsys.readouterr().out)["devices"]
    assert devices["known"] is True
    assert devices["pci_functions"] == len(functions)
    assert devices["source"] == nodedev_daemon.uri

    assert cli.main(["host", "--uri", embed_uri, "--config-file", conf]) == 0
    assert (f"devices: {len(functions)} PCI functions, 0 mdev parents, "
            f"0 mdevs (from {nodedev_daemon.uri})") in capsys.readouterr().out


def test_host_command_says_why_devices_are_unknown(embed_uri, tmp_path,
                                                   capsys):
    nowhere = f"nodedev:///system?socket={tmp_path}/no-daemon-sock"
    conf = config_file(tmp_path, nowhere)
    assert cli.main(["host", "--uri", embed_uri, "--config-file", conf]) == 0
    out = capsys.readouterr().out
    assert "devices: unknown (" in out
    assert "no device provider is added or removed" in out


def test_a_snapshot_of_the_real_devices_replays_to_the_same_model(
        embed_uri, nodedev_daemon, daemon_reading, tmp_path, capsys):
    from virtdriver.fakelibvirt import use_fakelibvirt
    from virtdriver.fakelibvirt.snapshot import read_snapshot

    snapshot = tmp_path / "snap"
    conf = config_file(tmp_path, nodedev_daemon.uri)
    documents = read_snapshot(_record(embed_uri, conf, snapshot, capsys))
    assert documents.node_devices_error is None

    with use_fakelibvirt() as fake:
        conn = fake.connection_for(documents)
        replayed = read_devices(conn, "fake:///replay")

    assert replayed == daemon_reading
    assert replayed.pci, "the comparison is not vacuous"


def _record(embed_uri, conf, snapshot, capsys):
    assert cli.main(["snapshot", "--uri", embed_uri, "--config-file", conf,
                     "-o", str(snapshot)]) == 0
    assert "node device(s)" in capsys.readouterr().out
    return snapshot
