"""Owned-trait reconciliation: the rule, the tracker's settling, drift."""

from __future__ import annotations

import os_traits
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from virtdriver.capabilities.traits.ownership import Ownership
from virtdriver.resource_tracker.reconcile import (
    Drift, drift, owner, reconcile, settle)

AVX, AVX2, SSE = (os_traits.HW_CPU_X86_AVX, os_traits.HW_CPU_X86_AVX2,
                  os_traits.HW_CPU_X86_SSE)
NODE = os_traits.COMPUTE_NODE
DISABLED = os_traits.COMPUTE_STATUS_DISABLED       # set by others
VULKAN = os_traits.HW_GPU_API_VULKAN               # foreign, not owned
PREFIX = "CUSTOM_DEV_VENDORID_"
OWNS = Ownership(frozenset({AVX, AVX2, SSE, NODE}), (PREFIX,))

# name, current, asserted, unknown, ledger, expected traits
CASES = [
    ("foreign kept", {DISABLED, "CUSTOM_RACK_7"}, {NODE}, (), (),
     {DISABLED, "CUSTOM_RACK_7", NODE}),
    ("owned reasserted", {DISABLED}, {NODE, AVX}, (), {NODE, AVX},
     {DISABLED, NODE, AVX}),
    ("owned unsupported removed", {NODE, AVX2}, {NODE}, (), {NODE},
     {NODE}),
    ("unknown present untouched", {SSE, NODE}, {NODE}, {SSE}, (),
     {SSE, NODE}),
    ("unknown absent not added", {NODE}, {NODE}, {SSE}, {SSE}, {NODE}),
    ("dynamic stale removed (prefix and ledger)",
     {PREFIX + "10DE", PREFIX + "8086"}, {PREFIX + "8086"}, (),
     {PREFIX + "10DE", PREFIX + "8086"}, {PREFIX + "8086"}),
    ("tampered ledger ignored", {VULKAN, DISABLED, NODE}, {NODE}, (),
     {VULKAN, DISABLED, NODE}, {VULKAN, DISABLED, NODE}),
    ("lost ledger rebuilt from prefixes", {PREFIX + "10DE", AVX2, DISABLED},
     {NODE}, (), (), {NODE, DISABLED}),
]


@pytest.mark.parametrize("name,current,asserted,unknown,ledger,expected",
                         CASES, ids=[case[0] for case in CASES])
def test_reconcile_table(name, current, asserted, unknown, ledger, expected):
    done = reconcile(current, asserted, ownership=OWNS, unknown=unknown,
                     ledger=ledger)
    assert done.traits == expected


def test_tampered_ledger_entries_are_reported():
    done = reconcile({VULKAN}, (), ownership=OWNS, ledger={VULKAN, AVX})
    assert done.ignored_ledger == {VULKAN}
    assert done.traits == {VULKAN}


def test_ledger_inside_namespace_owns_beyond_node_ownership():
    # Per-node ownership (ironic) narrower than the driver's registry: a
    # name the ledger says we set, still in the registry, is removed.
    node = Ownership(frozenset({NODE}))
    registry = Ownership(frozenset({NODE, "CUSTOM_GOLD"}))
    done = reconcile({NODE, "CUSTOM_GOLD", "CUSTOM_RACK"}, {NODE},
                     ownership=node, ledger={"CUSTOM_GOLD", "CUSTOM_RACK"},
                     namespace=registry)
    assert done.traits == {NODE, "CUSTOM_RACK"}
    assert done.ignored_ledger == {"CUSTOM_RACK"}


def test_settle_puts_back_foreign_and_takes_off_unowned():
    done = settle({DISABLED, NODE, AVX2}, {NODE, VULKAN}, ownership=OWNS,
                  ledger={NODE, AVX2})
    assert done.traits == {DISABLED, NODE}
    assert done.restored == {DISABLED}
    assert done.dropped == {VULKAN}
    assert done.ledger == {NODE}


