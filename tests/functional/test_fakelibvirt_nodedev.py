"""fakelibvirt's node device calls: ``listDevices``/``numOfDevices``,
``listAllDevices`` flags, lookups, the ``virNodeDevice`` methods, libvirt's
flag errors, and injected listing failures (the agreement with real
libvirt is in ``tests/real/test_fakelibvirt_nodedev_agreement.py``)."""

from __future__ import annotations

import dataclasses

import pytest

from virtdriver import fakelibvirt
from virtdriver.fakelibvirt import constants as c
from virtdriver.fakelibvirt.builders import (
    VPD, MdevType, ap_matrix_device, css_device, host_documents, pci_device)

GPU = "pci_0000_00_02_0"
PF, VF = "pci_0000_81_00_0", "pci_0000_81_10_0"
FC_HOST = """<device>
  <name>scsi_host5</name>
  <parent>computer</parent>
  <capability type='scsi_host'>
    <host>5</host>
    <capability type='fc_host'>
      <wwnn>2000000012341234</wwnn>
      <wwpn>1000000012341234</wwpn>
    </capability>
  </capability>
</device>
"""


def _documents():
    gpu = pci_device("0000:00:02.0", 0x8086, 0x591b, class_id=0x030000,
                     mdev_types=(MdevType("i915-GVTg_V5_4", None, 2),))
    pf = pci_device("0000:81:00.0", 0x15b3, 0xa2d6,
                    virtual_functions=["0000:81:10.0"],
                    vpd=VPD("BlueField-2", serial_number="MT2113X00000"))
    vf = pci_device("0000:81:10.0", 0x15b3, 0x101e,
                    physical_function="0000:81:00.0")
    documents = host_documents(node_devices=[
        gpu, pf, vf, css_device(0, 0, 0x52), ap_matrix_device()])
    devices = dict(documents.node_devices, scsi_host5=FC_HOST)
    return dataclasses.replace(documents, node_devices=devices)


@pytest.fixture
def conn():
    return fakelibvirt.connection_for(_documents())


def _err(call, *args):
    with pytest.raises(fakelibvirt.libvirtError) as caught:
        call(*args)
    return caught.value.err


ALL = ["ap_matrix", "computer", "css_0_0_0052", GPU, PF, VF, "scsi_host5"]


@pytest.mark.parametrize(("cap", "names"), [
    (None, ALL),
    ("pci", [GPU, PF, VF]),
    ("mdev_types", ["ap_matrix", GPU]),        # nested ones count
    ("vpd", [PF]),
    ("system", ["computer"]),
    ("fc_host", ["scsi_host5"]),
    ("css", ["css_0_0_0052"]),
    ("mdev", []),
    ("bogus", []),                              # unknown: none, no error
    ("", []),
])
def test_list_devices_by_capability(conn, cap, names):
    assert conn.listDevices(cap, 0) == names
    assert conn.numOfDevices(cap, 0) == len(names)


@pytest.mark.parametrize("call", ["listDevices", "numOfDevices"])
def test_legacy_listing_refuses_flags_as_the_daemon(conn, call):
    # libvirt-python's listDevices asks numOfDevices first: both name it
    assert _err(getattr(conn, call), None, 1) == (
        c.VIR_ERR_INVALID_ARG, c.VIR_FROM_NODEDEV,
        "unsupported flags (0x1) in function nodeNumOfDevices",
        c.VIR_ERR_ERROR, "nodeNumOfDevices", "flags", None, 0, 0)


def test_list_all_devices_flags(conn):
    everything = [d.name() for d in conn.listAllDevices(0)]
    assert everything == ALL
    active = conn.listAllDevices(c.VIR_CONNECT_LIST_NODE_DEVICES_ACTIVE)
    assert [d.name() for d in active] == ALL
    assert conn.listAllDevices(c.VIR_CONNECT_LIST_NODE_DEVICES_INACTIVE) == []
    both = (c.VIR_CONNECT_LIST_NODE_DEVICES_ACTIVE
            | c.VIR_CONNECT_LIST_NODE_DEVICES_INACTIVE
            | c.VIR_CONNECT_LIST_NODE_DEVICES_CAP_VPD
            | c.VIR_CONNECT_LIST_NODE_DEVICES_CAP_CSS_DEV)
    assert [d.name() for d in conn.listAllDevices(both)] == [
        "css_0_0_0052", PF]
    assert _err(conn.listAllDevices, 1 << 29)[:3] == (
        c.VIR_ERR_INVALID_ARG, c.VIR_FROM_NODEDEV,
        "unsupported flags (0x20000000) in function "
        "nodeConnectListAllNodeDevices")


