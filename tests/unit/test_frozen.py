"""virtdriver.frozen.frozen_builder with all_required: the records the tree
builds on every write (ProviderData, Inventory) are ordinary frozen ones."""

from __future__ import annotations

import dataclasses

import pytest

from virtdriver.frozen import frozen_builder
from virtdriver.providers.inventory import Inventory
from virtdriver.providers.record import ProviderData, make_record

UUID = "12345678-1234-1234-1234-123456789012"


def test_all_required_builds_a_class_with_post_init_and_factories():
    build = frozen_builder(Inventory, all_required=True)
    made = build(8, 1, 1, 2**31 - 1, 1, 2.0, ("total",))
    assert type(made) is Inventory
    assert made == Inventory(8, 1, 1, None, 1, 2.0)
    assert made.given == ("total",)
    assert hash(made) == hash(Inventory(8, 1, 1, 2**31 - 1, 1, 2.0))
    with pytest.raises(dataclasses.FrozenInstanceError):
        made.total = 9
    with pytest.raises(TypeError):
        build(8)  # every field is required: no default max_unit=None


def test_without_all_required_post_init_and_factories_are_refused():
    with pytest.raises(TypeError, match="frozen_builder needs"):
        frozen_builder(Inventory)
    with pytest.raises(TypeError, match="plain defaults"):
        frozen_builder(ProviderData)


def test_make_record_is_an_ordinary_record():
    args = (UUID, "node", 3, None, UUID, {}, frozenset({"CUSTOM_A"}),
            frozenset(), {})
    made = make_record(*args)
    assert type(made) is ProviderData
    assert made == ProviderData(*args)
    assert dataclasses.replace(made, generation=4).generation == 4
    with pytest.raises(dataclasses.FrozenInstanceError):
        made.traits = frozenset()
