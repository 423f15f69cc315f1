"""fakelibvirt's node devices agree with real libvirt where both answer.

* ``test:///<file>``: libvirt's test driver reads ``<device>`` elements of
  a ``<node>`` file, so the same corpus documents are fed to both and every
  listing, filter, count, parent, capability and document is compared.
* A private ``libvirtd`` holding only the node device driver (the recipe
  in ``../shared/recipes/nodedev-daemon.md``; no systemd, its own socket):
  what it lists for this machine is replayed by fakelibvirt and compared
  call by call, errors included; with a stand-in ``mdevctl`` on its
  ``PATH`` (this machine has none) it also defines an mdev, so libvirt's
  own naming and defined-mdev document are compared with the fake's.
"""

from __future__ import annotations

import contextlib
import dataclasses
import glob
import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from pathlib import Path

import libvirt
import pytest
from lxml import etree

from tests.corpus import CORPUS
from virtdriver import fakelibvirt as fake
from virtdriver.drivers.libvirt import connection
from virtdriver.fakelibvirt.builders import load_node_devices
from virtdriver.fakelibvirt.documents import HostDocuments
from virtdriver.fakelibvirt.nodedev import CAPABILITY_FLAGS, CAPABILITY_NAMES

pytestmark = pytest.mark.real

NODEDEV = CORPUS / "nodedev"
#: The real error class and the fake's (no swap here: both side by side).
ERRORS = (libvirt.libvirtError, fake.libvirtError)
#: Corpus documents libvirt 9.0's test driver serves changed, and why.
#: The fake serves documents as given, as the node device driver serves
#: what sysfs says; these differences are the test driver's formatter.
REFORMATTED = {
    "storage_serial_3600c0ff000d7a2a5d463ff4902000000": "drops block counts",
    "storage_serial_SATA_HTS721010G9SA00_MPCZ12Y0GNGWSE": "drops block counts",
    "scsi_host12": "re-reads max_vports as 0",
    "pci_0000_00_19_0": "drops <driver>",
    # an mdev with no <iommuGroup> is written with group 0
    "mdev_cc000052_9b13_9b13_9b13_cc23009b1326": "adds iommuGroup 0",
    "mdev_d069d019_36ea_4111_8f0a_8c9a70e21366": "adds iommuGroup 0",
    "mdev_d2441d39_495e_4243_ad9f_beb3f14c23d9": "adds iommuGroup 0",
    "mdev_fedc4916_1ca8_49ac_b176_871d16c13076": "adds iommuGroup 0",
    # libvirt computes <parent_addr> from the parent device, which is not
    # on this test host, so it drops the one in the document
    "mdev_200f228a_c80a_4d50_bfb7_f5a0e4e34045_0000_00_02_0": "drops <parent_addr>",
    "mdev_de807ffc_1923_4d5f_b6c9_b20ecebc6d4b_0000_00_02_0": "drops <parent_addr>",
    "mdev_435722ea_5f43_468a_874f_da34f1217f13_0000_00_02_0": "drops <parent_addr>",
    "mdev_783e6dbb_ea0e_411f_94e2_717eaad438bf_matrix": "drops <parent_addr>",
    "mdev_cc000052_9b13_9b13_9b13_cc23009b1326_0_0_0052": "drops <parent_addr>",
}


@pytest.fixture(autouse=True)
def quiet_libvirt():
    libvirt.registerErrorHandler(lambda _ctx, _err: None, None)


def _canonical(xml: str) -> bytes:
    parser = etree.XMLParser(remove_blank_text=True)
    return etree.tostring(etree.fromstring(xml.encode(), parser),
                          method="c14n")


def _corpus_host():
    """The first device of each name in the corpus, ``-invalid`` files
    left out (libvirt 9.0 still reads them; newer libvirt and the fake's
    loader refuse them)."""
    devices = {}
    for path in sorted(NODEDEV.glob("*.xml")):
        if path.name.endswith("-invalid.xml"):
            continue
        for device in load_node_devices(path):
            devices.setdefault(device.name, device)
    return devices


