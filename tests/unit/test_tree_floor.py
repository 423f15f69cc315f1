"""The benchmark's floor (benchmarks/floor_tree.py) validates what the
tree validates: it accepts exactly the inventories, traits, names and
uuids ``ProviderTree`` accepts, and stores the same values — so the
ratio the benchmark reports compares equal work."""

from __future__ import annotations

import pathlib
import sys

from hypothesis import given, settings
from hypothesis import strategies as st

import os_resource_classes as orc
import pytest

from tests.unit.test_tree_fast_paths import (
    BASE, EDGES, collections, inventories, near_valid)
from virtdriver.resource_tracker.provider_tree import (
    Inventory, ProviderTree, ProviderTreeError)

sys.path.insert(0, str(pathlib.Path(__file__).parents[2] / "benchmarks"))
from floor_tree import FloorTree  # noqa: E402

ROOT = "a1b2c3d4-0000-4000-8000-0000000000aa"


def outcome(call, *args):
    try:
        return call(*args)
    except (ValueError, KeyError, TypeError) as exc:
        return type(exc) if not isinstance(exc, ProviderTreeError) else (
            "refused")


def pair():
    tree, floor = ProviderTree(), FloorTree()
    tree.new_root("cn", ROOT)
    floor.new_root("cn", ROOT)
    return tree, floor


@settings(max_examples=300, deadline=None)
@given(inventories)
def test_same_inventories_accepted_and_stored(given):
    if isinstance(given, dict) and any(
            isinstance(value, Inventory) for value in given.values()):
        return  # records are the tree's own type; the floor takes dicts
    tree, floor = pair()
    refused = outcome(tree.update_inventory, ROOT, given) == "refused"
    floor_refused = not isinstance(outcome(floor.update_inventory, ROOT,
                                           given), bool)
    assert refused == floor_refused
    if not refused:
        assert {rc: record.as_dict() for rc, record
                in tree.record(ROOT).inventory.items()} == floor.data(
                    ROOT)["inventory"]


@pytest.mark.parametrize("field", sorted(EDGES) + ["bogus"])
def test_same_verdict_at_each_fields_edges(field):
    inside, outside = EDGES.get(field, ([], [1]))
    for value in inside + outside:
        check_same({orc.VCPU: {**BASE, field: value}})


@settings(max_examples=300, deadline=None)
@given(st.sampled_from([orc.VCPU, "CUSTOM_X", "custom", "CUSTOM_"]),
       near_valid())
def test_same_verdict_on_near_valid_records(rc, record):
    check_same({rc: record})


def check_same(given) -> None:
    tree, floor = pair()
    refused = outcome(tree.update_inventory, ROOT, given) == "refused"
    assert refused == (not isinstance(outcome(floor.update_inventory, ROOT,
                                              given), bool)), given
    if not refused:
        assert {rc: record.as_dict() for rc, record
                in tree.record(ROOT).inventory.items()} == floor.data(
                    ROOT)["inventory"]


@settings(max_examples=200, deadline=None)
@given(collections)
def test_same_traits_accepted(given):
    tree, floor = pair()
    refused = outcome(tree.update_traits, ROOT, given) == "refused"
    assert refused == (not isinstance(outcome(floor.update_traits, ROOT,
                                              given), bool))
    if not refused:
        assert tree.record(ROOT).traits == floor.data(ROOT)["traits"]


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(["n", "", "x" * 200, "x" * 201, 3, "cn", ROOT]),
       st.sampled_from([ROOT.replace("aa", "bb"), ROOT, "cn", ROOT.upper(),
                        "not-a-uuid", 5]))
def test_same_names_and_uuids_accepted(name, uuid):
    tree, floor = pair()
    refused = outcome(tree.new_root, name, uuid) == "refused"
    assert refused == (outcome(floor.new_root, name, uuid) != uuid)
