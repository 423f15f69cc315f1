"""The resource tracker over the real libvirt driver: fakelibvirt hosts
from the presets, and libvirt's own test:///default."""

from __future__ import annotations

import os_traits
import pytest

from virtdriver.drivers.fake_host import PRESETS
from virtdriver.drivers.libvirt.driver import LibvirtDriver
from virtdriver.fakelibvirt.presets import preset_documents
from virtdriver.resource_tracker.tracker import ResourceTracker

FOREIGN = os_traits.COMPUTE_STATUS_DISABLED


def cycle(driver, tmp_path):
    """Two updates with others' changes in between; the second result."""
    driver.init_host("cmp1")
    tracker = ResourceTracker(driver, state_dir=tmp_path)
    first = tracker.update_all()["cmp1"]
    assert first.drift.empty and first.diff.created
    tracker.tree.add_traits("cmp1", FOREIGN, os_traits.HW_CPU_X86_AVX512F)
    tracker.tree.remove_traits("cmp1", os_traits.COMPUTE_NODE)
    return tracker, tracker.update_all()["cmp1"]


@pytest.mark.parametrize("preset", sorted(PRESETS))
def test_presets_through_the_tracker(preset, tmp_path, fakelibvirt,
                                     fake_libvirt_host):
    uri = fake_libvirt_host(preset_documents(preset), name=preset)
    tracker, second = cycle(LibvirtDriver(uri=uri), tmp_path)
    root = tracker.tree.record("cmp1").traits
    assert FOREIGN in root                              # never touched
    assert os_traits.COMPUTE_NODE in root                # reasserted
    assert os_traits.HW_CPU_X86_AVX512F not in root      # owned, not here
    assert second.drift.removed_by_others == {
        "cmp1": frozenset({os_traits.COMPUTE_NODE})}
    assert second.drift.added_by_others == {
        "cmp1": frozenset({os_traits.HW_CPU_X86_AVX512F})}
    cells = [tracker.tree.record(u).name
             for u in tracker.tree.get_provider_uuids("cmp1")[1:]]
    assert cells == [f"cmp1_NUMA{i}" for i in range(PRESETS[preset]["cells"])]


@pytest.mark.real
def test_test_default_through_the_tracker(tmp_path, virtdriver_state_dir):
    tracker, second = cycle(LibvirtDriver(uri="test:///default"), tmp_path)
    root = tracker.tree.record("cmp1").traits
    assert FOREIGN in root and os_traits.COMPUTE_NODE in root
    assert os_traits.COMPUTE_NODE in second.drift.removed_by_others["cmp1"]
    assert len(tracker.tree.get_provider_uuids("cmp1")) == 3  # root, 2 cells