def test_device_methods(conn):
    pf = conn.nodeDeviceLookupByName(PF)
    assert pf.name() == PF
    assert pf.parent() == "computer"
    assert pf.listCaps() == ["pci", "vpd"]
    assert pf.numOfCaps() == 2
    assert (pf.isActive(), pf.isPersistent()) == (1, 0)
    assert pf.connect() is conn
    assert pf == conn.listAllDevices(c.VIR_CONNECT_LIST_NODE_DEVICES_CAP_VPD)[0]
    computer = conn.nodeDeviceLookupByName("computer")
    assert computer.parent() is None
    assert (computer.isActive(), computer.isPersistent()) == (1, 1)
    assert computer.listCaps() == ["system"]
    assert _err(pf.XMLDesc, 1)[:3] == (
        c.VIR_ERR_INVALID_ARG, c.VIR_FROM_NODEDEV,
        "unsupported flags (0x1) in function nodeDeviceGetXMLDesc")


def test_lookup_scsi_host_by_wwn(conn):
    dev = conn.nodeDeviceLookupSCSIHostByWWN("2000000012341234",
                                             "1000000012341234", 0)
    assert dev.name() == "scsi_host5"
    assert dev.listCaps() == ["scsi_host", "fc_host"]
    # the daemon answers an unknown pair with libvirt's "cause unknown"
    assert _err(conn.nodeDeviceLookupSCSIHostByWWN, "1", "2", 0)[:3] == (
        c.VIR_ERR_INTERNAL_ERROR, c.VIR_FROM_NONE,
        "An error occurred, but the cause is unknown")
    assert _err(conn.nodeDeviceLookupSCSIHostByWWN, "1", "2", 1)[2] == (
        "unsupported flags (0x1) in function nodeDeviceLookupSCSIHostByWWN")


# -- injected failures while listing --------------------------------------------

def test_the_nth_xmldesc_of_a_listing_fails(conn):
    conn.fail("nodeDevice.XMLDesc", on_call=3,
              error_code=c.VIR_ERR_INTERNAL_ERROR,
              error_domain=c.VIR_FROM_NODEDEV)
    devices = conn.listAllDevices(0)
    read = []
    with pytest.raises(fakelibvirt.libvirtError) as caught:
        for device in devices:
            read.append(device.XMLDesc(0))
    assert len(read) == 2
    assert caught.value.err[:3] == (
        c.VIR_ERR_INTERNAL_ERROR, c.VIR_FROM_NODEDEV,
        "internal error: injected fault in virNodeDeviceGetXMLDesc")
    assert devices[3].XMLDesc(0)            # only that one call failed


def test_one_device_fails_every_time(conn):
    conn.fail(f"nodeDevice.listCaps:{GPU}", repeat=True,
              error_code=c.VIR_ERR_NO_NODE_DEVICE,
              error_domain=c.VIR_FROM_NODEDEV, message="gone")
    by_name = {d.name(): d for d in conn.listAllDevices(0)}
    for _ in range(2):
        assert _err(by_name[GPU].listCaps)[:3] == (
            c.VIR_ERR_NO_NODE_DEVICE, c.VIR_FROM_NODEDEV, "gone")
    assert by_name[PF].listCaps() == ["pci", "vpd"]
    assert by_name[GPU].XMLDesc(0)
    assert conn.calls(f"nodeDevice.listCaps:{GPU}") == 2
    assert conn.calls("nodeDevice.listCaps") == 3


def test_the_daemon_goes_away_half_way_through_a_listing(conn):
    closed = []
    conn.registerCloseCallback(lambda *a: closed.append(a[1]), None)
    conn.fail("nodeDevice.XMLDesc", on_call=2, drop=True)
    devices = conn.listAllDevices(0)
    devices[0].XMLDesc(0)
    for device in devices[1:3]:
        assert _err(device.XMLDesc, 0)[:2] == (c.VIR_ERR_SYSTEM_ERROR,
                                               c.VIR_FROM_RPC)
    assert _err(conn.listAllDevices, 0)[1] == c.VIR_FROM_RPC
    assert closed == [c.VIR_CONNECT_CLOSE_REASON_EOF]


def test_list_all_devices_itself_fails(conn):
    conn.fail("listAllDevices", error_code=c.VIR_ERR_INTERNAL_ERROR,
              error_domain=c.VIR_FROM_NODEDEV)
    assert _err(conn.listAllDevices, 0)[2] == (
        "internal error: injected fault in virConnectListAllNodeDevices")
    assert len(conn.listAllDevices(0)) == len(ALL)


def test_a_closed_connection_refuses_device_calls(conn):
    device = conn.listAllDevices(0)[0]
    conn.close()
    assert _err(device.XMLDesc, 0)[:3] == (
        c.VIR_ERR_INVALID_CONN, c.VIR_FROM_NODEDEV,
        "invalid connection pointer in virNodeDeviceGetXMLDesc")
    assert _err(conn.listDevices, None, 0)[0] == c.VIR_ERR_INVALID_CONN
