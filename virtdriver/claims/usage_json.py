"""The claims document: :class:`~virtdriver.claims.usage.HostUsage` as JSON.

The tracker keeps it in the state directory; a file may have been edited,
truncated or written by someone hostile, so reading it trusts nothing::

    {"format": "virtdriver-claims", "version": 1,
     "instances": {"<uuid>": {
         "uuid": "<uuid>", "cpu_thread_policy": "isolate" | ... | null,
         "floating": {"vcpus": 0, "memory_mb": 0},
         "cells": [{"guest_cell": 0, "host_cell": 1,
                    "pinning": {"0": 4, "1": 5}, "shared_vcpus": [2],
                    "memory_mb": 2048, "page_size_kib": 2048,
                    "reserved_cpus": [20, 21], "emulator_cpus": []}]}}}

Every key is required and no other is allowed; numbers are whole (not
booleans), CPU ids within :data:`~virtdriver.cpuset.MAX_CPU_ID`, amounts
within Placement's 2**31-1.  Then the fits must be consistent (no host CPU
taken twice) and, given the host, fit it by every capacity rule of
:mod:`virtdriver.claims.capacity` — pins outside the host's dedicated CPUs,
shared vCPUs over the ratio, pages beyond the pool are refused.  Every
problem is reported at once, each naming its field.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

from virtdriver.claims.capacity import check_capacity
from virtdriver.claims.device_claim import device_claim_from_json
from virtdriver.claims.model import THREAD_POLICIES, ClaimError
from virtdriver.claims.usage import (
    CellFit, HostUsage, InstanceFit, overlap_problems)
from virtdriver.cpuset import MAX_CPU_ID
from virtdriver.drivers.host_resources import HostResources

FORMAT = "virtdriver-claims"
VERSION = 1
MAX_AMOUNT = 2**31 - 1
_MAX_UUID = 255
_DIGITS = re.compile(r"0|[1-9][0-9]*")
#: An instance id: a uuid, or a test's "i-1"; never a path ("../../etc").
_INSTANCE_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")
_FIT_KEYS = ("uuid", "cells", "cpu_thread_policy", "floating")
_CELL_KEYS = ("guest_cell", "host_cell", "pinning", "shared_vcpus",
              "memory_mb", "page_size_kib", "reserved_cpus", "emulator_cpus")
_HINT = ("fix or remove the entries named (the file was edited, or the "
         "host's CPU or page options changed since the claims were made)")


class InvalidClaims(ClaimError):
    """A claims document that cannot be trusted.

    Attributes:
        problems: every problem, each naming its field.
    """

    def __init__(self, problems: list[str]) -> None:
        self.problems = tuple(problems)
        super().__init__("claims document refused: " + "; ".join(problems)
                         + f"; {_HINT}")


def fit_to_json(fit: InstanceFit) -> dict[str, Any]:
    """The document of one fit (CPU lists sorted, pinning keys strings)."""
    return {
        "uuid": fit.uuid,
        "cpu_thread_policy": fit.cpu_thread_policy,
        "floating": {"vcpus": fit.floating_vcpus,
                     "memory_mb": fit.floating_memory_mb},
        "cells": [{
            "guest_cell": c.guest_cell, "host_cell": c.host_cell,
            "pinning": {str(v): p for v, p in sorted(c.pinning.items())},
            "shared_vcpus": sorted(c.shared_vcpus),
            "memory_mb": c.memory_mb, "page_size_kib": c.page_size_kib,
            "reserved_cpus": sorted(c.reserved_cpus),
            "emulator_cpus": sorted(c.emulator_cpus),
        } for c in fit.cells],
        # Only when there are some: a claim without devices is written as
        # before them.
        **({"devices": [d.to_json() for d in fit.devices]}
           if fit.devices else {}),
    }


def usage_to_json(usage: HostUsage) -> dict[str, Any]:
    """The claims document of ``usage`` (instances sorted by uuid)."""
    return {"format": FORMAT, "version": VERSION,
            "instances": {uuid: fit_to_json(fit)
                          for uuid, fit in sorted(usage.instances.items())}}


def fit_from_json(document: Any, where: str = "fit") -> InstanceFit:
    """One fit from its document (types and inner consistency checked).

    Raises:
        InvalidClaims: every field at fault.
    """
    problems: list[str] = []
    fit = _Reader(problems).fit(document, where)
    if fit is not None:
        problems.extend(overlap_problems({fit.uuid: fit},
                                         lambda _uuid: where))
    if problems or fit is None:
        raise InvalidClaims(problems)
    return fit


def usage_from_json(document: Any, host: HostResources | None, *,
                    cpu_allocation_ratio: float | None = None) -> HostUsage:
    """The usage of a claims document (module rules); ``host=None`` checks
    the document alone, not its capacity.

    Raises:
        InvalidClaims: every problem, each naming its field.
    """
    problems: list[str] = []
    read = _Reader(problems)
    if not isinstance(document, dict):
        raise InvalidClaims([f"the document is {_kind(document)}, not an "
                             "object"])
    read.keys(document, "", ("format", "version", "instances"))
    if "format" in document and document["format"] != FORMAT:
        problems.append(f"format: {document['format']!r} is not {FORMAT!r}")
    if "version" in document and document["version"] != VERSION:
        problems.append(f"version: {document['version']!r} is not {VERSION}, "
                        "the only version this virtdriver reads")
    fits: dict[str, InstanceFit] = {}
    instances = document.get("instances")
    if not isinstance(instances, dict):
        if "instances" in document:
            problems.append(f"instances: {_kind(instances)}, not an object "
                            "of instance uuid -> fit")
        raise InvalidClaims(problems)
    for key, value in instances.items():
        fit = read.fit(value, f"instances.{key}", key)
        if fit is not None:
            fits[key] = fit
    if problems:
        raise InvalidClaims(problems)
    problems.extend(overlap_problems(fits))
    if problems:
        raise InvalidClaims(problems)
    usage = HostUsage(fits)
    if host is not None:
        problems.extend(check_capacity(
            usage, host, cpu_allocation_ratio=cpu_allocation_ratio))
    if problems:
        raise InvalidClaims(problems)
    return usage


def _clip(value: Any) -> str:
    shown = _kind(value) if not isinstance(value, str) else repr(value)
    return shown if len(shown) <= 60 else shown[:57] + "..."


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return f"the boolean {str(value).lower()}"
    return {dict: "an object", list: "a list", str: "a string"}.get(
        type(value), f"the number {value!r}" if isinstance(
            value, (int, float)) else type(value).__name__)


class _Reader:
    """Reads typed fields, appending a problem per bad field."""

    def __init__(self, problems: list[str]) -> None:
        self.problems = problems

    def bad(self, where: str, what: str) -> None:
        self.problems.append(f"{where}: {what}")

    def keys(self, doc: dict, where: str, wanted: tuple[str, ...]) -> bool:
        prefix = f"{where}." if where else ""
        missing = [k for k in wanted if k not in doc]
        extra = sorted(str(k) for k in doc if k not in wanted)
        for key in missing:
            self.bad(f"{prefix}{key}", "missing")
        for key in extra:
            self.bad(f"{prefix}{key}", "is not a field of a claim (fields: "
                     f"{', '.join(wanted)})")
        return not missing

    def number(self, value: Any, where: str, maximum: int,
               minimum: int = 0) -> int | None:
        if type(value) is not int or not minimum <= value <= maximum:
            self.bad(where, f"{_kind(value)}, not a whole number from "
                     f"{minimum} to {maximum}")
            return None
        return value

    def cpus(self, value: Any, where: str) -> frozenset[int] | None:
        if not isinstance(value, list):
            self.bad(where, f"{_kind(value)}, not a list of CPU ids")
            return None
        ids = [self.number(v, f"{where}[{i}]", MAX_CPU_ID)
               for i, v in enumerate(value)]
        if None in ids:
            return None
        if len(set(ids)) != len(ids):
            self.bad(where, "lists a CPU more than once")
            return None
        return frozenset(ids)

    def pinning(self, value: Any, where: str) -> dict[int, int] | None:
        if not isinstance(value, dict):
            self.bad(where, f"{_kind(value)}, not an object of guest vCPU "
                     "-> host CPU")
            return None
        result = {}
        for key, cpu in value.items():
            if not (isinstance(key, str) and _DIGITS.fullmatch(key)
                    and int(key) <= MAX_CPU_ID):
                self.bad(f"{where}.{key}", "is not a guest vCPU id")
                continue
            host_cpu = self.number(cpu, f"{where}.{key}", MAX_CPU_ID)
            if host_cpu is not None:
                result[int(key)] = host_cpu
        return result if len(result) == len(value) else None

    def fit(self, doc: Any, where: str, key: str | None = None
            ) -> InstanceFit | None:
        start = len(self.problems)
        if not isinstance(doc, dict):
            self.bad(where, f"{_kind(doc)}, not an object")
            return None
        # "devices" is optional: files written before device claims load.
        if not self.keys({k: v for k, v in doc.items() if k != "devices"},
                         where, _FIT_KEYS):
            return None
        devices = self.devices(doc.get("devices", []), f"{where}.devices")
        uuid = doc["uuid"]
        if not (isinstance(uuid, str) and 0 < len(uuid) <= _MAX_UUID
                and _INSTANCE_ID.fullmatch(uuid)):
            self.bad(f"{where}.uuid", f"{_clip(uuid)}, not an instance uuid "
                     "(letters, digits, '-', '_' and '.', from a letter or "
                     "digit)")
        elif key is not None and uuid != key:
            self.bad(f"{where}.uuid", f"{uuid!r} is not the key it is under")
        policy = doc["cpu_thread_policy"]
        if policy is not None and policy not in THREAD_POLICIES:
            self.bad(f"{where}.cpu_thread_policy", f"{policy!r} is not null "
                     f"or one of {', '.join(THREAD_POLICIES)}")
        floating = self.section(doc["floating"], f"{where}.floating",
                                ("vcpus", "memory_mb"), {
                                    "vcpus": MAX_CPU_ID + 1,
                                    "memory_mb": MAX_AMOUNT})
        cells = doc["cells"]
        if not isinstance(cells, list):
            self.bad(f"{where}.cells", f"{_kind(cells)}, not a list")
            cells = []
        parsed = [self.cell(c, f"{where}.cells[{i}]")
                  for i, c in enumerate(cells)]
        if len(self.problems) > start or floating is None or devices is None:
            return None
        guest = sorted(c.guest_cell for c in parsed)
        if guest != list(range(len(parsed))):
            self.bad(f"{where}.cells", f"guest cells {guest} are not 0 to "
                     f"{len(parsed) - 1}, each once (one per guest NUMA "
                     "node)")
            return None
        if cells and (floating["vcpus"] or floating["memory_mb"]):
            self.bad(f"{where}.floating", "an instance with cells has no "
                     "floating vCPUs or memory")
            return None
        return InstanceFit(uuid, tuple(parsed), policy, floating["vcpus"],
                           floating["memory_mb"], devices)

    def devices(self, doc: Any, where: str) -> tuple | None:
        if not isinstance(doc, list):
            self.bad(where, f"{_kind(doc)}, not a list of device claims")
            return None
        found = [device_claim_from_json(d, f"{where}[{i}]", self.problems)
                 for i, d in enumerate(doc)]
        return None if None in found else tuple(found)

    def section(self, doc: Any, where: str, wanted: tuple[str, ...],
                limits: Mapping[str, int]) -> dict[str, int] | None:
        if not isinstance(doc, dict):
            self.bad(where, f"{_kind(doc)}, not an object")
            return None
        if not self.keys(doc, where, wanted):
            return None
        values = {k: self.number(doc[k], f"{where}.{k}", limits[k])
                  for k in wanted}
        return None if None in values.values() else values

    def cell(self, doc: Any, where: str) -> CellFit | None:
        if not isinstance(doc, dict):
            self.bad(where, f"{_kind(doc)}, not an object")
            return None
        if not self.keys(doc, where, _CELL_KEYS):
            return None
        field: dict[str, Callable[[Any, str], Any]] = {
            "guest_cell": lambda v, w: self.number(v, w, MAX_CPU_ID),
            "host_cell": lambda v, w: self.number(v, w, MAX_CPU_ID),
            "pinning": self.pinning,
            "shared_vcpus": self.cpus,
            "memory_mb": lambda v, w: self.number(v, w, MAX_AMOUNT,
                                                  minimum=1),
            "page_size_kib": lambda v, w: None if v is None else self.number(
                v, w, MAX_AMOUNT, minimum=1),
            "reserved_cpus": self.cpus,
            "emulator_cpus": self.cpus,
        }
        start = len(self.problems)
        values = {k: read(doc[k], f"{where}.{k}") for k, read in field.items()}
        if len(self.problems) > start:
            return None
        return CellFit(**values)
