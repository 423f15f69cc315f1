"""fakelibvirt's mdev lifecycle and node device events, as libvirt's node
device driver (with mdevctl) behaves: create/define/start/stop/undefine,
``availableInstances`` going down and up, ``mdev_<uuid>_<parent address>``
names, the errors, and lifecycle events, also for a device unplugged or
replaced at runtime.

(The real driver cannot be made to create an mdev on this machine: no
mediated device parent, no mdevctl; the messages come from libvirt's
``node_device_driver.c`` and mdevctl's ``mdev.rs``.)
"""

from __future__ import annotations

import pytest
from lxml import etree

from virtdriver import fakelibvirt
from virtdriver.fakelibvirt import constants as c
from virtdriver.fakelibvirt.builders import (
    MdevType, ap_matrix_device, css_device, host_documents, pci_device)

#: Events come through fakelibvirt's event loop, run by a thread here as
#: a libvirt-python program runs libvirt's.
pytestmark = pytest.mark.usefixtures("fakelibvirt_event_loop")

UUID = "3627463d-b7f0-4fea-b468-f1da537d301b"
GPU = "pci_0000_00_02_0"
NIC = "pci_0000_81_00_0"


def _gpu(available: int = 2):
    return pci_device(
        "0000:00:02.0", 0x8086, 0x591b, class_id=0x030000,
        mdev_types=(MdevType("i915-GVTg_V5_4", "GVTg_V5_4", available),
                    MdevType("i915-GVTg_V5_8", "GVTg_V5_8", 0)))


def _conn(*extra, available: int = 2):
    documents = host_documents(node_devices=[
        _gpu(available), pci_device("0000:81:00.0", 0x8086, 0x10fb), *extra])
    return fakelibvirt.connection_for(documents)


def _request(uuid: str | None = UUID, parent: str | None = GPU,
             type_id: str = "i915-GVTg_V5_4") -> str:
    parent_el = f"<parent>{parent}</parent>" if parent else ""
    uuid_el = f"<uuid>{uuid}</uuid>" if uuid else ""
    return (f"<device>{parent_el}<capability type='mdev'>"
            f"<type id='{type_id}'/>{uuid_el}</capability></device>")


def _available(conn, type_id: str = "i915-GVTg_V5_4") -> int:
    root = etree.fromstring(conn.nodeDeviceLookupByName(GPU).XMLDesc(0))
    return int(root.findtext(
        f".//capability[@type='mdev_types']/type[@id='{type_id}']"
        "/availableInstances"))


def _err(call, *args):
    with pytest.raises(fakelibvirt.libvirtError) as caught:
        call(*args)
    return caught.value.err[:3]


def _delivered(seen):
    """``seen`` once every event so far has come through the loop."""
    assert fakelibvirt.event_loop.drain(60), "the event loop never ran"
    return seen


def _recorder(conn, device=None):
    seen = []
    conn.nodeDeviceEventRegisterAny(
        device, c.VIR_NODE_DEVICE_EVENT_ID_LIFECYCLE,
        lambda cn, dev, event, detail, opaque: seen.append(
            (cn is conn, dev.name(), event, detail, opaque)), "me")
    return seen


# -- create (transient) --------------------------------------------------------

def test_create_names_it_as_libvirt_and_takes_an_instance():
    conn = _conn()
    dev = conn.nodeDeviceCreateXML(_request(), 0)
    name = f"mdev_{UUID.replace('-', '_')}_0000_00_02_0"
    assert dev.name() == name
    assert dev.parent() == GPU
    assert (dev.isActive(), dev.isPersistent()) == (1, 0)
    assert dev.listCaps() == ["mdev"]
    root = etree.fromstring(dev.XMLDesc(0))
    assert root.findtext("capability/uuid") == UUID
    assert root.findtext("capability/parent_addr") == "0000:00:02.0"
    assert root.find("capability/type").get("id") == "i915-GVTg_V5_4"
    assert root.findtext("driver/name") == "vfio_mdev"
    assert _available(conn) == 1
    assert name in conn.listDevices("mdev", 0)
    assert [d.name() for d in conn.listAllDevices(
        c.VIR_CONNECT_LIST_NODE_DEVICES_CAP_MDEV)] == [name]


