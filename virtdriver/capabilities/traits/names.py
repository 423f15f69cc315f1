"""Trait names: validation, and CUSTOM_ names built from arbitrary values.

Standard names come from ``os_traits``; custom ones must match
``^CUSTOM_[A-Z0-9_]+$`` and fit Placement's 255 characters.
"""

from __future__ import annotations

import hashlib
import re

import os_traits

#: Placement's limit on a trait name.
MAX_TRAIT_LENGTH = 255
CUSTOM_PREFIX = "CUSTOM_"
_CUSTOM_RE = re.compile(r"^CUSTOM_[A-Z0-9_]+$")
_STANDARD = frozenset(os_traits.get_traits())
_HASH_CHARS = 8


class TraitNameError(ValueError):
    """A trait name is not valid, or two values collide on one name."""


def is_standard(name: str) -> bool:
    """Whether ``name`` is an os-traits standard trait."""
    return name in _STANDARD


def invalid_reason(name: str) -> str | None:
    """Why ``name`` is not a valid trait name, or ``None`` when it is:
    one clause per rule it breaks, each naming the rule and what in
    ``name`` breaks it, joined by ``; `` (it reads after "is not a valid
    trait name:", after a dash or in parentheses)."""
    if name in _STANDARD:
        return None
    custom = name.startswith(CUSTOM_PREFIX)
    reasons = []
    if not custom:
        reasons.append("neither an os-traits standard trait nor a CUSTOM_ "
                       f"name (os-traits {_os_traits_version()})")
    elif name == CUSTOM_PREFIX:
        reasons.append(f"custom names must match {_CUSTOM_RE.pattern}, and "
                       "it has nothing after CUSTOM_")
    foreign = _foreign_characters(name)
    if foreign:
        rule = (f"custom names must match {_CUSTOM_RE.pattern}" if custom
                else "trait names hold only A-Z, 0-9 and _")
        reasons.append(f"{rule}, and it has {foreign}")
    if len(name) > MAX_TRAIT_LENGTH:
        reasons.append(f"trait names are at most {MAX_TRAIT_LENGTH} "
                       f"characters, and it has {len(name)}")
    return "; ".join(reasons) or None


#: How many of a name's foreign characters a reason shows.
_SHOWN_CHARACTERS = 5


def _foreign_characters(name: str) -> str:
    """The characters of ``name`` outside ``[A-Z0-9_]``, in words
    (``""`` when there are none)."""
    lower = False
    others: dict[str, None] = {}
    for char in name:
        if "a" <= char <= "z":
            lower = True
        elif not ("A" <= char <= "Z" or "0" <= char <= "9" or char == "_"):
            others.setdefault(char)
    shown = ", ".join(map(repr, list(others)[:_SHOWN_CHARACTERS]))
    if len(others) > _SHOWN_CHARACTERS:
        shown += f" and {len(others) - _SHOWN_CHARACTERS} more"
    words = (["lower-case letters"] if lower else []) + (
        [f"the character{'s' if len(others) > 1 else ''} {shown}"]
        if others else [])
    return " and ".join(words)


def validate_trait(name: str) -> str:
    """Return ``name`` if it is a valid trait name, else raise.

    Raises:
        TraitNameError: naming the trait and what is wrong with it.
    """
    reason = invalid_reason(name)
    if reason:
        raise TraitNameError(f"invalid trait name {name!r}: {reason}")
    return name


def custom_trait(namespace: str, value: str) -> str:
    """A valid ``CUSTOM_<NAMESPACE>_<VALUE>`` name for an arbitrary value.

    Characters outside ``A-Z0-9_`` become ``_`` (``os_traits
    .normalize_name``); a ``CUSTOM_`` the caller already put in front is
    not doubled.  Values too long for 255 characters are cut and given a
    short hash of the whole value, so the result is deterministic and
    different long values stay different.  Two values that still normalise
    to one name (``a-b`` and ``a.b``) are caught by :class:`CustomTraitNamer`.

    Raises:
        TraitNameError: the namespace is empty or normalises to nothing.
    """
    space = _strip_custom(os_traits.normalize_name(namespace))
    if not space.strip("_"):
        raise TraitNameError(f"custom trait namespace {namespace!r} has no "
                             "letters or digits")
    body = os_traits.normalize_name(value)[len(CUSTOM_PREFIX):]
    name = f"{CUSTOM_PREFIX}{space}_{body}"
    if len(name) > MAX_TRAIT_LENGTH:
        digest = hashlib.sha256(value.encode("utf-8", "surrogatepass"))
        suffix = "_" + digest.hexdigest()[:_HASH_CHARS].upper()
        name = name[:MAX_TRAIT_LENGTH - len(suffix)] + suffix
    return validate_trait(name)


def _strip_custom(normalized: str) -> str:
    # normalize_name() always prefixes CUSTOM_; a namespace that itself
    # began with CUSTOM_ would otherwise come out as CUSTOM_CUSTOM_...
    body = normalized[len(CUSTOM_PREFIX):]
    while body.startswith(CUSTOM_PREFIX):
        body = body[len(CUSTOM_PREFIX):]
    return body


class CustomTraitNamer:
    """Builds custom names for one namespace and reports collisions.

    >>> namer = CustomTraitNamer("DEV_VENDORID")
    >>> namer.name("8086")
    'CUSTOM_DEV_VENDORID_8086'
    """

    def __init__(self, namespace: str) -> None:
        self.namespace = namespace
        self._values: dict[str, str] = {}

    @property
    def prefix(self) -> str:
        """The prefix every name of this namespace starts with."""
        return custom_trait(self.namespace, "X")[:-1]

    def name(self, value: str) -> str:
        """The name for ``value``.

        Raises:
            TraitNameError: a different value already produced this name.
        """
        name = custom_trait(self.namespace, value)
        earlier = self._values.setdefault(name, value)
        if earlier != value:
            raise TraitNameError(
                f"custom trait {name} would stand for both {earlier!r} and "
                f"{value!r} in namespace {self.namespace!r}; rename one of "
                "them so they differ in letters or digits")
        return name


def _os_traits_version() -> str:
    from importlib.metadata import PackageNotFoundError, version
    try:
        return version("os-traits")
    except PackageNotFoundError:  # pragma: no cover - installed with us
        return "unknown version"
