"""Reading flavor extra specs and image properties, collecting every problem.

Flavor keys are ``hw:<name>`` (plus ``resources[N]:<RC>`` and
``trait[N]:<TRAIT>``), image keys ``hw_<name>`` (plus ``trait:<TRAIT>``).
Values are strings as Nova and Glance store them; numbers and booleans
(from JSON files) are read as their text.  Nothing here raises for bad
input: each parser records a :class:`~virtdriver.claims.model.Problem` and
returns :data:`INVALID`, so one pass reports everything that is wrong.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from fractions import Fraction
from typing import Any

import os_resource_classes as orc

from virtdriver.claims.model import PAGE_SIZES, Flavor, PageSize, Problem
from virtdriver.cpuset import CPUSetError, format_cpuset, parse_cpuset
from virtdriver.providers.inventory import (
    MAX_INT, invalid_resource_class_reason)

#: Returned by a parser whose input was wrong (its problem is recorded).
INVALID: Any = type("Invalid", (), {"__repr__": lambda self: "INVALID"})()

#: Largest flavor vCPU count read (one past the largest CPU id a CPU set
#: may name); far above any real guest.
MAX_VCPUS = 65536

#: A Placement request group suffix (microversion 1.33): ``resources1``,
#: ``resources_ACCEL``.
_GROUP_SUFFIX = "[a-zA-Z0-9_-]{1,64}"
_GROUPED_KEY = re.compile(r"^(resources|trait)([^:]*):(.*)$", re.DOTALL)
#: Most digits a count may have (MAX_INT has 10); a longer text is refused
#: before ``int()`` reads it.
_MAX_DIGITS = 10

_TRUE = frozenset({"1", "t", "true", "on", "y", "yes"})
_FALSE = frozenset({"0", "f", "false", "off", "n", "no"})
_TRAIT_VALUES = ("required", "forbidden")
# A page size: KiB without a unit, else bytes (B) or bits (b, bit) with an
# optional binary multiplier, as Nova's hw:mem_page_size accepts.
_PAGE_SIZE_RE = re.compile(r"^(\d+(?:\.\d+)?)(?:([kKMGT])(i?))?(b|bit|B)?$")
_MULTIPLIERS = {"": 1, "k": 1 << 10, "K": 1 << 10, "M": 1 << 20,
                "G": 1 << 30, "T": 1 << 40}


def flavor_key(name: str) -> str:
    """``hw:<name>``."""
    return f"hw:{name}"


def image_key(name: str) -> str:
    """``hw_<name>``."""
    return f"hw_{name}"


def show(key: str, value: Any) -> str:
    """``key='value'`` for messages."""
    return f"{key}={value!r}"


def cpus_text(cpus) -> str:
    """A CPU set for messages: ``0-3,8``, or ``none``."""
    return format_cpuset(cpus) or "none"


class Inputs:
    """A flavor and image properties being read, and the problems found.

    Attributes:
        flavor: the flavor.
        specs: its extra specs, values as text (those that have text).
        props: the image properties, values as text.
        problems: every problem recorded so far, in order.
    """

    def __init__(self, flavor: Flavor,
                 image_properties: Mapping[str, Any] | None) -> None:
        self.flavor = flavor
        self.problems: list[Problem] = []
        self.specs = self._texts("flavor", flavor.extra_specs)
        self.props = self._texts("image", image_properties or {})

    def refuse(self, message: str, keys: Mapping[str, Any]) -> Any:
        """Record a problem; returns :data:`INVALID` for the caller."""
        self.problems.append(Problem(message, keys))
        return INVALID

    def _texts(self, where: str, values: Mapping[str, Any]) -> dict[str, str]:
        texts = {}
        for key, value in sorted(values.items(), key=lambda kv: str(kv[0])):
            if not isinstance(key, str):
                continue    # not a property name Glance or Nova could hold
            if isinstance(value, bool):
                texts[key] = "true" if value else "false"
            elif isinstance(value, (str, int)):
                texts[key] = str(value)
            elif _relevant(key):
                self.refuse(f"{where} {show(key, value)} is not a string; "
                            "give the value as text, e.g. '2'", {key: value})
        return texts

    # -- the flavor itself -------------------------------------------------

    def flavor_size(self) -> tuple[Any, Any]:
        """The flavor's vCPU count and memory in MiB (or INVALID each)."""
        vcpus, memory = self.flavor.vcpus, self.flavor.memory_mb
        if not _is_int(vcpus) or not 1 <= vcpus <= MAX_VCPUS:
            vcpus = self.refuse(
                f"flavor vcpus={vcpus!r} is not an integer from 1 to "
                f"{MAX_VCPUS}; give the flavor a vCPU count in that range",
                {"vcpus": vcpus})
        if not _is_int(memory) or memory < 1:
            memory = self.refuse(
                f"flavor memory_mb={memory!r} is not a positive integer; "
                "give the flavor its memory in MiB", {"memory_mb": memory})
        return vcpus, memory

    # -- single values -----------------------------------------------------

    def choice(self, key: str, value: str | None, allowed: tuple[str, ...],
               what: str) -> Any:
        """``value`` if it is one of ``allowed`` (None stays None)."""
        if value is None or value in allowed:
            return value
        return self.refuse(f"{self._where(key)} {show(key, value)} is not "
                           f"{what}; use one of {', '.join(allowed)}",
                           {key: value})

    def boolean(self, key: str, value: str | None) -> Any:
        """``value`` read as a boolean (None stays None)."""
        if value is None:
            return None
        if value.strip().lower() in _TRUE:
            return True
        if value.strip().lower() in _FALSE:
            return False
        return self.refuse(f"{self._where(key)} {show(key, value)} is not a "
                           "boolean; use true or false", {key: value})

    def count(self, key: str, value: str | None, what: str,
              minimum: int = 1) -> Any:
        """``value`` read as an integer from ``minimum`` to Placement's
        largest (2147483647)."""
        if value is None:
            return None
        text = value.strip()
        if (text.isascii() and text.isdigit() and len(text) <= _MAX_DIGITS
                and minimum <= int(text) <= MAX_INT):
            return int(text)
        return self.refuse(
            f"{self._where(key)} {_clipped(key, value)} is not "
            f"{'a positive' if minimum == 1 else 'a non-negative'} integer "
            f"(at most {MAX_INT}); set it to {what}", {key: value})

    def page_size(self, key: str, value: str | None) -> PageSize:
        """A page size: ``small``/``large``/``any`` or a size in KiB."""
        if value is None:
            return None
        if value in PAGE_SIZES:
            return value
        match = _PAGE_SIZE_RE.match(value)
        if match:
            number, prefix, binary, unit = match.groups()
            if prefix is None and unit is None:   # a bare number is KiB
                size = Fraction(number)
            else:
                size = (Fraction(number) * _MULTIPLIERS[prefix or ""]
                        / (8 if unit in ("b", "bit") else 1) / 1024)
            if size.denominator == 1 and size >= 1:
                return int(size)
        return self.refuse(
            f"{self._where(key)} {show(key, value)} is not a page size; use "
            "small, large, any, or a whole number of KiB such as 2048, 2MB "
            "or 1GB", {key: value})

    def cpu_set(self, key: str, value: str) -> Any:
        """A CPU set such as ``0-3,^2``."""
        try:
            return parse_cpuset(value)
        except CPUSetError as exc:
            return self.refuse(f"{self._where(key)} {show(key, value)}: "
                               f"{exc}", {key: value})

    def cpu_mask(self, key: str, value: str, vcpus: int) -> Any:
        """A vCPU mask: a CPU set, or one starting with ``^`` that excludes
        vCPUs from all of ``0..vcpus-1``."""
        if value.strip().startswith("^"):
            try:
                return parse_cpuset(f"0-{vcpus - 1},{value}")
            except CPUSetError as exc:
                return self.refuse(f"{self._where(key)} {show(key, value)}: "
                                   f"{exc}", {key: value})
        return self.cpu_set(key, value)

    # -- key families ------------------------------------------------------

    def node_values(self, family: str) -> tuple[dict[int, str],
                                                dict[int, str]]:
        """``hw:<family>.N`` (flavor) and ``hw_<family>.N`` (image) values by
        node id; keys whose ``N`` is not a node id are refused."""
        found = []
        for values, key_of in ((self.specs, flavor_key),
                               (self.props, image_key)):
            prefix = key_of(family) + "."
            by_node = {}
            for key, value in values.items():
                if not key.startswith(prefix):
                    continue
                node = key[len(prefix):]
                if node.isascii() and node.isdigit() and len(node) <= 5:
                    by_node[int(node)] = value
                else:
                    self.refuse(f"{self._where(key)} key {key!r}: {node!r} is "
                                "not a guest node id; name nodes 0, 1, …",
                                {key: value})
            found.append(dict(sorted(by_node.items())))
        return found[0], found[1]

    def request_keys(self) -> None:
        """Refuse keys that look meant but would be ignored: a character
        that does not print (a zero-width space) in any key; a
        ``resources``/``trait`` key whose group suffix is not Placement's
        ``[a-zA-Z0-9_-]{1,64}``; a ``resources`` key naming no resource
        class, or whose amount is not 0 to 2147483647 (1 or more for
        ``MEMORY_MB``: a guest needs memory)."""
        for values in (self.specs, self.props):
            for key, value in values.items():
                if not key.isprintable():
                    odd = next(c for c in key if not c.isprintable())
                    self.refuse(
                        f"{self._where(key)} key {key!r} holds the invisible "
                        f"character U+{ord(odd):04X}; retype the key",
                        {key: value})
        for key, value in self.specs.items():
            match = _GROUPED_KEY.match(key)
            if match is None or not key.isprintable():
                continue
            family, suffix, name = match.groups()
            if suffix and not re.fullmatch(_GROUP_SUFFIX, suffix):
                self.refuse(
                    f"flavor key {key!r}: {suffix!r} is not a request group "
                    f"suffix; write {family}:{name} or {family}N:{name} "
                    f"(a suffix of 1 to 64 of a-z, A-Z, 0-9, _ and -)",
                    {key: value})
            elif family == "resources":
                reason = invalid_resource_class_reason(name)
                if reason is not None:
                    self.refuse(f"flavor key {key!r}: {reason}; name a "
                                "resource class, e.g. resources:VCPU",
                                {key: value})
                elif name not in (orc.VCPU, orc.PCPU):  # resource_amount's
                    self.count(key, value, f"the amount of {name}",
                               minimum=1 if name == orc.MEMORY_MB else 0)

    def resource_amount(self, resource_class: str) -> tuple[Any, list[str]]:
        """Sum of ``resources[N]:<resource_class>`` in the flavor, the keys
        that set it; (None, []) when none does."""
        keys = group_keys(self.specs, "resources", resource_class)
        total: Any = 0
        for key in keys:
            amount = self.count(key, self.specs[key],
                                f"the amount of {resource_class}", minimum=0)
            total = INVALID if INVALID in (amount, total) else total + amount
        return (total if keys else None), keys

    def flavor_trait(self, trait: str) -> tuple[Any, list[str]]:
        """The flavor's ``trait[N]:<trait>`` value, and the keys set."""
        keys = group_keys(self.specs, "trait", trait)
        values = {self.choice(k, self.specs[k], _TRAIT_VALUES,
                              "a trait requirement") for k in keys}
        if INVALID in values:
            return INVALID, keys
        if len(values) > 1:
            return self.refuse(
                "flavor " + ", ".join(show(k, self.specs[k]) for k in keys)
                + " both require and forbid the trait; keep one",
                {k: self.specs[k] for k in keys}), keys
        return (values.pop() if values else None), keys

    def image_trait(self, trait: str) -> Any:
        """The image's ``trait:<trait>`` value (required or forbidden)."""
        key = f"trait:{trait}"
        return self.choice(key, self.props.get(key), _TRAIT_VALUES,
                           "a trait requirement")

    @staticmethod
    def _where(key: str) -> str:
        return "image" if key.startswith("hw_") else "flavor"