def test_the_last_instance_then_none_left():
    conn = _conn(available=1)
    conn.nodeDeviceCreateXML(_request(), 0)
    assert _available(conn) == 0
    assert _err(conn.nodeDeviceCreateXML,
                _request("d069d019-36ea-4111-8f0a-8c9a70e21366"), 0) == (
        c.VIR_ERR_INTERNAL_ERROR, c.VIR_FROM_NODEDEV,
        "internal error: Unable to start mediated device: No available "
        "instances of i915-GVTg_V5_4 on 0000:00:02.0")


def test_destroy_gives_the_instance_back_and_the_device_is_gone():
    conn = _conn()
    dev = conn.nodeDeviceCreateXML(_request(), 0)
    assert dev.destroy() == 0
    assert _available(conn) == 2
    assert _err(dev.XMLDesc, 0)[0] == c.VIR_ERR_NO_NODE_DEVICE
    assert dev.parent() is None       # libvirt-python: NULL -> None
    assert not conn.listDevices("mdev", 0)


def test_a_generated_uuid_when_none_is_given():
    conn = _conn()
    dev = conn.nodeDeviceCreateXML(_request(uuid=None), 0)
    uuid = etree.fromstring(dev.XMLDesc(0)).findtext("capability/uuid")
    assert dev.name() == f"mdev_{uuid.replace('-', '_')}_0000_00_02_0"


@pytest.mark.parametrize(("request_xml", "error"), [
    (_request(type_id="nvidia-35"),
     (c.VIR_ERR_INTERNAL_ERROR, "internal error: Unable to start mediated "
      "device: Parent 0000:00:02.0 does not support mdev type nvidia-35")),
    (_request(type_id="i915-GVTg_V5_8"),
     (c.VIR_ERR_INTERNAL_ERROR, "internal error: Unable to start mediated "
      "device: No available instances of i915-GVTg_V5_8 on 0000:00:02.0")),
    (_request(parent="pci_0000_09_00_0"),
     (c.VIR_ERR_CONFIG_UNSUPPORTED,
      "unsupported configuration: invalid parent device 'pci_0000_09_00_0'")),
    (_request(parent="computer"),
     (c.VIR_ERR_PARSE_FAILED, "failed to parse configuration file Unable "
      "to find address for parent device 'computer'")),
    (_request(parent=NIC),
     (c.VIR_ERR_INTERNAL_ERROR, "internal error: Unable to start mediated "
      "device: Parent 0000:81:00.0 is not currently registered for mdev "
      "support")),
    (_request(parent=None),
     (c.VIR_ERR_CONFIG_UNSUPPORTED,
      "unsupported configuration: missing parent device")),
    ("<device><parent>computer</parent><capability type='scsi'/></device>",
     (c.VIR_ERR_CONFIG_UNSUPPORTED,
      "unsupported configuration: Unsupported device type")),
], ids=["unknown-type", "no-instance", "no-parent-device",
        "parent-without-address", "not-a-parent",
        "no-parent", "not-mdev"])
def test_create_refusals(request_xml, error):
    conn = _conn()
    before = conn.listDevices(None, 0)
    assert _err(conn.nodeDeviceCreateXML, request_xml, 0)[::2] == error
    assert conn.listDevices(None, 0) == before
    assert _available(conn) == 2


def test_malformed_xml_and_bad_flags():
    conn = _conn()
    code, domain, message = _err(conn.nodeDeviceCreateXML, "<device", 0)
    assert (code, domain) == (c.VIR_ERR_XML_DETAIL, c.VIR_FROM_NODEDEV)
    assert message.startswith("(node_device_definition):1: ")
    assert _err(conn.nodeDeviceCreateXML, _request(), 4) == (
        c.VIR_ERR_INVALID_ARG, c.VIR_FROM_NODEDEV,
        "unsupported flags (0x4) in function nodeDeviceCreateXML")


def test_one_uuid_under_two_parents_is_two_devices():
    other = pci_device("0000:00:03.0", 0x8086, 0x591b, class_id=0x030000,
                       mdev_types=(MdevType("i915-GVTg_V5_4", None, 1),))
    conn = _conn(other)
    first = conn.nodeDeviceCreateXML(_request(), 0)
    second = conn.nodeDeviceCreateXML(_request(parent="pci_0000_00_03_0"), 0)
    assert first.name() != second.name()
    assert second.name().endswith("_0000_00_03_0")
    assert _err(conn.nodeDeviceCreateXML, _request(), 0)[2] == (
        "internal error: Unable to start mediated device: Device already "
        "exists")