@pytest.fixture(scope="module")
def both(tmp_path_factory):
    if not NODEDEV.is_dir():
        pytest.skip(f"no node device corpus at {NODEDEV}")
    devices = _corpus_host()
    node = tmp_path_factory.mktemp("testdriver") / "node.xml"
    node.write_text("<node>\n" + "".join(d.xml for d in devices.values())
                    + "</node>\n")
    real = libvirt.open(f"test://{node}")
    served = fake.connection_for(HostDocuments(
        node_devices={n: d.xml for n, d in devices.items()}))
    yield real, served
    real.close()


def test_same_devices_parents_and_top_level_caps(both):
    real, served = both
    real_devices = {d.name(): d for d in real.listAllDevices(0)}
    fake_devices = {d.name(): d for d in served.listAllDevices(0)}
    assert len(fake_devices) > 40
    assert sorted(real_devices) == sorted(fake_devices)
    for name, device in real_devices.items():
        twin = fake_devices[name]
        assert twin.parent() == device.parent(), name
        # test:/// lists only top-level capabilities; the node device
        # driver (and the fake) add the nested ones after them
        top = device.listCaps()
        assert twin.listCaps()[:len(top)] == top, name


def test_same_filtering_by_every_capability(both):
    real, served = both
    for flag in CAPABILITY_FLAGS:
        want = sorted(d.name() for d in real.listAllDevices(flag))
        assert sorted(d.name() for d in served.listAllDevices(flag)) == \
            want, CAPABILITY_FLAGS[flag]
    for cap in [None, *sorted(CAPABILITY_NAMES), "bogus", "", "vport_ops"]:
        assert sorted(served.listDevices(cap, 0)) == \
            sorted(real.listDevices(cap, 0)), cap
        assert served.numOfDevices(cap, 0) == real.numOfDevices(cap, 0), cap


def test_same_documents_but_the_test_drivers_reformatting(both):
    real, served = both
    differ = set()
    for device in real.listAllDevices(0):
        mine = served.nodeDeviceLookupByName(device.name()).XMLDesc(0)
        if _canonical(mine) != _canonical(device.XMLDesc(0)):
            differ.add(device.name())
    assert differ == set(REFORMATTED)


def test_same_lookup_and_flag_errors(both):
    real, served = both

    def error(call, *args):
        with pytest.raises(ERRORS) as caught:
            call(*args)
        return caught.value.get_error_code(), caught.value.get_error_message()

    assert error(served.nodeDeviceLookupByName, "nope") == \
        error(real.nodeDeviceLookupByName, "nope")
    # test:/// says testNodeNumOfDevices where the daemon says
    # nodeNumOfDevices: compare codes here, words in the daemon test
    assert error(served.listDevices, None, 1)[0] == \
        error(real.listDevices, None, 1)[0]


# -- the private node device daemon ------------------------------------------------

def _driver_module() -> Path | None:
    for pattern in ("/usr/lib/*/libvirt/connection-driver/"
                    "libvirt_driver_nodedev.so",
                    "/usr/lib*/libvirt/connection-driver/"
                    "libvirt_driver_nodedev.so"):
        found = sorted(glob.glob(pattern))
        if found:
            return Path(found[0])
    return None


MDEVCTL = """#!/bin/sh
# A stand-in for mdevctl: libvirt asks it to list and to define; no other
# command is needed here.
case "$1" in
  list) echo "[]" ;;
  define) cat > /dev/null ;;
  *) echo "not available in this test" >&2; exit 1 ;;
esac
"""


