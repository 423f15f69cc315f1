"""Inventory records: one resource class's amounts on one provider.

An :class:`Inventory` is immutable and always complete: fields the caller
leaves out get Placement's defaults (``max_unit`` included: 2**31-1).  It
also remembers which fields the caller gave (:attr:`Inventory.given`), so
the tree can hand back the dict it was given and compare new records the
way Nova's ``ProviderTree`` does (:func:`inventory_changed`).

:func:`validate_inventory` turns what a driver hands over (Nova-style dicts
of dicts, or records) into records, refusing only what Placement itself
refuses (its schema, and a negative capacity) and naming the provider,
resource class and field of the first value at fault.

:func:`fast_inventory` is the tree's fast path: it accepts only input that
is certainly valid (plain dicts of plain ints and floats, or records) and
returns ``None`` for anything else, so that :func:`validate_inventory`
(and its message, with the provider's label built then) runs only for input
that may be wrong.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

import os_resource_classes

from virtdriver.frozen import frozen_builder
from virtdriver.providers.errors import InvalidProvider

#: Placement's largest integer amount (a signed 32-bit column), and its
#: default ``max_unit``.
MAX_INT = 2**31 - 1
#: Placement's largest ``allocation_ratio`` (a single-precision column).
MAX_RATIO = 3.40282e38
#: The same, by the name the option checks use.
MAX_ALLOCATION_RATIO = MAX_RATIO
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

    ``max_unit=None`` means Placement's default, 2**31-1.  Fields read as
    attributes or by name: ``rec["total"]``.  ``given`` names the fields
    the caller set, in the order given (all of them for a record built
    here); it takes no part in equality, which is the complete content.
    Construction does not validate; the tree validates every record it is
    given (see :func:`validate_inventory`).
    """

    total: int
    reserved: int = 0
    min_unit: int = 1
    max_unit: int | None = None
    step_size: int = 1
    allocation_ratio: float = 1.0
    given: tuple[str, ...] = field(default=FIELDS, compare=False, repr=False)

    def __post_init__(self) -> None:
        if self.max_unit is None:
            object.__setattr__(self, "max_unit", MAX_INT)

    def __getitem__(self, field: str) -> int | float:
        if field not in _FIELD_SET:
            raise KeyError(field)
        return getattr(self, field)

    def as_dict(self) -> dict[str, int | float]:
        """The complete record as Placement's JSON object (a new dict)."""
        return {name: getattr(self, name) for name in FIELDS}

    def given_dict(self) -> dict[str, int | float]:
        """The fields the caller gave, as a new dict (what Nova's tree
        would hand back)."""
        return {name: getattr(self, name) for name in self.given}


#: ``Inventory(...)`` for checked values, every field positional (no
#: ``max_unit=None``: pass the value), at a third of the cost.
_make = frozen_builder(Inventory, all_required=True)
# Key tuples of given dicts, interned: records share one tuple per shape.
_GIVEN: dict[tuple, tuple[str, ...]] = {FIELDS: FIELDS}


def _given(keys: tuple) -> tuple[str, ...]:
    found = _GIVEN.get(keys)
    if found is None:
        if len(_GIVEN) > 4096:  # 720 orders of 6 fields at most, and subsets
            _GIVEN.clear()
        found = _GIVEN[keys] = keys
    return found


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
            max_unit = MAX_INT
    else:
        return None
    if not (type(total) is int and 0 < total <= MAX_INT
            and type(reserved) is int and 0 <= reserved <= total
            and type(max_unit) is int and 0 < max_unit <= MAX_INT
            and type(min_unit) is int and 0 < min_unit <= MAX_INT
            and type(step) is int and 0 < step <= MAX_INT):
        return None
    if type(ratio) is not float:
        if type(ratio) is not int:
            return None
        ratio = float(ratio)
    if not 0.0 < ratio <= MAX_RATIO:  # also refuses NaN
        return None
    if type(value) is Inventory:
        if type(value.allocation_ratio) is float:
            return value  # valid, immutable: share it
        return _make(total, reserved, min_unit, max_unit, step, ratio,
                     value.given)
    return _make(total, reserved, min_unit, max_unit, step, ratio,
                 _given(tuple(value)))


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


class InvalidInventory(InvalidProvider):
    """Several resource classes of one inventory are invalid: every one
    is named in the message, so a driver's author fixes them in one go.

    Attributes:
        errors: each class's :class:`InvalidProvider`, in the order given.
    """

    def __init__(self, provider: str, errors: list[InvalidProvider]) -> None:
        self.errors = tuple(errors)
        super().__init__(
            provider, "inventories",
            f"{len(errors)} resource classes are invalid: " + "; ".join(
                f"{e.field}: {e.reason} ({e.hint})" for e in errors),
            "fix each one named")


