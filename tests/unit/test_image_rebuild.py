"""The rebuild check with implied image traits: checked exactly like the
explicit ones, each refusal naming the property that implied the trait."""

from __future__ import annotations

import os_resource_classes as orc
import os_traits
import pytest

from virtdriver.claims.model import Flavor, Instance
from virtdriver.claims.rebuild import (
    INVALID, TRAITS, ProviderInfo, RebuildRefused, check_rebuild,
    rebuild_conflicts)

ROOT = "00000000-0000-4000-8000-000000000001"
NUMA0 = "00000000-0000-4000-8000-000000000002"
NIC = "00000000-0000-4000-8000-000000000003"
SHARED = "00000000-0000-4000-8000-0000000000aa"
IDE = os_traits.COMPUTE_STORAGE_BUS_IDE
VIRTIO_BUS = os_traits.COMPUTE_STORAGE_BUS_VIRTIO
VIRTIO_VIDEO = os_traits.COMPUTE_GRAPHICS_MODEL_VIRTIO
QCOW2 = os_traits.COMPUTE_IMAGE_TYPE_QCOW2

#: A q35 host: virtio buses and video on the root, no IDE.
PROVIDERS = {
    ROOT: ProviderInfo(frozenset({VIRTIO_BUS, VIRTIO_VIDEO, QCOW2,
                                  os_traits.COMPUTE_NODE}), None, "cn1"),
    NUMA0: ProviderInfo(frozenset({os_traits.HW_NUMA_ROOT}), ROOT,
                        "cn1_NUMA0"),
    NIC: ProviderInfo(frozenset(), ROOT, "nic"),
}


def instance(props=None, specs=None, allocations=None):
    return Instance("11111111-2222-4333-8444-555555555555",
                    Flavor(2, 2048, specs or {}), props or {},
                    allocations or {NUMA0: {orc.VCPU: 2,
                                            orc.MEMORY_MB: 2048}})


def trait_conflicts(conflicts):
    return [c for c in conflicts if c.kind == TRAITS]


def test_an_implied_trait_the_providers_lack_is_refused_naming_the_property():
    (conflict,) = rebuild_conflicts(instance(), {"hw_disk_bus": "ide"},
                                    PROVIDERS)
    assert conflict.kind == TRAITS
    assert conflict.details["missing"] == [IDE]
    assert conflict.details["implied_by"] == {IDE: "hw_disk_bus='ide'"}
    assert conflict.message.startswith(
        f"the new image requires {IDE} (hw_disk_bus='ide'), which none")
    # Every provider counted says what it lacks, the root included.
    assert f"provider 'cn1' ({ROOT}) (root of cn1_NUMA0) lacks {IDE}" in \
        conflict.message


def test_an_implied_trait_on_the_root_passes():
    assert rebuild_conflicts(instance(), {"hw_disk_bus": "VirtIO",
                                          "hw_video_model": "virtio"},
                             PROVIDERS) == []


def test_implied_and_explicit_traits_are_refused_together():
    (conflict,) = rebuild_conflicts(instance(), {
        "hw_cdrom_bus": "ide", "trait:CUSTOM_FAST": "required"}, PROVIDERS)
    assert conflict.details["missing"] == sorted([IDE, "CUSTOM_FAST"])
    assert conflict.details["implied_by"] == {
        IDE: "hw_cdrom_bus='ide'",
        "CUSTOM_FAST": "trait:CUSTOM_FAST='required'"}


def test_traits_the_current_image_implied_are_not_checked_again():
    # Placed with hw_disk_bus=ide (the host had IDE then, or it was
    # allowed some other way): a new image keeping it is not re-checked.
    old = instance({"hw_disk_bus": "ide", "os_distro": "a"})
    assert rebuild_conflicts(old, {"hw_disk_bus": "ide", "os_distro": "b"},
                             PROVIDERS) == []
    # ...also when the same trait now comes from another property.
    assert rebuild_conflicts(old, {"hw_cdrom_bus": "IDE"}, PROVIDERS) == []


def test_identical_image_properties_skip_every_check():
    same = {"hw_disk_bus": "ide", "hw_video_model": "tpi"}
    vm = instance(same)
    assert rebuild_conflicts(vm, dict(same), PROVIDERS) == []
    assert rebuild_conflicts(vm, dict(same), {}) == []


def test_a_value_no_trait_expresses_is_an_invalid_conflict():
    (conflict,) = rebuild_conflicts(instance(), {"hw_disk_bus": "scsii"},
                                    PROVIDERS)
    assert conflict.kind == INVALID
    assert conflict.details["keys"] == {"hw_disk_bus": "scsii"}
    assert "use one of" in conflict.message and "scsi" in conflict.message


def test_the_flavor_forbidding_an_implied_trait_names_the_property():
    vm = instance(specs={f"trait:{VIRTIO_VIDEO}": "forbidden"})
    (conflict,) = trait_conflicts(rebuild_conflicts(
        vm, {"hw_video_model": "virtio"}, PROVIDERS))
    assert conflict.details == {"trait": VIRTIO_VIDEO, "image": "required",
                                "flavor": "forbidden"}
    assert f"requires {VIRTIO_VIDEO} (hw_video_model='virtio')" in \
        conflict.message


def test_an_unknown_provider_cannot_verify_an_implied_trait():
    vm = instance(allocations={NUMA0: {orc.VCPU: 2},
                               SHARED: {orc.DISK_GB: 10}})
    conflicts = rebuild_conflicts(vm, {"hw_disk_bus": "ide"}, PROVIDERS)
    (conflict,) = conflicts
    assert conflict.message.startswith(f"cannot verify {IDE} (required) on "
                                       f"provider {SHARED}")


def test_disk_format_is_checked_when_given():
    vm = instance()
    assert rebuild_conflicts(vm, {}, PROVIDERS, disk_format="qcow2") == []
    (conflict,) = rebuild_conflicts(vm, {}, PROVIDERS, disk_format="vmdk")
    assert conflict.details["implied_by"] == {
        os_traits.COMPUTE_IMAGE_TYPE_VMDK: "disk_format='vmdk'"}
    with pytest.raises(RebuildRefused, match="disk_format='vmdk'"):
        check_rebuild(vm, {}, PROVIDERS, disk_format="vmdk")
