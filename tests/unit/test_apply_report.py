"""Owned traits follow the report; foreign ones are never touched."""

from types import MappingProxyType

import os_traits
from hypothesis import given, settings
from hypothesis import strategies as st

from virtdriver.capabilities.traits.apply import apply_report
from virtdriver.capabilities.traits.derive import TraitReport
from virtdriver.capabilities.traits.model import TraitResult, TraitState
from virtdriver.capabilities.traits.ownership import Ownership

A, U, K = TraitState.ASSERTED, TraitState.UNASSERTED, TraitState.UNKNOWN
OWNED = frozenset({os_traits.HW_CPU_X86_AVX, os_traits.HW_CPU_X86_AVX2,
                   os_traits.HW_CPU_X86_SSE, os_traits.COMPUTE_NODE})
PREFIX = "CUSTOM_DEV_VENDORID_"


def report(states):
    results = {t: TraitResult(t, s, "test") for t, s in states.items()}
    return TraitReport(MappingProxyType(results), Ownership(OWNED, (PREFIX,)))


def test_table():
    rep = report({os_traits.HW_CPU_X86_AVX: A, os_traits.HW_CPU_X86_AVX2: U,
                  os_traits.HW_CPU_X86_SSE: K,
                  PREFIX + "8086": A})
    current = {os_traits.HW_CPU_X86_AVX2,      # owned, unsupported: removed
               os_traits.HW_CPU_X86_SSE,       # unknown: kept
               os_traits.HW_GPU_API_VULKAN,    # foreign: kept
               "CUSTOM_RACK_7",                # foreign custom: kept
               PREFIX + "10DE",                # stale dynamic: removed
               os_traits.COMPUTE_NODE}         # owned, unanswered: removed
    assert apply_report(current, rep) == {
        os_traits.HW_CPU_X86_AVX,              # asserted: (re)added
        os_traits.HW_CPU_X86_SSE, os_traits.HW_GPU_API_VULKAN,
        "CUSTOM_RACK_7", PREFIX + "8086"}


def test_unknown_absent_stays_absent():
    rep = report({os_traits.HW_CPU_X86_SSE: K})
    assert apply_report(set(), rep) == frozenset()


NAMES = st.sampled_from(sorted(OWNED) + [
    os_traits.HW_GPU_API_VULKAN, "CUSTOM_A", "CUSTOM_B", PREFIX + "1",
    PREFIX + "2"])


@settings(max_examples=300, deadline=None, derandomize=True, database=None)
@given(current=st.frozensets(NAMES),
       states=st.dictionaries(NAMES, st.sampled_from([A, U, K])))
def test_no_foreign_removed_every_asserted_present(current, states):
    owned_states = {t: s for t, s in states.items()
                    if t in OWNED or t.startswith(PREFIX)}
    rep = report(owned_states)
    after = apply_report(current, rep)
    foreign = {t for t in current if not rep.ownership.owns(t)}
    assert foreign <= after
    assert rep.asserted <= after
    for trait, state in owned_states.items():
        if state is K:
            assert (trait in after) == (trait in current)
        if state is U:
            assert trait not in after
