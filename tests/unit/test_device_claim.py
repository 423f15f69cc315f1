"""The device half of a claim (pure): choosing units, the claims file's
device records, the fake driver's ``devices:`` list and cells' sockets."""

from __future__ import annotations

import pytest

from virtdriver.claims.device_claim import (
    DeviceClaim, DevicesRefused, choose_devices, node0_cells)
from virtdriver.claims.device_request import DeviceRequest
from virtdriver.claims.usage import HostUsage, InstanceFit, taken_devices
from virtdriver.claims.usage_json import (
    InvalidClaims, fit_from_json, fit_to_json, usage_from_json,
    usage_to_json)
from virtdriver.drivers.device_units import DeviceUnits
from virtdriver.drivers.fake import FakeDriver
from virtdriver.drivers.fake_host import FakeHostError, spec_from_dict

VF = "CUSTOM_PCI_8086_154C"
UNITS = {
    "n_pci_0000_81_00_0": DeviceUnits("n_pci_0000_81_00_0", VF, 0, "vf-pool",
                                      ("0000:81:10.0", "0000:81:10.1")),
    "n_pci_0000_82_00_0": DeviceUnits("n_pci_0000_82_00_0", VF, 1, "vf-pool",
                                      ("0000:82:10.0",)),
    "n_pci_0000_83_00_0": DeviceUnits("n_pci_0000_83_00_0", "VGPU", None,
                                      "mdev", ("uuid-1", "new-mdev-0")),
}
TRAITS = {name: frozenset({"HW_NIC_SRIOV"}) for name in UNITS}


def vf(policy="required", count=1, required=frozenset()):
    return DeviceRequest("alias vf #1", VF, count, required, policy=policy)


def test_units_are_taken_in_order_never_twice():
    taken = {"n_pci_0000_81_00_0": ["0000:81:10.0"]}
    (got,) = choose_devices("i", [vf()], UNITS, TRAITS, taken, 0)
    assert got.units == ("0000:81:10.1",)
    with pytest.raises(DevicesRefused) as refused:
        choose_devices("i", [vf(), vf()], UNITS, TRAITS, taken, 0)
    assert "n_pci_0000_81_00_0 (cell 0) has 0 free" in str(refused.value)
    assert "n_pci_0000_82_00_0 (cell 1) is not on guest node 0's cell 0 " \
        "(policy required)" in str(refused.value)


def test_an_existing_mdev_is_reused_before_a_new_one():
    request = DeviceRequest("resources:VGPU", "VGPU", 1, policy="legacy")
    (got,) = choose_devices("i", [request], UNITS, TRAITS, {}, 1)
    assert (got.units, got.cell) == (("uuid-1",), None)


def test_within_an_allocation_exactly_its_providers_and_amounts():
    allocation = {"n_pci_0000_82_00_0": {VF: 1}}
    (got,) = choose_devices("i", [vf("preferred")], UNITS, TRAITS, {}, 0,
                            allocation=allocation)
    assert got.provider == "n_pci_0000_82_00_0"   # not cell 0's pool
    with pytest.raises(DevicesRefused, match="no device request"):
        choose_devices("i", [], UNITS, TRAITS, {}, 0, allocation=allocation)
    with pytest.raises(DevicesRefused, match="within the allocation"):
        choose_devices("i", [vf("preferred", 2)], UNITS, TRAITS, {}, 0,
                       allocation=allocation)


def test_traits_asked_must_be_on_the_provider():
    with pytest.raises(DevicesRefused, match="lacks its traits"):
        choose_devices("i", [vf(required=frozenset({"CUSTOM_FAST"}))],
                       UNITS, TRAITS, {}, 0)


def test_node0_cells_are_those_the_devices_can_follow():
    assert node0_cells([vf()], UNITS, TRAITS, {}, [0, 1]) == {0, 1}
    assert node0_cells([vf(count=2)], UNITS, TRAITS, {}, [0, 1]) == {0}
    assert node0_cells([vf("socket")], UNITS, TRAITS, {}, [0, 1],
                       {0: 0, 1: 0}) == {0, 1}


def test_device_records_round_trip_and_are_checked():
    claim = DeviceClaim("alias vf #1", "n_pci_0000_81_00_0", VF, 0,
                        ("0000:81:10.0",))
    fit = InstanceFit("a", devices=(claim,), floating_vcpus=1,
                      floating_memory_mb=64)
    document = fit_to_json(fit)
    assert fit_from_json(document) == fit
    assert "devices" not in fit_to_json(InstanceFit("b"))
    bad = dict(document, devices=[{**claim.to_json(), "cell": "0"}])
    with pytest.raises(InvalidClaims, match=r"devices\[0\]"):
        fit_from_json(bad)
    twice = usage_to_json(HostUsage({"a": fit}))
    twice["instances"]["b"] = dict(document, uuid="b")
    with pytest.raises(InvalidClaims, match="already taken by instance a"):
        usage_from_json(twice, None)
    assert taken_devices(HostUsage({"a": fit})) == {
        "n_pci_0000_81_00_0": ["0000:81:10.0"]}


@pytest.mark.parametrize("entry, words", [
    ({"address": "0000:81:00", "vendor_id": "1", "product_id": "2"},
     "address"),
    ({"address": "0000:81:00.0", "vendor_id": "1", "product_id": "2",
      "numa_node": 2}, "numa_node 2 is not a cell id 0-1"),
    ({"address": "0000:81:00.0", "vendor_id": "xyz", "product_id": "2"},
     "vendor_id 'xyz'"),
    ({"address": "0000:81:00.0", "vendor_id": "1", "product_id": "2",
      "colour": 1}, "unknown field 'colour'"),
    ({"address": "0000:81:00.0", "vendor_id": "1", "product_id": "2",
      "vfs": -1}, "vfs -1"),
])
def test_bad_device_entries_name_the_entry_and_field(entry, words):
    with pytest.raises(FakeHostError) as refused:
        spec_from_dict({"cells": 2, "devices": [entry]}, "h.yaml")
    assert "h.yaml: devices #1" in str(refused.value)
    assert words in str(refused.value)


def test_an_address_described_twice_is_refused():
    pf = {"address": "0000:81:00.0", "vendor_id": "1", "product_id": "2",
          "vfs": 1}
    clash = {"address": "0000:81:10.0", "vendor_id": "1", "product_id": "2"}
    with pytest.raises(FakeHostError, match="described twice"):
        spec_from_dict({"cells": 1, "devices": [pf, clash]}, "h.yaml")


def test_cells_say_their_socket():
    driver = FakeDriver({"name": "s", "cells": 2})
    driver.init_host("s")
    assert [c.socket for c in driver.node_resources("s").cells] == [0, 1]
