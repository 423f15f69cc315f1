"""Property: whatever the ledger says, the tracker never touches what it
does not own.

Each example builds a real tree through ``ResourceTracker.update_all``
(fake or ironic driver), adds foreign providers and foreign traits, writes
an adversarial ledger — uuids and *names* of foreign providers, random
uuids, owned and foreign trait names — and runs ``update_all`` again with a
restarted tracker, exactly as production does (the per-node ownership and
the namespace are the tracker's own, not the test's).
"""

from __future__ import annotations

import json
import os
import pathlib
import tempfile
import uuid as uuidlib

import os_traits
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from virtdriver.drivers.fake import FakeDriver
from virtdriver.drivers.ironic import IronicDriver
from virtdriver.resource_tracker.ledger import FORMAT, VERSION
from virtdriver.resource_tracker.provider_tree import ProviderTree
from virtdriver.resource_tracker.tracker import ResourceTracker

GOLD = "1be26c0b-03f2-4d2e-ae87-c02d7f33c123"
SILVER = "2c5e9a51-7f0e-4e55-9a43-0d3b2f7e8a10"
TRAITS = sorted({
    os_traits.COMPUTE_NODE, os_traits.COMPUTE_STATUS_DISABLED,
    os_traits.HW_CPU_X86_AVX512F, os_traits.HW_CPU_X86_AVX2,
    os_traits.HW_NUMA_ROOT, os_traits.COMPUTE_IMAGE_TYPE_RAW,
    os_traits.COMPUTE_NET_ATTACH_INTERFACE, "CUSTOM_RAID5", "CUSTOM_RACK_7",
    "CUSTOM_DEV_VENDORID_10DE", "CUSTOM_OPERATOR_GOLD"})


def fake_driver(_: pathlib.Path, gone: bool):
    driver = FakeDriver("numa2-ht")
    driver.init_host("compute-1")
    if gone:
        driver.get_available_nodes = lambda refresh=False: []
    return driver


def ironic_driver(directory: pathlib.Path, gone: bool):
    path = directory / "nodes.json"
    nodes = [{"uuid": SILVER, "name": "b", "resource_class": "gold",
              "traits": ["CUSTOM_RAID5", "CUSTOM_OPERATOR_GOLD"]}]
    if not gone:
        nodes.append({"uuid": GOLD, "name": "a", "resource_class": "gold",
                      "traits": ["CUSTOM_RACK_7"]})
    path.write_text(json.dumps({"nodes": nodes}))
    tick = int.from_bytes(os.urandom(4), "big") * 1000
    os.utime(path, ns=(tick, tick))
    driver = IronicDriver(inventory_path=str(path))
    driver.init_host("conductor-1")
    return driver


DRIVERS = {"fake": fake_driver, "ironic": ironic_driver}

foreign_roots = st.lists(
    st.tuples(st.sampled_from(["sharing", "fake-numa2-ht-old", GOLD[:8],
                               "compute-2"]),
              st.sets(st.sampled_from(TRAITS))),
    max_size=3, unique_by=lambda item: item[0])
extra_traits = st.dictionaries(st.integers(0, 9), st.sets(
    st.sampled_from(TRAITS), max_size=4), max_size=4)
ledger_keys = st.sampled_from(["ours", "foreign-uuid", "foreign-name",
                               "random", "child"])
ledger_lists = st.lists(st.sampled_from(TRAITS + ["not a trait", ""]),
                        max_size=6)


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(kind=st.sampled_from(sorted(DRIVERS)), gone=st.booleans(),
       roots=foreign_roots, extra=extra_traits, child=st.booleans(),
       entries=st.lists(st.tuples(ledger_keys, st.integers(0, 9),
                                  ledger_lists), max_size=8))
def test_no_ledger_makes_the_tracker_touch_foreign_providers_or_traits(
        kind, gone, roots, extra, child, entries):
    with tempfile.TemporaryDirectory() as scratch:
        directory = pathlib.Path(scratch)
        first = ResourceTracker(DRIVERS[kind](directory, False),
                                state_dir=directory)
        first.update_all()
        tree = ProviderTree.from_json(first.tree.to_json())
        ours = [p.uuid for p in tree.providers()]
        foreign = [tree.new_root(name, str(uuidlib.uuid4()))
                   for name, _ in roots]
        for uuid, (_, traits) in zip(foreign, roots, strict=True):
            tree.update_traits(uuid, traits)
        if child:
            foreign.append(tree.new_child("cyborg-gpu", ours[0],
                                          str(uuidlib.uuid4())))
            tree.update_traits(foreign[-1], ["CUSTOM_DEV_VENDORID_10DE"])
        for index, traits in extra.items():
            target = (ours + foreign)[index % len(ours + foreign)]
            tree.add_traits(target, *traits)
        write_ledger(first.ledger_path, tree, ours, foreign, entries)
        before = {p.uuid: p for p in tree.providers()}
        driver = DRIVERS[kind](directory, gone)
        owned = {uuid: _ownership(driver, tree, uuid) for uuid in ours}
        tracker = ResourceTracker(driver, state_dir=directory, tree=tree)
        try:
            tracker.update_all()
        except Exception as exc:       # no node may fail here
            raise AssertionError(f"update_all failed: {exc}") from exc
        for uuid in foreign:
            assert tree.exists(uuid), "a foreign provider was removed"
            assert tree.record(uuid).traits == before[uuid].traits
        for uuid in ours:
            if not tree.exists(uuid):
                assert gone, "a provider of a present node was removed"
                continue
            kept = {t for t in before[uuid].traits
                    if owned[uuid] is None or not owned[uuid].owns(t)}
            assert kept <= tree.record(uuid).traits, "a foreign trait went"


def _ownership(driver, tree: ProviderTree, uuid: str):
    """What the driver owns on the node of provider ``uuid`` (None when
    the node is gone: then nothing on it may be touched but by removal)."""
    root = tree.record(tree.record(uuid).root_uuid).name
    if root not in driver.get_available_nodes():
        return None
    return driver.ownership_for(root)


def write_ledger(path, tree, ours, foreign, entries) -> None:
    document = json.loads(path.read_text())
    assert document["format"] == FORMAT and document["version"] == VERSION
    providers = document["providers"]
    for key, index, traits in entries:
        if key == "ours":
            target = ours[index % len(ours)]
        elif key in ("foreign-uuid", "child") and foreign:
            target = foreign[index % len(foreign)]
        elif key == "foreign-name" and foreign:
            target = tree.record(foreign[index % len(foreign)]).name
        else:
            target = str(uuidlib.UUID(int=index + 1))
        providers[target] = traits
    path.write_text(json.dumps(document))