@pytest.fixture(scope="module")
def daemon(in_ci):
    libvirtd, module = shutil.which("libvirtd"), _driver_module()
    if libvirtd is None or module is None or os.geteuid() != 0:
        message = ("a private node device daemon needs root, `libvirtd` and "
                   "libvirt_driver_nodedev.so (Debian: libvirt-daemon)")
        if in_ci:
            pytest.fail(message)
        pytest.skip(message)
    work = Path(tempfile.mkdtemp(prefix="virtdriver-nodedev-"))
    for sub in ("run", "drv", "log", "bin"):
        (work / sub).mkdir(mode=0o700)
    (work / "drv" / module.name).symlink_to(module)
    mdevctl = work / "bin" / "mdevctl"
    mdevctl.write_text(MDEVCTL)
    mdevctl.chmod(0o700)
    (work / "libvirtd.conf").write_text(
        f'unix_sock_dir = "{work}/run"\nlisten_tls = 0\nlisten_tcp = 0\n'
        'auth_unix_ro = "none"\nauth_unix_rw = "none"\n'
        f'log_outputs = "1:file:{work}/log/libvirtd.log"\n')
    env = dict(os.environ, LIBVIRT_DRIVER_DIR=str(work / "drv"),
               PATH=f"{work}/bin:{os.environ.get('PATH', '/usr/bin:/bin')}")
    subprocess.run([libvirtd, "--daemon", "--config",
                    str(work / "libvirtd.conf"), "--pid-file",
                    str(work / "libvirtd.pid")], env=env, check=True,
                   timeout=60)
    socket = work / "run" / "libvirt-sock"
    deadline = time.monotonic() + 60
    while not socket.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    try:
        yield f"nodedev:///system?socket={socket}"
    finally:
        with contextlib.suppress(OSError, ValueError):
            os.kill(int((work / "libvirtd.pid").read_text()), signal.SIGTERM)
        shutil.rmtree(work, ignore_errors=True)


@pytest.fixture(scope="module")
def replayed(daemon):
    connection.ensure_event_loop()     # before opening, for the events
    real = libvirt.open(daemon)
    documents = HostDocuments(node_devices={
        d.name(): d.XMLDesc(0) for d in real.listAllDevices(0)})
    yield real, fake.connection_for(documents)
    real.close()


def _outcome(call, *args):
    try:
        result = call(*args)
    except ERRORS as exc:
        return ("error", exc.get_error_code(), exc.get_error_domain(),
                exc.get_error_message())
    if isinstance(result, list):
        return sorted(d if isinstance(d, str) else d.name() for d in result)
    return result


def test_the_daemon_and_its_replay_answer_alike(replayed):
    real, served = replayed
    assert served.numOfDevices(None, 0) == real.numOfDevices(None, 0) > 3
    calls = [("listDevices", cap, flags)
             for cap in (None, "pci", "net", "system", "mdev_types", "bogus")
             for flags in (0, 1)]
    calls += [("numOfDevices", cap, flags) for _, cap, flags in calls]
    calls += [("listAllDevices", flags) for flags in (
        0, *CAPABILITY_FLAGS, libvirt.VIR_CONNECT_LIST_NODE_DEVICES_ACTIVE,
        libvirt.VIR_CONNECT_LIST_NODE_DEVICES_INACTIVE, 1 << 29)]
    calls += [("nodeDeviceLookupByName", "nope"),
              ("nodeDeviceLookupSCSIHostByWWN", "2000000012341234",
               "1000000012341234", 0),
              ("nodeDeviceLookupSCSIHostByWWN", "1", "2", 1)]
    for name, *args in calls:
        assert _outcome(getattr(served, name), *args) == \
            _outcome(getattr(real, name), *args), (name, args)


def test_every_device_answers_alike(replayed):
    real, served = replayed
    for device in real.listAllDevices(0):
        twin = served.nodeDeviceLookupByName(device.name())
        for method, args in [("parent", ()), ("listCaps", ()),
                             ("numOfCaps", ()), ("isActive", ()),
                             ("isPersistent", ()), ("XMLDesc", (0,)),
                             ("XMLDesc", (1,)), ("create", (0,)),
                             ("create", (1,)), ("destroy", ()),
                             ("undefine", (0,)), ("undefine", (1,)),
                             ("autostart", ()), ("setAutostart", (1,))]:
            assert _outcome(getattr(twin, method), *args) == \
                _outcome(getattr(device, method), *args), (
                    device.name(), method, args)


def _listen(conn):
    seen, arrived = [], threading.Event()

    def callback(_conn, device, event, detail, _opaque):
        seen.append((device.name(), event, detail))
        arrived.set()

    callback_id = conn.nodeDeviceEventRegisterAny(
        None, libvirt.VIR_NODE_DEVICE_EVENT_ID_LIFECYCLE, callback, None)
    return seen, arrived, callback_id