@pytest.mark.parametrize(("parent", "type_id", "suffix"), [
    ("css_0_0_0052", "vfio_ccw-io", "0_0_0052"),
    ("ap_matrix", "vfio_ap-passthrough", "matrix"),
])
def test_s390_parents_name_as_libvirt(parent, type_id, suffix):
    conn = _conn(css_device(0, 0, 0x52, mdev_types=(
        MdevType("vfio_ccw-io", "I/O subchannel (Non-QDIO)", 1,
                 "vfio-ccw"),)), ap_matrix_device())
    dev = conn.nodeDeviceCreateXML(_request(parent=parent, type_id=type_id), 0)
    # as in libvirt's mdevctl-list-multiple.out.xml
    assert dev.name() == f"mdev_{UUID.replace('-', '_')}_{suffix}"
    assert dev.parent() == parent


# -- define / start / stop / undefine -------------------------------------------

def test_define_start_destroy_undefine():
    conn = _conn()
    seen = _recorder(conn)
    dev = conn.nodeDeviceDefineXML(_request(), 0)
    assert (dev.isActive(), dev.isPersistent()) == (0, 1)
    assert _available(conn) == 2                 # defined takes nothing
    assert [d.name() for d in conn.listAllDevices(
        c.VIR_CONNECT_LIST_NODE_DEVICES_INACTIVE)] == [dev.name()]
    assert dev.name() not in [d.name() for d in conn.listAllDevices(
        c.VIR_CONNECT_LIST_NODE_DEVICES_ACTIVE)]
    assert etree.fromstring(dev.XMLDesc(0)).find("path") is None

    assert dev.create(0) == 0
    assert (dev.isActive(), dev.isPersistent()) == (1, 1)
    assert _available(conn) == 1
    assert _err(dev.create, 0)[1:] == (
        c.VIR_FROM_NODEDEV,
        "Requested operation is not valid: Device is already active")

    assert dev.destroy() == 0
    assert (dev.isActive(), dev.isPersistent()) == (0, 1)   # still defined
    assert _available(conn) == 2
    assert _err(dev.destroy)[2] == (
        f"Requested operation is not valid: Device '{dev.name()}' is not "
        "active")

    assert dev.undefine(0) == 0
    assert _err(dev.isActive)[0] == c.VIR_ERR_NO_NODE_DEVICE
    assert [(e[1], e[2]) for e in _delivered(seen)] == [
        (dev.name(), c.VIR_NODE_DEVICE_EVENT_DEFINED),
        (dev.name(), c.VIR_NODE_DEVICE_EVENT_CREATED),
        (dev.name(), c.VIR_NODE_DEVICE_EVENT_DELETED),
        (dev.name(), c.VIR_NODE_DEVICE_EVENT_UNDEFINED)]
    assert all(e[0] and e[3] == 0 and e[4] == "me" for e in _delivered(seen))


def test_undefine_an_active_one_leaves_it_running_transient():
    conn = _conn()
    dev = conn.nodeDeviceDefineXML(_request(), 0)
    dev.create(0)
    dev.undefine(0)
    assert (dev.isActive(), dev.isPersistent()) == (1, 0)
    assert _err(dev.undefine, 0)[2] == (
        f"Requested operation is not valid: Node device '{dev.name()}' is "
        "not defined")
    dev.destroy()
    assert dev.name() not in conn.listDevices(None, 0)


def test_autostart_only_for_defined_mdevs():
    conn = _conn()
    defined = conn.nodeDeviceDefineXML(_request(), 0)
    assert defined.autostart() == 0
    assert defined.setAutostart(1) == 0
    assert defined.autostart() == 1
    transient = conn.nodeDeviceCreateXML(
        _request("d069d019-36ea-4111-8f0a-8c9a70e21366"), 0)
    assert _err(transient.setAutostart, 1) == (
        c.VIR_ERR_OPERATION_INVALID, c.VIR_FROM_NODEDEV,
        "Requested operation is not valid: cannot set autostart for "
        "transient device")
    gpu = conn.nodeDeviceLookupByName(GPU)
    assert _err(gpu.setAutostart, 1)[::2] == (
        c.VIR_ERR_OPERATION_UNSUPPORTED,
        "Operation not supported: Unsupported device type")
    assert conn.nodeDeviceLookupByName("computer").autostart() == 1
    defined.create(0)
    defined.undefine(0)                  # running on, transient
    assert defined.autostart() == 0


