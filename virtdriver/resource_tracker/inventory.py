"""Inventory records: one resource class's amounts on one provider.

An :class:`Inventory` is immutable and always complete: fields the caller
leaves out get Placement's defaults, except ``max_unit``, which defaults to
``total`` (Placement's own default, 2**31-1, would break the rule
``max_unit <= total`` this tree enforces).  :func:`validate_inventory` turns
what a driver hands over (Nova-style dicts of dicts, or records) into
records, checking every rule and naming the provider, resource class and
field of the first one broken.

:func:`fast_inventory` is the tree's fast path: it accepts only input that
is certainly valid (plain dicts of plain ints and floats, or valid records)
and returns ``None`` for anything else, so that :func:`validate_inventory`
(and its message, with the provider's label built then) runs only for input
that may be wrong.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from types import MappingProxyType

import os_resource_classes

from virtdriver.frozen import frozen_builder
from virtdriver.resource_tracker.errors import InvalidProvider

#: Placement's largest integer amount (a signed 32-bit column).
MAX_INT = 2**31 - 1
#: Placement's largest allocation ratio (its schema's ``maximum``, a
#: 32-bit float's largest value).
MAX_ALLOCATION_RATIO = 3.40282e+38
#: The fields of a record, in Placement's order.
FIELDS = ("total", "reserved", "min_unit", "max_unit", "step_size",
          "allocation_ratio")
_STANDARD_CLASSES = frozenset(os_resource_classes.STANDARDS)
_CUSTOM_CLASS = re.compile(r"CUSTOM_[A-Z0-9_]+")
_MAX_CLASS_LENGTH = 255
_CUSTOM_MATCH = _CUSTOM_CLASS.fullmatch
_FIELD_SET = frozenset(FIELDS)
_INF = math.inf


@dataclass(frozen=True, slots=True)
class Inventory:
    """One resource class's inventory on a provider (read-only).

    ``max_unit=None`` means ``total``.  Fields read as attributes or, like
    the dicts Nova's ``ProviderTree`` hands out, by name: ``rec["total"]``.
    Construction does not validate; the tree validates every record it is
    given (see :func:`validate_inventory`).
    """

    total: int
    reserved: int = 0
    min_unit: int = 1
    max_unit: int | None = None
    step_size: int = 1
    allocation_ratio: float = 1.0

    def __post_init__(self) -> None:
        if self.max_unit is None:
            object.__setattr__(self, "max_unit", self.total)

    def __getitem__(self, field: str) -> int | float:
        if field not in FIELDS:
            raise KeyError(field)
        return getattr(self, field)

    def as_dict(self) -> dict[str, int | float]:
        """The record as Placement's JSON object (a new dict)."""
        return asdict(self)


#: ``Inventory(...)`` for checked values, every field positional (no
#: ``max_unit=None``: pass the total), at a third of the cost.
_make = frozen_builder(Inventory, all_required=True)


def _fast_record(value: object) -> Inventory | None:
    """The record for a plain dict or a record that is certainly valid."""
    if type(value) is Inventory:
        total, reserved, min_unit, max_unit, step, ratio = (
            value.total, value.reserved, value.min_unit, value.max_unit,
            value.step_size, value.allocation_ratio)
    elif type(value) is dict and value.keys() <= _FIELD_SET:
        get = value.get
        total, reserved, min_unit = get("total"), get("reserved", 0), get(
            "min_unit", 1)
        max_unit, step = get("max_unit"), get("step_size", 1)
        ratio = get("allocation_ratio", 1.0)
        if max_unit is None:
            max_unit = total
    else:
        return None
    if not (type(total) is int and 0 < total <= MAX_INT
            and type(reserved) is int and 0 <= reserved <= total
            and type(max_unit) is int and 0 < max_unit <= total
            and type(min_unit) is int and 0 < min_unit <= max_unit
            and type(step) is int and 0 < step <= MAX_INT):
        return None
    if type(ratio) is not float:
        if type(ratio) is not int:
            return None
        ratio = float(ratio)
    if not 0.0 < ratio < _INF:  # also refuses NaN
        return None
    if type(value) is Inventory and type(value.allocation_ratio) is float:
        return value  # valid, immutable: share it
    return _make(total, reserved, min_unit, max_unit, step, ratio)