def test_settle_removes_stale_names_found_only_by_ledger():
    node = Ownership(frozenset({NODE}))
    registry = Ownership(frozenset({NODE, "CUSTOM_GOLD"}))
    done = settle({NODE, "CUSTOM_GOLD"}, {NODE, "CUSTOM_GOLD"},
                  ownership=node, ledger={NODE, "CUSTOM_GOLD"},
                  namespace=registry)
    assert done.traits == {NODE}
    assert done.stale == {"CUSTOM_GOLD"}
    assert done.ledger == {NODE}


def test_settle_reports_drift_against_the_ledger():
    # Someone removed NODE (we set it) and added AVX2 (owned, unsupported);
    # the driver reasserted NODE and removed AVX2.
    done = settle({AVX2, DISABLED}, {NODE, DISABLED}, ownership=OWNS,
                  ledger={NODE})
    assert done.removed_by_others == {NODE}
    assert done.added_by_others == {AVX2}
    assert done.traits == {NODE, DISABLED}


def test_settle_without_ledger_reports_no_drift():
    done = settle({AVX2}, {NODE}, ownership=OWNS, ledger=None)
    assert done.removed_by_others == done.added_by_others == frozenset()
    assert done.traits == {NODE}


def test_drift_ignores_foreign_and_kept_traits():
    owns = owner(OWNS, {NODE, VULKAN})
    removed, added = drift({NODE, VULKAN}, {SSE, DISABLED},
                           {SSE, DISABLED, NODE}, owns)
    assert removed == {NODE}          # VULKAN: tampered entry, not owned
    assert added == frozenset()       # SSE kept (unknown), DISABLED foreign


def test_drift_describe_and_empty():
    assert Drift().empty and Drift().describe() == []
    found = Drift({"cn1": {NODE}, "cn1_NUMA0": set()},
                  {"cn1": {AVX2, SSE}})
    assert not found.empty
    assert "cn1_NUMA0" not in found.removed_by_others
    assert found.describe() == [
        f"provider cn1: removed by others: {NODE}; added by others, "
        f"unsupported, removed: {AVX2}, {SSE}"]


# -- properties ---------------------------------------------------------------

OWNED_NAMES = sorted(OWNS.static) + [PREFIX + v for v in ("8086", "10DE")]
FOREIGN_NAMES = [DISABLED, VULKAN, "CUSTOM_RACK_7", "CUSTOM_GOLD"]
owned_sets = st.frozensets(st.sampled_from(OWNED_NAMES))
any_sets = st.frozensets(st.sampled_from(OWNED_NAMES + FOREIGN_NAMES))


@settings(max_examples=300)
@given(owned_current=owned_sets, foreign=st.frozensets(
    st.sampled_from(FOREIGN_NAMES)), asserted=owned_sets,
    unknown=owned_sets, ledger=any_sets)
def test_foreign_never_removed_asserted_always_present(
        owned_current, foreign, asserted, unknown, ledger):
    current = owned_current | foreign
    unknown = unknown - asserted
    done = reconcile(current, asserted, ownership=OWNS, unknown=unknown,
                     ledger=ledger)
    assert foreign <= done.traits
    assert asserted <= done.traits
    assert done.traits & unknown == current & unknown
    assert done.traits - current <= asserted


@settings(max_examples=300)
@given(before=any_sets, driver_result=any_sets, ledger=any_sets)
def test_settle_never_removes_foreign_whatever_the_driver_did(
        before, driver_result, ledger):
    done = settle(before, driver_result, ownership=OWNS, ledger=ledger)
    foreign = {t for t in before if not OWNS.owns(t)}
    assert foreign <= done.traits
    assert {t for t in driver_result if OWNS.owns(t)} <= done.traits
    assert done.ledger == {t for t in done.traits if OWNS.owns(t)}


def test_settle_removes_owned_names_the_report_does_not_answer():
    # The driver left a dynamic name its report no longer answers for.
    done = settle({NODE, PREFIX + "10DE"}, {NODE, PREFIX + "10DE"},
                  ownership=OWNS, ledger={NODE}, answered={NODE, AVX})
    assert done.traits == {NODE}
    assert done.stale == {PREFIX + "10DE"}
    assert done.added_by_others == {PREFIX + "10DE"}
