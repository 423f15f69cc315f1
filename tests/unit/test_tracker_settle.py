"""settle() is reconcile() plus drift(), inlined for speed: the same answer.

The tracker settles every provider of every node it updates, so
``settle`` builds each set once instead of composing the pure rule; this
checks it against that composition (the rule as the module doc states it)
on random inputs, prefixes and namespaces included.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from virtdriver.capabilities.traits.ownership import Ownership
from virtdriver.resource_tracker.reconcile import (
    Settlement, drift, owner, reconcile, settle)

NAMES = ["COMPUTE_NODE", "HW_CPU_X86_AVX2", "CUSTOM_A", "CUSTOM_B",
         "CUSTOM_DEV_VENDORID_10DE", "CUSTOM_DEV_VENDORID_8086",
         "COMPUTE_STATUS_DISABLED", "CUSTOM_FOREIGN"]
names = st.frozensets(st.sampled_from(NAMES))
ownerships = st.builds(
    Ownership, names,
    st.sampled_from([(), ("CUSTOM_DEV_VENDORID_",), ("CUSTOM_",)]))


def composed(before, driver_result, *, ownership, ledger, namespace=None,
             answered=None) -> Settlement:
    """settle() as reconcile() and drift() composed (its specification)."""
    before, result = frozenset(before), frozenset(driver_result)
    kept = frozenset(t for t in result if ownership.owns(t)
                     and (answered is None or t in answered))
    entries = frozenset(ledger or ())
    done = reconcile(before, kept, ownership=ownership, ledger=entries,
                     namespace=namespace)
    owns = owner(ownership, entries, namespace)
    removed, added = (drift(entries, before, done.traits, owns)
                      if ledger is not None else (frozenset(), frozenset()))
    return Settlement(
        traits=done.traits,
        ledger=frozenset(t for t in done.traits if owns(t)),
        restored=done.traits - result,
        dropped=frozenset(t for t in result - done.traits if not owns(t)),
        stale=frozenset(t for t in result - done.traits if owns(t)),
        ignored_ledger=done.ignored_ledger,
        removed_by_others=removed, added_by_others=added)


@settings(max_examples=400, deadline=None)
@given(before=names, result=names, ownership=ownerships,
       ledger=st.none() | names, namespace=st.none() | ownerships,
       answered=st.none() | names)
def test_settle_is_reconcile_and_drift(before, result, ownership, ledger,
                                       namespace, answered):
    expected = composed(before, result, ownership=ownership, ledger=ledger,
                        namespace=namespace, answered=answered)
    assert settle(before, result, ownership=ownership, ledger=ledger,
                  namespace=namespace, answered=answered) == expected
