"""The tree's fast paths agree with the full checks they stand in for.

``fast_inventory``, ``fast_traits`` and ``fast_aggregates`` may only vouch
for input the full check accepts, and must then give the same result;
``make_record`` / the inventory ``_make`` build ordinary frozen records; a
valid write never builds a provider label (only errors need one).
"""

from __future__ import annotations

import dataclasses
import math

import os_resource_classes as orc
import os_traits
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from virtdriver.providers import errors
from virtdriver.providers import record as record_module
from virtdriver.providers.inventory import (
    FIELDS, MAX_INT, Inventory, _make, fast_inventory, validate_inventory)
from virtdriver.providers.record import (
    ProviderData, check_aggregates, check_traits, fast_aggregates,
    fast_traits, make_record)
from virtdriver.resource_tracker import provider_tree
from virtdriver.resource_tracker.provider_tree import (
    InvalidProvider, ProviderTree)

AGG = "a1b2c3d4-0000-4000-8000-000000000001"
numbers = st.sampled_from([0, 1, 2, 7, 8, 64, MAX_INT, MAX_INT + 1, -1,
                           True, None, 1.5, "3", math.nan, math.inf, 0.0,
                           -2.5, 16.0])
fields = st.sampled_from(["total", "reserved", "min_unit", "max_unit",
                          "step_size", "allocation_ratio", "bogus"])
classes = st.sampled_from([orc.VCPU, orc.MEMORY_MB, "CUSTOM_X",
                           "CUSTOM_" + "Y" * 248, "CUSTOM_" + "Y" * 249,
                           "custom_x", "VCPUS", 3,
                           "CUSTOM_"])


@st.composite
def near_valid(draw, perturb: bool = True) -> dict:
    """A valid record, sometimes with one field broken (or unknown)."""
    total = draw(st.integers(1, 64))
    record = {"total": total}
    if draw(st.booleans()):
        record["reserved"] = draw(st.integers(0, total))
    if draw(st.booleans()):
        record["max_unit"] = draw(st.one_of(st.none(),
                                            st.integers(1, total)))
    if draw(st.booleans()):
        record["min_unit"] = draw(st.integers(
            1, record.get("max_unit") or total))
    if draw(st.booleans()):
        record["step_size"] = draw(st.integers(1, MAX_INT))
    if draw(st.booleans()):
        record["allocation_ratio"] = draw(st.one_of(
            st.floats(0.01, 100.0), st.integers(1, 16)))
    if perturb and draw(st.booleans()):
        record[draw(fields)] = draw(st.sampled_from([
            total + 1, 0, -1, MAX_INT + 1, None, True, 1.5, "3", math.nan,
            math.inf, -2.5, 0.0]))
    return record


def as_record(record: dict):
    """The same values as an Inventory when they fit its fields."""
    try:
        return Inventory(**record)
    except TypeError:
        return record


given_records = st.one_of(
    near_valid(), near_valid().map(as_record),
    st.dictionaries(fields, numbers, max_size=6),
    st.builds(Inventory, numbers, numbers, numbers, numbers, numbers,
              numbers),
    st.sampled_from([None, [], "total"]))
inventories = st.one_of(st.dictionaries(classes, given_records, max_size=3),
                        st.sampled_from([[], None, "VCPU"]))
names = st.sampled_from([os_traits.HW_CPU_X86_AVX, os_traits.COMPUTE_NODE,
                         "CUSTOM_GOLD", "CUSTOM_", "CUSTOM_lower", "GOLD",
                         "CUSTOM_" + "Z" * 260, 3, b"CUSTOM_B", AGG,
                         AGG.upper()])
collections = st.one_of(
    st.lists(names, max_size=4),
    st.lists(names, max_size=4).map(tuple),
    st.frozensets(names, max_size=4),
    st.sampled_from(["CUSTOM_GOLD", None, 7, [[1]]]))


def full(check, *args):
    try:
        return check(*args)
    except InvalidProvider:
        return "refused"


@settings(max_examples=500, deadline=None)
@given(classes, given_records)
def test_fast_inventory_vouches_only_for_valid_records(rc, record):
    test_fast_inventory_vouches_only_for_what_validation_accepts.hypothesis\
        .inner_test({rc: record})


@settings(max_examples=200, deadline=None)
@given(inventories)
def test_fast_inventory_vouches_only_for_what_validation_accepts(given):
    fast = fast_inventory(given)
    if fast is None:  # the full check decides; it refuses or accepts
        return
    assert full(validate_inventory, "p", given) == fast
    for record in fast.values():
        assert type(record.allocation_ratio) is float


@settings(max_examples=100, deadline=None)
@given(st.dictionaries(st.sampled_from([orc.VCPU, "CUSTOM_X"]),
                       near_valid(perturb=False).map(as_record)))
def test_fast_inventory_takes_every_plain_valid_inventory(given):
    assert fast_inventory(given) == validate_inventory("p", given)


