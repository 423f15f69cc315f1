"""Properties of device selection and publication over random hosts and
rules: nothing unlisted, nothing twice, one active type per parent, and
a second publication of the same reading changes nothing."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from virtdriver.capabilities.devices.model import (
    HostDevices, MdevType, PCIAddress, PCIDevice)
from virtdriver.capabilities.devices.rules import (
    DeviceRules, MdevRule, parse_pci_rule)
from virtdriver.capabilities.devices.selection import (
    MDEV, SelectionError, select_devices)
from virtdriver.drivers.device_tree import publish_devices
from virtdriver.resource_tracker.provider_tree import ProviderTree

VENDORS = ("8086", "10de", "15b3")
TYPES = ("t1", "t2")


@st.composite
def hosts(draw):
    devices = []
    # Even buses: an SR-IOV NIC's VFs take the next one.
    for bus in draw(st.lists(st.integers(0x08, 0x20).map(lambda b: 2 * b),
                             unique=True, max_size=5)):
        pf = PCIAddress(0, bus, 0, 0)
        vendor = draw(st.sampled_from(VENDORS))
        kind = draw(st.sampled_from(["plain", "gpu", "sriov"]))
        numa = draw(st.sampled_from([None, 0, 1]))
        if kind == "sriov":
            vfs = tuple(PCIAddress(0, bus + 1, 0, f)
                        for f in range(draw(st.integers(1, 3))))
            devices.append(PCIDevice(f"pci_{bus}", pf, vendor, "1572",
                                     0x020000, numa, virtual_functions=vfs,
                                     max_virtual_functions=len(vfs)))
            devices += [PCIDevice(f"pci_{bus}_{vf.function}", vf, vendor,
                                  "154c", 0x020000, numa,
                                  physical_function=pf) for vf in vfs]
        else:
            types = (tuple(MdevType(t, None, None, draw(st.integers(0, 4)))
                           for t in draw(st.lists(st.sampled_from(TYPES),
                                                  unique=True, min_size=1)))
                     if kind == "gpu" else ())
            devices.append(PCIDevice(f"pci_{bus}", pf, vendor, "1eb8",
                                     0x030000 if kind == "gpu" else 0x120000,
                                     numa, mdev_types=types))
    return HostDevices.build(devices)


SPECS = st.sampled_from([
    '{"vendor_id": "8086"}', '{"product_id": "154c"}',
    '{"product_id": "1572"}', '{"vendor_id": "10de"}',
    '{"address": "*:20:*.*"}', '{"address": "*:21:*.*"}',
    '{"vendor_id": "15b3", "traits": "x"}',
])


@st.composite
def rule_sets(draw):
    specs = draw(st.lists(SPECS, max_size=3))
    types = draw(st.lists(st.sampled_from(TYPES), unique=True, max_size=2))
    cap = draw(st.sampled_from([None, 1, 5]))
    return DeviceRules(
        tuple(parse_pci_rule(s, f"#{i}") for i, s in enumerate(specs, 1)),
        tuple(MdevRule(t, max_instances=cap) for t in types))


@settings(max_examples=150, deadline=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(hosts(), rule_sets())
def test_selection_exposes_only_listed_devices_once(devices, rules):
    try:
        offers = select_devices(devices, rules)
    except SelectionError as exc:
        assert "#" in str(exc) or "enabled_mdev_types" in str(exc)
        return
    keys = [o.key for o in offers]
    assert len(keys) == len(set(keys))
    seen = set()
    for offer in offers:
        for member in offer.members or (offer.device,):
            assert member.address not in seen, "sold twice"
            seen.add(member.address)
            pf = (devices.by_address(member.physical_function)
                  if member.physical_function else None)
            if offer.kind == MDEV:
                assert offer.mdev_type.type_id in {r.type_id
                                                   for r in rules.mdev}
            else:
                assert any(r.matches(member, pf) for r in rules.pci)
        assert offer.total >= 0 and offer.total >= offer.existing
    for rule in rules.mdev:  # no mdev exists on these hosts: a plain cap
        if rule.max_instances is not None:
            assert sum(o.total for o in offers if o.kind == MDEV
                       and o.mdev_type.type_id == rule.type_id
                       ) <= rule.max_instances


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(hosts(), rule_sets(), hosts())
def test_publication_is_steady_and_follows_the_reading(devices, rules,
                                                       later):
    try:
        offers = select_devices(devices, rules)
        after = select_devices(later, rules)
    except SelectionError:
        return
    tree = ProviderTree()
    root = tree.new_root("n", "9b0c4f1e-0000-4000-8000-000000000001")
    for cell in (0, 1):
        tree.new_child(f"n_NUMA{cell}", root)
    publish_devices(tree, "n", offers, used=lambda uuid: {})
    snapshot = {tree.record(u).name: (tree.record(u).inventory,
                                      tree.record(u).traits)
                for u in tree.get_provider_uuids("n")}
    publish_devices(tree, "n", offers, used=lambda uuid: {})
    assert {tree.record(u).name: (tree.record(u).inventory,
                                  tree.record(u).traits)
            for u in tree.get_provider_uuids("n")} == snapshot
    before = {tree.record(u).name for u in tree.get_provider_uuids("n")}
    guess = tree.snapshot()
    publish_devices(tree, "n", after)  # allocations unknown: fail safe
    kept = {tree.record(u).name for u in tree.get_provider_uuids("n")}
    assert before <= kept, "removed on a guess"
    tree.restore(guess)
    publish_devices(tree, "n", after, used=lambda uuid: {})  # none: follows
    names = {tree.record(u).name for u in tree.get_provider_uuids("n")}
    assert names == {"n", "n_NUMA0", "n_NUMA1"} | {
        f"n_{o.key}" for o in after}
