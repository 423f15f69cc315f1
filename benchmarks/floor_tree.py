"""The floor for ``bench_provider_tree.py``: plain dicts plus a lock.

The least a provider tree can do and still be correct: a lock, a dict of
mutable per-provider dicts by uuid, a name index and ordered child sets,
and *the same validation* as ``ProviderTree`` — provider names, canonical
uuids, names and uuids unique, every inventory rule (resource class, known
fields, Placement's integer ranges, capacity not negative, finite ratio,
defaults filled), trait names through the same ``trait_reason``.  Each
write also reports whether anything changed, as the tree's do.  What it
leaves out is what the tree adds on top: immutable records, snapshots,
savepoints, stamps, labelled error messages (its messages are short).
Not used by ``virtdriver`` itself.
"""

from __future__ import annotations

import math
import re
import threading
from collections.abc import Mapping

import os_resource_classes
import os_traits

from virtdriver.providers.record import trait_reason

MAX_INT = 2**31 - 1
MAX_RATIO = 3.40282e38
FIELDS = frozenset(("total", "reserved", "min_unit", "max_unit", "step_size",
                    "allocation_ratio"))
_CLASSES = frozenset(os_resource_classes.STANDARDS)
_TRAITS = frozenset(os_traits.get_traits())
_CUSTOM = re.compile(r"CUSTOM_[A-Z0-9_]{1,248}")
_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-"
                   r"[0-9a-f]{12}")


def _whole(value, low: int, high: int) -> int:
    if (not isinstance(value, int) or isinstance(value, bool)
            or not low <= value <= high):
        raise ValueError(f"{value!r} is not an integer in {low}..{high}")
    return value


def check_inventory(inventory: Mapping) -> dict:
    """A new dict of complete records; ``ValueError`` on any broken rule."""
    if not isinstance(inventory, Mapping):
        raise ValueError("inventory is not a mapping")
    records = {}
    for rc, rec in inventory.items():
        if rc not in _CLASSES and not (isinstance(rc, str)
                                       and _CUSTOM.fullmatch(rc)):
            raise ValueError(f"bad resource class {rc!r}")
        if not isinstance(rec, Mapping) or not FIELDS.issuperset(rec):
            raise ValueError(f"bad record for {rc}")
        total = _whole(rec["total"], 1, MAX_INT)  # KeyError: no total
        reserved = _whole(rec.get("reserved", 0), 0, MAX_INT)
        max_unit = rec.get("max_unit")
        max_unit = MAX_INT if max_unit is None else _whole(max_unit, 1,
                                                           MAX_INT)
        min_unit = _whole(rec.get("min_unit", 1), 1, MAX_INT)
        step = _whole(rec.get("step_size", 1), 1, MAX_INT)
        ratio = rec.get("allocation_ratio", 1.0)
        if (not isinstance(ratio, (int, float)) or isinstance(ratio, bool)
                or not math.isfinite(ratio) or ratio > MAX_RATIO
                or int((total - reserved) * ratio) < 0):
            raise ValueError(f"bad allocation_ratio {ratio!r}")
        records[rc] = {"total": total, "reserved": reserved,
                       "min_unit": min_unit, "max_unit": max_unit,
                       "step_size": step, "allocation_ratio": float(ratio)}
    return records


def check_traits(traits) -> frozenset:
    """The traits as a frozenset; ``ValueError`` for a bad name."""
    if isinstance(traits, (str, bytes)):
        raise ValueError("traits is a single string")
    found = frozenset(traits)
    for trait in found - _TRAITS:  # standard names need no further check
        if not isinstance(trait, str) or trait_reason(trait):
            raise ValueError(f"bad trait {trait!r}")
    return found


class FloorTree:
    """``new_root``, ``new_child``, ``update_inventory``, ``update_traits``,
    ``data`` (by name or uuid): what the benchmark's workloads call."""

    def __init__(self) -> None:
        self.lock = threading.RLock()
        self.by_uuid: dict[str, dict] = {}
        self.by_name: dict[str, str] = {}
        self.children: dict[str | None, dict[str, None]] = {None: {}}

    def data(self, name_or_uuid: str) -> dict:
        with self.lock:
            return self._get(name_or_uuid)

    def new_root(self, name: str, uuid: str) -> str:
        with self.lock:
            return self._add(name, uuid, None)

    def new_child(self, name: str, parent: str, uuid: str) -> str:
        with self.lock:
            return self._add(name, uuid, self._get(parent))

    def update_inventory(self, name_or_uuid: str, inventory: Mapping) -> bool:
        with self.lock:
            provider = self._get(name_or_uuid)
            records = check_inventory(inventory)
            changed = records != provider["inventory"]
            provider["inventory"] = records
            return changed

    def update_traits(self, name_or_uuid: str, traits) -> bool:
        with self.lock:
            provider = self._get(name_or_uuid)
            traits = check_traits(traits)
            changed = traits != provider["traits"]
            provider["traits"] = traits
            return changed

    def _get(self, name_or_uuid: str) -> dict:
        found = self.by_uuid.get(name_or_uuid)
        if found is None:
            found = self.by_uuid[self.by_name[name_or_uuid]]  # KeyError
        return found

    def _add(self, name: str, uuid: str, parent: dict | None) -> str:
        if not isinstance(name, str) or not 0 < len(name) <= 200:
            raise ValueError(f"bad name {name!r}")
        if not isinstance(uuid, str) or not _UUID.fullmatch(uuid):
            raise ValueError(f"bad uuid {uuid!r}")
        if (uuid in self.by_uuid or uuid in self.by_name
                or name in self.by_uuid or name in self.by_name):
            raise ValueError(f"{name!r} or {uuid!r} is taken")
        parent_uuid = parent["uuid"] if parent else None
        self.by_uuid[uuid] = {
            "uuid": uuid, "name": name, "generation": None,
            "parent_uuid": parent_uuid,
            "root_uuid": parent["root_uuid"] if parent else uuid,
            "inventory": {}, "traits": frozenset(),
            "aggregates": frozenset()}
        self.by_name[name] = uuid
        self.children.setdefault(parent_uuid, {})[uuid] = None
        return uuid