def group_keys(specs: Mapping[str, Any], prefix: str, name: str
               ) -> list[str]:
    """The keys ``<prefix>:<name>`` and ``<prefix><SUFFIX>:<name>``
    (Placement request groups, e.g. ``resources1:PCPU``,
    ``resources_ACCEL:VCPU``), sorted."""
    pattern = re.compile(rf"^{prefix}({_GROUP_SUFFIX})?:{re.escape(name)}$")
    return sorted(k for k in specs if pattern.match(k))


def flavor_traits(extra_specs: Mapping[str, Any]
                  ) -> tuple[frozenset[str], frozenset[str]]:
    """The traits the flavor's unsuffixed group (``trait:<NAME>``) requires
    and forbids — the group image traits join."""
    required = {k[len("trait:"):] for k, v in extra_specs.items()
                if k.startswith("trait:") and v == "required"}
    forbidden = {k[len("trait:"):] for k, v in extra_specs.items()
                 if k.startswith("trait:") and v == "forbidden"}
    return frozenset(required), frozenset(forbidden)


def _clipped(key: str, value: str) -> str:
    """``show(key, value)``, a value of more than 40 characters cut."""
    return show(key, value if len(value) <= 40
                else value[:20] + f"...({len(value)} characters)")


def _relevant(key: str) -> bool:
    return key.startswith(("hw:", "hw_", "resources", "trait"))


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)