def fast_inventory(inventory: object) -> Mapping[str, Inventory] | None:
    """:func:`validate_inventory`'s result when ``inventory`` is a plain
    dict of certainly valid records, else ``None`` (then validate it)."""
    if type(inventory) is not dict:
        return None
    records = {}
    for rc, value in inventory.items():
        if rc not in _STANDARD_CLASSES and not (
                type(rc) is str and len(rc) <= _MAX_CLASS_LENGTH
                and _CUSTOM_MATCH(rc)):
            return None
        record = _fast_record(value)
        if record is None:
            return None
        records[rc] = record
    return MappingProxyType(records)


def invalid_resource_class_reason(name: object) -> str | None:
    """Why ``name`` is not a resource class name, or ``None`` when it is."""
    if name in _STANDARD_CLASSES:
        return None
    if not isinstance(name, str):
        return f"{name!r} is not a string"
    if len(name) > _MAX_CLASS_LENGTH:
        return f"{name[:40]!r}... is longer than {_MAX_CLASS_LENGTH} characters"
    if not _CUSTOM_CLASS.fullmatch(name):
        return (f"{name!r} is neither an os-resource-classes standard class "
                "nor a CUSTOM_[A-Z0-9_]+ name")
    return None


def validate_inventory(provider: str, inventory: Mapping
                       ) -> Mapping[str, Inventory]:
    """Check a whole inventory and return it as a read-only mapping.

    Args:
        provider: how errors name the provider (see ``errors.describe``).
        inventory: resource class -> :class:`Inventory` or a mapping with
            ``total`` and any of the other :data:`FIELDS`.

    Raises:
        InvalidProvider: naming the provider, ``inventories.<RC>.<field>``,
            what is wrong and what to do.
    """
    if not isinstance(inventory, Mapping):
        raise InvalidProvider(
            provider, "inventories",
            f"is a {type(inventory).__name__}, not a mapping",
            "give a dict of resource class -> inventory record")
    records = {}
    for rc, value in inventory.items():
        reason = invalid_resource_class_reason(rc)
        if reason:
            raise InvalidProvider(
                provider, "inventories", f"resource class {reason}",
                "use an os_resource_classes constant or a CUSTOM_ name")
        records[rc] = _record(provider, rc, value)
    return MappingProxyType(records)


def _record(provider: str, rc: str, value: object) -> Inventory:
    if isinstance(value, Inventory):
        value = value.as_dict()
    if not isinstance(value, Mapping):
        raise InvalidProvider(
            provider, f"inventories.{rc}",
            f"is a {type(value).__name__}, not a mapping",
            "give a dict with at least 'total'")
    for field in value:
        if field not in FIELDS:
            raise InvalidProvider(
                provider, f"inventories.{rc}.{field}",
                "is not an inventory field", f"use only {', '.join(FIELDS)}")
    if "total" not in value:
        raise InvalidProvider(provider, f"inventories.{rc}.total", "is missing",
                              "every inventory record needs a total")

    def whole(field: str, default: int | None, low: int, low_text: str,
              high: int, high_text: str) -> int:
        amount = value.get(field, default)
        if amount is None and field == "max_unit":  # left out or None
            amount = high
        if (not isinstance(amount, int) or isinstance(amount, bool)
                or not low <= amount <= high):
            raise InvalidProvider(
                provider, f"inventories.{rc}.{field}",
                f"{amount!r} is not an integer from {low_text} to {high_text}",
                f"set {field} to an integer in that range")
        return amount

    total = whole("total", None, 1, "1", MAX_INT, str(MAX_INT))
    reserved = whole("reserved", 0, 0, "0", total, f"total ({total})")
    max_unit = whole("max_unit", None, 1, "1", total, f"total ({total})")
    min_unit = whole("min_unit", 1, 1, "1", max_unit,
                     f"max_unit ({max_unit})")
    step_size = whole("step_size", 1, 1, "1", MAX_INT, str(MAX_INT))
    ratio = value.get("allocation_ratio", 1.0)
    if (not isinstance(ratio, (int, float)) or isinstance(ratio, bool)
            or not 0 < ratio <= MAX_ALLOCATION_RATIO):
        raise InvalidProvider(
            provider, f"inventories.{rc}.allocation_ratio",
            f"{ratio!r} is not a finite number above 0 and at most "
            f"{MAX_ALLOCATION_RATIO:g} (Placement's largest)",
            "set allocation_ratio to a positive number such as 1.0 or 16.0")
    return Inventory(total, reserved, min_unit, max_unit, step_size,
                     float(ratio))