def validate_inventory(provider: str, inventory: Mapping
                       ) -> Mapping[str, Inventory]:
    """Check a whole inventory and return it as a read-only mapping.

    Args:
        provider: how errors name the provider (see ``errors.describe``).
        inventory: resource class -> :class:`Inventory` or a mapping with
            ``total`` and any of the other :data:`FIELDS`.

    Raises:
        InvalidProvider: naming the provider, ``inventories.<RC>.<field>``,
            what is wrong and what to do; :class:`InvalidInventory` (a
            subclass) naming every invalid class when there are several.
    """
    if not isinstance(inventory, Mapping):
        raise InvalidProvider(
            provider, "inventories",
            f"is a {type(inventory).__name__}, not a mapping",
            "give a dict of resource class -> inventory record")
    records = {}
    errors: list[InvalidProvider] = []
    for rc, value in inventory.items():
        reason = invalid_resource_class_reason(rc)
        if reason:
            errors.append(InvalidProvider(
                provider, "inventories", f"resource class {reason}",
                "use an os_resource_classes constant or a CUSTOM_ name"))
            continue
        try:
            records[rc] = _record(provider, rc, value)
        except InvalidProvider as exc:
            errors.append(exc)
    if len(errors) == 1:
        raise errors[0]
    if errors:
        raise InvalidInventory(provider, errors)
    return MappingProxyType(records)


def _record(provider: str, rc: str, value: object) -> Inventory:
    given = FIELDS
    if isinstance(value, Inventory):
        given = value.given
        value = value.as_dict()
    if not isinstance(value, Mapping):
        raise InvalidProvider(
            provider, f"inventories.{rc}",
            f"is a {type(value).__name__}, not a mapping",
            "give a dict with at least 'total'")
    for name in value:
        if name not in _FIELD_SET:
            raise InvalidProvider(
                provider, f"inventories.{rc}.{name}",
                "is not an inventory field", f"use only {', '.join(FIELDS)}")
    if "total" not in value:
        raise InvalidProvider(provider, f"inventories.{rc}.total", "is missing",
                              "every inventory record needs a total")
    if given is FIELDS:
        given = _given(tuple(value))

    def whole(name: str, default: int | None, low: int) -> int:
        amount = value.get(name, default)
        if amount is None and name == "max_unit":  # left out or None
            amount = MAX_INT
        if (not isinstance(amount, int) or isinstance(amount, bool)
                or not low <= amount <= MAX_INT):
            raise InvalidProvider(
                provider, f"inventories.{rc}.{name}",
                f"{amount!r} is not an integer from {low} to {MAX_INT}",
                f"set {name} to an integer in that range")
        return int(amount)

    total = whole("total", None, 1)
    reserved = whole("reserved", 0, 0)
    min_unit = whole("min_unit", 1, 1)
    max_unit = whole("max_unit", None, 1)
    step_size = whole("step_size", 1, 1)
    ratio = value.get("allocation_ratio", 1.0)
    if (not isinstance(ratio, (int, float)) or isinstance(ratio, bool)
            or not math.isfinite(ratio) or ratio > MAX_RATIO):
        raise InvalidProvider(
            provider, f"inventories.{rc}.allocation_ratio",
            f"{ratio!r} is not a finite number up to {MAX_RATIO:g}",
            "set allocation_ratio to a number such as 1.0 or 16.0")
    if int((total - reserved) * ratio) < 0:
        # Placement's own rule (microversion 1.26 on): the capacity,
        # (total - reserved) * allocation_ratio, may be 0 but not below.
        if reserved > total:
            raise InvalidProvider(
                provider, f"inventories.{rc}.reserved",
                f"{reserved} is greater than total ({total}), which "
                "Placement refuses", "reserve at most the total")
        raise InvalidProvider(
            provider, f"inventories.{rc}.allocation_ratio",
            f"{ratio!r} makes the capacity (total - reserved) * ratio "
            "negative, which Placement refuses",
            "set allocation_ratio to a number above 0")
    return _make(total, reserved, min_unit, max_unit, step_size,
                 float(ratio), given)


def inventory_changed(current: Mapping[str, Inventory], new: object) -> bool:
    """Whether ``new`` differs from ``current`` the way Nova's
    ``ProviderTree`` decides it; never raises.

    Nova's rule: a different set of resource classes is a change; in a
    record, a field the new one has and the stored one was not given is a
    change (even at its default), a field both have is compared by value,
    and a field the new record leaves out is not compared (the stored
    value is kept).  ``new`` is a mapping of dicts or :class:`Inventory`
    records (their :attr:`~Inventory.given` fields count); anything that
    is not is "changed" (it cannot equal what the tree holds).
    """
    if not isinstance(new, Mapping):
        return True
    try:
        if current.keys() != new.keys():
            return True
        for rc, record in current.items():
            value = new[rc]
            if type(value) is Inventory:
                value = value.given_dict()
            elif not isinstance(value, Mapping):
                return True
            given = record.given
            for name in value:
                if name not in given:
                    return True
                if value[name] != getattr(record, name):
                    return True
    except Exception:  # noqa: BLE001 - hostile keys or values: not equal
        return True
    return False