BASE = {"total": 8, "reserved": 2, "min_unit": 2, "max_unit": 4,
        "step_size": 2, "allocation_ratio": 2.0}
#: field -> values just inside and just outside its range, given BASE.
EDGES = {
    # Placement's rules: each field in its range, reserved <= total
    # (a capacity below 0 is refused); max_unit may exceed total.
    "total": ([2, MAX_INT], [1, 0, MAX_INT + 1, True, 8.0, None]),
    "reserved": ([0, 8], [9, -1, False, 2.0, None]),
    "max_unit": ([1, 9, MAX_INT, None], [0, MAX_INT + 1, True]),
    "min_unit": ([1, 5, MAX_INT], [0, MAX_INT + 1, True, 1.0, None]),
    "step_size": ([1, MAX_INT], [0, MAX_INT + 1, True, None]),
    "allocation_ratio": ([1e-9, 3e38, 3], [-1.0, 4e38, math.inf, math.nan,
                                           True, "2"]),
}


@pytest.mark.parametrize("field", sorted(EDGES))
@pytest.mark.parametrize("shape", [dict, lambda values: Inventory(**values)])
def test_fast_inventory_at_each_fields_edges(field, shape):
    inside, outside = EDGES[field]
    for value in inside:  # the fast path takes these, as validation does
        given = {orc.VCPU: shape({**BASE, field: value})}
        assert fast_inventory(given) == validate_inventory("p", given), value
    for value in outside:  # and leaves these to validation, which refuses
        given = {orc.VCPU: shape({**BASE, field: value})}
        assert fast_inventory(given) is None, value
        with pytest.raises(InvalidProvider):
            validate_inventory("p", given)


def test_fast_inventory_takes_the_common_shapes():
    records = {orc.VCPU: {"total": 8, "reserved": 1, "allocation_ratio": 4},
               orc.MEMORY_MB: {"total": 64, "max_unit": None},
               "CUSTOM_X": Inventory(2, max_unit=1)}
    fast = fast_inventory(records)
    assert fast == validate_inventory("p", records)
    assert fast["CUSTOM_X"] is records["CUSTOM_X"]  # valid: shared as is
    assert fast[orc.VCPU].allocation_ratio == 4.0


@settings(max_examples=300, deadline=None)
@given(collections)
def test_fast_traits_vouches_only_for_valid_names(given):
    fast = fast_traits(given)
    if fast is not None:
        assert full(check_traits, "p", given) == fast


def test_a_refused_custom_trait_is_never_remembered_as_valid():
    assert fast_traits(["CUSTOM_lower"]) is None
    assert fast_traits(["CUSTOM_lower"]) is None
    with pytest.raises(InvalidProvider, match="CUSTOM_lower"):
        check_traits("p", ["CUSTOM_lower"])
    assert fast_traits(["CUSTOM_OK", os_traits.COMPUTE_NODE]) == {
        "CUSTOM_OK", os_traits.COMPUTE_NODE}


@settings(max_examples=200, deadline=None)
@given(collections)
def test_fast_aggregates_vouches_only_for_canonical_uuids(given):
    fast = fast_aggregates(given)
    if fast is not None:
        assert full(check_aggregates, "p", given) == fast


def test_make_record_builds_an_ordinary_frozen_record():
    inventory = {orc.VCPU: Inventory(4)}
    made = make_record("u", "n", 3, "p", "r", inventory,
                       frozenset({"T"}), frozenset(), {})
    built = ProviderData("u", "n", 3, "p", "r", inventory, frozenset({"T"}))
    assert type(made) is ProviderData and made == built
    assert repr(made) == repr(built)
    with pytest.raises(dataclasses.FrozenInstanceError):
        made.name = "other"
    record = _make(8, 1, 1, 4, 1, 2.0, FIELDS)
    assert type(record) is Inventory
    assert record == Inventory(8, 1, 1, 4, 1, 2.0)
    with pytest.raises(dataclasses.FrozenInstanceError):
        record.total = 1


def test_valid_writes_never_build_a_label(monkeypatch):
    def no_label(*_):
        raise AssertionError("a label was built for a valid write")

    for module in (errors, record_module, provider_tree):
        monkeypatch.setattr(module, "describe", no_label)
    tree = ProviderTree()
    root = tree.new_root("cn", "a1b2c3d4-0000-4000-8000-0000000000aa",
                         generation=0)
    child = tree.new_child("cn_NUMA0", root)
    tree.update_inventory(child, {orc.VCPU: {"total": 4}}, generation=1)
    tree.update_traits(child, [os_traits.HW_CPU_X86_AVX, "CUSTOM_T"],
                       generation=2)
    tree.add_traits(root, os_traits.COMPUTE_NODE)
    tree.update_aggregates(root, [AGG])
    assert tree.record(child).generation == 2
    monkeypatch.undo()
    with pytest.raises(InvalidProvider, match=r"provider 'cn_NUMA0' \("):
        tree.update_traits(child, ["bad"])  # an error still names it