def test_mdev_definition_names_documents_and_events_alike(
        replayed, fakelibvirt_event_loop):
    real, served = replayed
    real_events, real_arrived, real_id = _listen(real)
    fake_events, _, fake_id = _listen(served)
    assert real_id == fake_id
    parent = next(d.name() for d in real.listAllDevices(
        libvirt.VIR_CONNECT_LIST_NODE_DEVICES_CAP_PCI_DEV))
    request = (f"<device><parent>{parent}</parent><capability type='mdev'>"
               "<type id='i915-GVTg_V5_4'/><uuid>"
               "3627463d-b7f0-4fea-b468-f1da537d301b</uuid></capability>"
               "</device>")
    mine = served.nodeDeviceDefineXML(request, 0)
    theirs = real.nodeDeviceDefineXML(request, 0)
    assert mine.name() == theirs.name()
    assert mine.name().startswith(
        "mdev_3627463d_b7f0_4fea_b468_f1da537d301b_")
    for method in ("parent", "listCaps", "isActive", "isPersistent",
                   "autostart"):
        assert getattr(mine, method)() == getattr(theirs, method)(), method
    assert _canonical(mine.XMLDesc(0)) == _canonical(theirs.XMLDesc(0))
    inactive = libvirt.VIR_CONNECT_LIST_NODE_DEVICES_INACTIVE
    assert _outcome(served.listAllDevices, inactive) == \
        _outcome(real.listAllDevices, inactive) == [mine.name()]
    assert _outcome(mine.destroy) == _outcome(theirs.destroy)
    assert real_arrived.wait(60), "no event from the daemon in 60 s"
    assert fakelibvirt_event_loop(60), "fakelibvirt's loop never ran"
    assert fake_events == real_events == [
        (mine.name(), libvirt.VIR_NODE_DEVICE_EVENT_DEFINED, 0)]
    real.nodeDeviceEventDeregisterAny(real_id)
    served.nodeDeviceEventDeregisterAny(fake_id)
    for bad in ("pci_0000_99_00_0", "computer"):
        broken = request.replace(parent, bad)
        for call in ("nodeDeviceDefineXML", "nodeDeviceCreateXML"):
            assert _outcome(getattr(served, call), broken, 0) == \
                _outcome(getattr(real, call), broken, 0), (bad, call)
    for call in ("nodeDeviceDefineXML", "nodeDeviceCreateXML"):
        assert _outcome(getattr(served, call), request, 2) == \
            _outcome(getattr(real, call), request, 2), call
    not_mdev = "<device><parent>computer</parent><capability type='scsi'>" \
        "<host>0</host><bus>0</bus><target>0</target><lun>0</lun>" \
        "<type>disk</type></capability></device>"
    assert _outcome(served.nodeDeviceDefineXML, not_mdev, 0) == \
        _outcome(real.nodeDeviceDefineXML, not_mdev, 0)


def test_event_registration_alike(replayed, fakelibvirt_event_loop):
    real, served = replayed
    computer = {conn: conn.nodeDeviceLookupByName("computer")
                for conn in (real, served)}
    outcomes = {}
    for conn in (real, served):
        steps = []
        first = conn.nodeDeviceEventRegisterAny(
            None, libvirt.VIR_NODE_DEVICE_EVENT_ID_LIFECYCLE,
            lambda *a: None, None)
        steps.append(_outcome(conn.nodeDeviceEventRegisterAny, None,
                              libvirt.VIR_NODE_DEVICE_EVENT_ID_LIFECYCLE,
                              lambda *a: None, None))
        second = conn.nodeDeviceEventRegisterAny(
            computer[conn], libvirt.VIR_NODE_DEVICE_EVENT_ID_LIFECYCLE,
            lambda *a: None, None)
        steps.append(second - first)
        conn.nodeDeviceEventDeregisterAny(first)
        conn.nodeDeviceEventDeregisterAny(second)
        steps.append(_outcome(conn.nodeDeviceEventDeregisterAny, first))
        outcomes[conn] = steps
    assert outcomes[real] == outcomes[served]
    assert outcomes[real][0][:2] == ("error", libvirt.VIR_ERR_INVALID_ARG)


def test_documents_replay_is_lossless(replayed):
    real, served = replayed
    documents = dataclasses.replace(HostDocuments(), node_devices={
        d.name(): d.XMLDesc(0) for d in served.listAllDevices(0)})
    again = fake.connection_for(documents)
    assert [d.XMLDesc(0) for d in again.listAllDevices(0)] == \
        [d.XMLDesc(0) for d in served.listAllDevices(0)]