def test_start_refused_when_no_instance_left():
    conn = _conn(available=1)
    defined = conn.nodeDeviceDefineXML(_request(), 0)
    conn.nodeDeviceCreateXML(
        _request("d069d019-36ea-4111-8f0a-8c9a70e21366"), 0)
    assert _err(defined.create, 0) == (
        c.VIR_ERR_INTERNAL_ERROR, c.VIR_FROM_NODEDEV,
        "internal error: Unable to create mediated device: No available "
        "instances of i915-GVTg_V5_4 on 0000:00:02.0")
    assert defined.isActive() == 0


@pytest.mark.parametrize("name", [GPU, "computer"])
def test_lifecycle_calls_on_devices_that_are_not_mdevs(name):
    dev = _conn().nodeDeviceLookupByName(name)
    assert _err(dev.create, 0)[2] == (
        "Requested operation is not valid: Device is already active")
    assert _err(dev.destroy)[2] == (
        "unsupported configuration: Unsupported device type")
    # computer is persistent, so it gets past the "not defined" check
    assert _err(dev.undefine, 0)[2] == (
        "unsupported configuration: Unsupported device type"
        if name == "computer" else
        f"Requested operation is not valid: Node device '{name}' is not "
        "defined")
    assert _err(dev.create, 1)[2] == (
        "unsupported flags (0x1) in function nodeDeviceCreate")


def test_every_connection_to_the_host_sees_the_change():
    conn = _conn()
    other = fakelibvirt.virConnect(conn.host)
    dev = conn.nodeDeviceCreateXML(_request(), 0)
    assert other.nodeDeviceLookupByName(dev.name()).isActive() == 1
    assert _available(other) == 1


# -- events ---------------------------------------------------------------------

def test_transient_create_and_destroy_events_and_device_filter():
    conn = _conn()
    every = _recorder(conn)
    only_nic = _recorder(conn, conn.nodeDeviceLookupByName(NIC))
    dev = conn.nodeDeviceCreateXML(_request(), 0)
    dev.destroy()
    assert [(e[1], e[2]) for e in _delivered(every)] == [
        (dev.name(), c.VIR_NODE_DEVICE_EVENT_CREATED),
        (dev.name(), c.VIR_NODE_DEVICE_EVENT_DELETED)]
    assert _delivered(only_nic) == []


def test_callback_ids_duplicates_and_deregister():
    conn = _conn()
    seen = []

    def register(device=None, event_id=c.VIR_NODE_DEVICE_EVENT_ID_LIFECYCLE):
        return conn.nodeDeviceEventRegisterAny(
            device, event_id, lambda *a: seen.append(a), None)

    assert register() == 0
    # as the daemon: one callback per event and device on a connection
    assert _err(register) == (
        c.VIR_ERR_INVALID_ARG, c.VIR_FROM_NONE,
        "invalid argument: event callback already tracked")
    assert register(conn.nodeDeviceLookupByName(GPU)) == 1
    assert register(None, c.VIR_NODE_DEVICE_EVENT_ID_UPDATE) == 2
    assert conn.nodeDeviceEventDeregisterAny(0) is None
    assert _err(conn.nodeDeviceEventDeregisterAny, 0) == (
        c.VIR_ERR_INVALID_ARG, c.VIR_FROM_NONE,
        "invalid argument: event callback id 0 not registered")
    assert register() == 3                       # ids are not reused
    conn.nodeDeviceCreateXML(_request(), 0)
    assert len(_delivered(seen)) == 1                        # the lifecycle one only
    assert _err(conn.nodeDeviceEventRegisterAny, None, 7,
                lambda *a: None, None)[0] == c.VIR_ERR_INVALID_ARG


@pytest.mark.parametrize("lose", ["close", "drop"])
def test_a_closed_or_dropped_connection_gets_no_events(lose):
    conn = _conn()
    seen = _recorder(conn)
    other = fakelibvirt.virConnect(conn.host)
    getattr(conn, lose)()
    other.nodeDeviceCreateXML(_request(), 0)
    assert _delivered(seen) == []


# -- a host that changes at runtime -----------------------------------------------

def test_hot_unplug_removes_the_device_and_its_children():
    conn = _conn()
    seen = _recorder(conn)
    mdev = conn.nodeDeviceCreateXML(_request(), 0)
    listed = conn.listAllDevices(0)
    fakelibvirt.node_devices(conn.host).remove(GPU)
    assert GPU not in conn.listDevices(None, 0)
    assert mdev.name() not in conn.listDevices(None, 0)
    gpu = next(d for d in listed if d.name() == GPU)
    assert _err(gpu.XMLDesc, 0) == (
        c.VIR_ERR_NO_NODE_DEVICE, c.VIR_FROM_NODEDEV,
        f"Node device not found: no node device with matching name '{GPU}'")
    assert [(e[1], e[2]) for e in _delivered(seen)[1:]] == [
        (mdev.name(), c.VIR_NODE_DEVICE_EVENT_DELETED),
        (GPU, c.VIR_NODE_DEVICE_EVENT_DELETED)]
    with pytest.raises(KeyError, match=GPU):
        fakelibvirt.node_devices(conn.host).remove(GPU)


