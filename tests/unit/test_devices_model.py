"""The frozen device model: addresses as Nova and libvirt write them,
device kinds, lookups, and "unknown" that is never "no device"."""

from __future__ import annotations

import dataclasses

import pytest

from virtdriver.capabilities.devices import (
    DevicesUnknown, HostDevices, Mdev, MdevParent, MdevType, PCIAddress,
    PCIDevice)


def pci(address: str, **kwargs) -> PCIDevice:
    at = PCIAddress.parse(address)
    kwargs.setdefault("vendor_id", "8086")
    kwargs.setdefault("product_id", "1520")
    return PCIDevice(at.nova_suffix, at, **kwargs)


def test_an_address_as_nova_and_libvirt_write_it():
    address = PCIAddress(0, 0x81, 0, 0)
    assert str(address) == "0000:81:00.0"
    assert address.nova_suffix == "pci_0000_81_00_0"
    assert PCIAddress.parse("0000:81:00.0") == address
    assert PCIAddress.parse("0000:AF:1f.7") == PCIAddress(0, 0xAF, 0x1F, 7)
    assert str(PCIAddress(0x10000, 1, 0, 0)) == "10000:01:00.0"  # VMD
    assert sorted([PCIAddress(0, 2, 0, 0), PCIAddress(0, 1, 3, 1)]) == [
        PCIAddress(0, 1, 3, 1), PCIAddress(0, 2, 0, 0)]


@pytest.mark.parametrize("text", ["81:00.0", "0000:81:00", "0000:81:20.0",
                                  "0000:81:00.8", "0000:181:00.0", "",
                                  "0000:8\u0661:00.0", "x0000:81:00.0"])
def test_not_an_address(text):
    with pytest.raises(ValueError):
        PCIAddress.parse(text)


def test_kinds_of_pci_function():
    pf = pci("0000:82:00.0", max_virtual_functions=8,
             virtual_functions=(PCIAddress(0, 0x82, 0, 2),))
    vf = pci("0000:82:00.2", physical_function=pf.address)
    gpu = pci("0000:81:00.0", class_code=0x030200,
              mdev_types=(MdevType("nvidia-222"),))
    plain = pci("0000:00:03.0", class_code=0x020000)
    assert (pf.is_pf, pf.is_vf, vf.is_pf, vf.is_vf) == (True, False,
                                                        False, True)
    assert pci("0000:82:00.1", max_virtual_functions=0).is_pf  # SR-IOV cap
    assert gpu.is_display and gpu.is_mdev_parent
    assert not plain.is_display and not plain.is_mdev_parent
    assert not pci("0000:00:04.0").is_display  # class unknown


def test_lookups():
    pf = pci("0000:82:00.0", max_virtual_functions=2)
    vfs = [pci(f"0000:82:00.{n}", physical_function=pf.address)
           for n in (2, 3)]
    gpu = pci("0000:81:00.0", mdev_types=(MdevType("t"),))
    matrix = MdevParent("ap_matrix", "ap_matrix", (MdevType("ap"),))
    mdevs = (Mdev("u1", "t", gpu.name), Mdev("u2", "ap", "ap_matrix"))
    devices = HostDevices.build([*vfs, gpu, pf], [matrix], mdevs,
                                source="test")
    assert [str(d.address) for d in devices.pci] == [
        "0000:81:00.0", "0000:82:00.0", "0000:82:00.2", "0000:82:00.3"]
    assert devices.by_address("0000:82:00.3") is vfs[1]
    assert devices.by_address(PCIAddress(0, 0x82, 0, 0)) is pf
    assert devices.by_address("0000:99:00.0") is None
    assert devices.by_address("nonsense") is None
    assert devices.virtual_functions_of(pf) == tuple(vfs)
    assert devices.virtual_functions_of(gpu) == ()
    assert devices.mdevs_of("ap_matrix") == (mdevs[1],)
    assert devices.mdev_parents == (gpu, matrix)
    # built without the index: the same answers
    plain = HostDevices(devices.pci, (matrix,), mdevs)
    assert plain.by_address("0000:82:00.3") is vfs[1]
    assert plain == devices
    # a copy with other PCI functions does not answer from the old index
    fewer = dataclasses.replace(devices, pci=devices.pci[:1])
    assert fewer.by_address("0000:82:00.3") is None
    assert fewer.by_address("0000:81:00.0") is gpu


def test_known_and_unknown_are_told_apart():
    assert HostDevices().known is True
    assert HostDevices().pci == ()
    unknown = DevicesUnknown("qemu:///embed has no node-device API")
    assert unknown.known is False
    assert not hasattr(unknown, "pci")  # nothing to mistake for "none"


def test_the_model_is_frozen_hashable_and_ignores_where_it_came_from():
    device = pci("0000:81:00.0", source="nodedev:///system")
    with pytest.raises(dataclasses.FrozenInstanceError):
        device.vendor_id = "10de"  # type: ignore[misc]
    replayed = dataclasses.replace(device, source="fake:///replay")
    assert replayed == device and hash(replayed) == hash(device)
    one = HostDevices.build([device], source="a")
    assert one == HostDevices.build([replayed], source="b")
    assert hash(one) == hash(HostDevices.build([replayed], source="b"))
    assert one != HostDevices.build([dataclasses.replace(device,
                                                         numa_node=1)])
