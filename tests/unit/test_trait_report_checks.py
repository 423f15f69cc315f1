"""A hand-built TraitReport checks its names as derive_traits does, and a
driver's inventory errors are all reported at once (issue 30)."""

from __future__ import annotations

import os_resource_classes as orc
import os_traits
import pytest

from virtdriver.capabilities.traits.derive import TraitReport
from virtdriver.capabilities.traits.model import (
    Evidence, TraitResult, TraitState)
from virtdriver.capabilities.traits.ownership import Ownership
from virtdriver.providers.errors import InvalidProvider
from virtdriver.providers.inventory import InvalidInventory
from virtdriver.resource_tracker.provider_tree import ProviderTree

EVIDENCE = (Evidence("the hardware", "says so"),)
ROOT = "5b2b6e49-0a66-4d5c-b7c8-0e93f1d4b8a1"


def result(name: str, trait: str | None = None) -> TraitResult:
    return TraitResult(trait or name, TraitState.ASSERTED, "hand", EVIDENCE)


def test_a_hand_built_report_moves_bad_names_to_invalid():
    owned = Ownership(frozenset({os_traits.HW_CPU_X86_AVX2}), ("CUSTOM_X_",))
    report = TraitReport({
        os_traits.HW_CPU_X86_AVX2: result(os_traits.HW_CPU_X86_AVX2),
        "CUSTOM_X_GOLD": result("CUSTOM_X_GOLD"),
        "custom_lower": result("custom_lower"),
        "CUSTOM_NOT_OWNED": result("CUSTOM_NOT_OWNED"),
        "CUSTOM_X_FILED": result("CUSTOM_X_FILED", "CUSTOM_X_OTHER"),
    }, owned)
    assert set(report.results) == {os_traits.HW_CPU_X86_AVX2,
                                   "CUSTOM_X_GOLD"}
    assert report.asserted == set(report.results)
    reasons = {bad.name: bad.reason for bad in report.invalid}
    assert set(reasons) == {"custom_lower", "CUSTOM_NOT_OWNED",
                            "CUSTOM_X_FILED"}
    assert "ownership" in reasons["CUSTOM_NOT_OWNED"]
    assert "CUSTOM_X_OTHER" in reasons["CUSTOM_X_FILED"]
    assert all(bad.evidence == EVIDENCE for bad in report.invalid)


def test_every_invalid_resource_class_is_named_in_one_error():
    tree = ProviderTree()
    tree.new_root("node", ROOT)
    with pytest.raises(InvalidInventory) as info:
        tree.update_inventory("node", {
            orc.VCPU: {"total": 0},
            "not a class": {"total": 1},
            orc.MEMORY_MB: {"total": 8, "reserved": 9},
            orc.DISK_GB: {"total": 10}})
    message = str(info.value)
    assert len(info.value.errors) == 3
    for part in ("inventories.VCPU.total", "not a class",
                 "inventories.MEMORY_MB.reserved"):
        assert part in message
    assert "DISK_GB" not in message
    assert tree.data("node").inventory == {}   # nothing applied


def test_one_invalid_class_is_the_error_it_always_was():
    tree = ProviderTree()
    tree.new_root("node", ROOT)
    with pytest.raises(InvalidProvider) as info:
        tree.update_inventory("node", {orc.VCPU: {"total": 0}})
    assert not isinstance(info.value, InvalidInventory)
    assert info.value.field == "inventories.VCPU.total"