def test_replace_changes_the_type_behind_the_same_name():
    conn = _conn()
    seen = _recorder(conn)
    swapped = pci_device("0000:00:02.0", 0x10de, 0x1eb8, class_id=0x030000,
                         mdev_types=(MdevType("nvidia-222", "GRID T4-1B", 16),))
    fakelibvirt.node_devices(conn.host).replace(swapped)
    assert conn.nodeDeviceLookupByName(GPU).XMLDesc(0) == swapped.xml
    assert [e[2] for e in _delivered(seen)] == [c.VIR_NODE_DEVICE_EVENT_DELETED,
                                    c.VIR_NODE_DEVICE_EVENT_CREATED]
    assert _err(conn.nodeDeviceCreateXML, _request(), 0)[2].endswith(
        "Parent 0000:00:02.0 does not support mdev type i915-GVTg_V5_4")
    assert conn.nodeDeviceCreateXML(
        _request(type_id="nvidia-222"), 0).isActive() == 1
    # the documents the host was built from are not changed
    assert conn.host.documents.node_devices[GPU] == _gpu().xml


def test_replacing_a_parent_removes_its_mdevs_first():
    conn = _conn()
    mdev = conn.nodeDeviceCreateXML(_request(), 0)
    seen = _recorder(conn)
    fakelibvirt.node_devices(conn.host).replace(_gpu(available=4))
    assert [(e[1], e[2]) for e in _delivered(seen)] == [
        (mdev.name(), c.VIR_NODE_DEVICE_EVENT_DELETED),
        (GPU, c.VIR_NODE_DEVICE_EVENT_DELETED),
        (GPU, c.VIR_NODE_DEVICE_EVENT_CREATED)]
    assert conn.listDevices("mdev", 0) == []
    assert _available(conn) == 4


def test_creating_a_defined_mdev_keeps_it_defined():
    conn = _conn()
    defined = conn.nodeDeviceDefineXML(_request(), 0)
    started = conn.nodeDeviceCreateXML(_request(), 0)
    assert started == defined
    assert (defined.isActive(), defined.isPersistent()) == (1, 1)


def test_unplugging_a_pf_takes_its_vfs():
    pf = pci_device("0000:3b:00.0", 0x8086, 0x1572,
                    virtual_functions=["0000:3b:02.0", "0000:3b:02.1"])
    vfs = [pci_device(a, 0x8086, 0x154c, physical_function="0000:3b:00.0")
           for a in ("0000:3b:02.0", "0000:3b:02.1")]
    conn = _conn(pf, *vfs)
    seen = _recorder(conn)
    fakelibvirt.node_devices(conn.host).remove(pf.name)
    assert sorted(e[1] for e in _delivered(seen)) == sorted(
        [pf.name, *(vf.name for vf in vfs)])
    assert seen[-1][1] == pf.name                 # the PF goes last
    assert conn.listDevices("pci", 0) == [GPU, NIC]


def test_a_runtime_change_that_contradicts_sriov_is_refused():
    conn = _conn(pci_device("0000:3b:00.0", 0x8086, 0x1572,
                            virtual_functions=["0000:3b:02.0"]))
    stray = pci_device("0000:3b:02.0", 0x8086, 0x154c,
                       physical_function="0000:3c:00.0")
    with pytest.raises(ValueError, match="a VF has one PF"):
        fakelibvirt.node_devices(conn.host).add(stray)
    assert stray.name not in conn.listDevices(None, 0)


def test_plug_in_a_device():
    conn = _conn()
    seen = _recorder(conn)
    vf = pci_device("0000:81:10.0", 0x8086, 0x10ed)
    fakelibvirt.node_devices(conn.host).add(vf)
    assert conn.nodeDeviceLookupByName(vf.name).XMLDesc(0) == vf.xml
    assert _delivered(seen)[0][1:3] == (vf.name, c.VIR_NODE_DEVICE_EVENT_CREATED)
    with pytest.raises(ValueError, match="already exists"):
        fakelibvirt.node_devices(conn.host).add(vf)
