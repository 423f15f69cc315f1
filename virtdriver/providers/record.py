"""One provider as an immutable record, and the checks on its fields.

A :class:`ProviderData` is never changed: the tree replaces a provider's
record on every write.  So a record handed out by ``data()`` or held by a
snapshot stays true to the moment it was read without any copying, and an
unchanged provider is the *same object* in two snapshots (which is what
makes ``diff`` cheap).

The tree builds records with :func:`make_record` and checks sets with
:func:`fast_traits` / :func:`fast_aggregates` first: fast paths that
vouch only for input that is certainly valid and return ``None``
otherwise, so the caller runs the full check (whose message names the
provider) only then — the label is never built for valid input.
"""

from __future__ import annotations

import copy
import re
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, NamedTuple

import os_traits

from virtdriver.capabilities.traits.names import invalid_reason
from virtdriver.frozen import frozen_builder
from virtdriver.providers.errors import InvalidProvider, describe
from virtdriver.providers.inventory import Inventory

#: Placement's limit on a provider name.
MAX_NAME_LENGTH = 200
_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-"
                   r"[0-9a-f]{12}")
#: ``UUID_MATCH(value)`` is truthy when ``value`` (a str) is a canonical uuid.
UUID_MATCH = _UUID.fullmatch
_NO_INVENTORY: Mapping[str, Inventory] = MappingProxyType({})
_NO_RESOURCES: Mapping[str, frozenset] = MappingProxyType({})
# Placement's trait alphabet; a name of it that os-traits does not know
# may be a newer standard trait (Placement decides when it is set).
_TRAIT_SYNTAX = re.compile(r"[A-Z0-9_]{1,255}")
_TRAIT_MATCH = _TRAIT_SYNTAX.fullmatch
_STANDARD_TRAITS = frozenset(os_traits.get_traits())
_SET_TYPES = (list, tuple, set, frozenset)
# CUSTOM_ trait names fast_traits found valid (a deployment has few; the
# bound only keeps hostile input from growing it without end).
_VALID_CUSTOM: set[str] = set()
_MAX_VALID_CUSTOM = 4096


@dataclass(frozen=True, slots=True)
class ProviderData:
    """A point-in-time, read-only view of one provider.

    The fields Nova's ``ProviderData`` has (``uuid``, ``name``,
    ``generation``, ``parent_uuid``, ``inventory``, ``traits``,
    ``aggregates``, ``resources``) plus ``root_uuid``.  ``inventory`` maps
    resource class to :class:`~virtdriver.providers.inventory.Inventory`;
    ``traits`` and ``aggregates`` are frozensets; ``resources`` maps
    resource class to a frozenset of the driver's own resource objects
    (Nova's ``objects.Resource``), kept as given and never synced.  The
    tree's ``record()`` hands these out; its ``data()`` hands out a
    :class:`ProviderCopy` the caller may change.
    """

    uuid: str
    name: str
    generation: int | None
    parent_uuid: str | None
    root_uuid: str
    inventory: Mapping[str, Inventory] = field(
        default_factory=lambda: _NO_INVENTORY, hash=False)
    traits: frozenset[str] = frozenset()
    aggregates: frozenset[str] = frozenset()
    resources: Mapping[str, frozenset] = field(
        default_factory=lambda: _NO_RESOURCES, hash=False, compare=False,
        repr=False)

    @property
    def label(self) -> str:
        """``provider 'name' (uuid)``, as error messages name it."""
        return describe(self.name, self.uuid)


#: ``ProviderData(...)`` for fields the caller has checked, every field
#: positional: the tree builds a record on every write, and the frozen
#: ``__init__`` or ``dataclasses.replace`` cost 3-5 times as much (see
#: :mod:`virtdriver.frozen`).
make_record = frozen_builder(ProviderData, all_required=True)


class ProviderCopy(NamedTuple):
    """What ``ProviderTree.data()`` returns: Nova's ``ProviderData``
    (a named tuple with the same fields in the same order, plus
    ``root_uuid``), every container a new one the caller may change.

    ``inventory`` is a dict of plain dicts holding the fields the driver
    gave (as Nova's deep copy does); ``traits`` and ``aggregates`` are
    sets; ``resources`` maps resource class to a set of deep copies.
    Handing ``inventory`` back to ``update_inventory`` works.
    """

    uuid: str
    name: str
    generation: int | None
    parent_uuid: str | None
    inventory: dict[str, dict[str, int | float]]
    traits: set[str]
    aggregates: set[str]
    resources: dict[str, set[Any]]
    root_uuid: str


def copy_of(record: ProviderData) -> ProviderCopy:
    """A :class:`ProviderCopy` of ``record``: O(its content)."""
    resources = record.resources
    return ProviderCopy(
        record.uuid, record.name, record.generation, record.parent_uuid,
        {rc: inv.given_dict() for rc, inv in record.inventory.items()},
        set(record.traits), set(record.aggregates),
        {rc: set(copy.deepcopy(list(values)))
         for rc, values in resources.items()} if resources else {},
        record.root_uuid)


def trait_reason(name: object) -> str | None:
    """Why the tree refuses ``name`` as a trait, or ``None``.

    As Placement: an os-traits name, a well-formed ``CUSTOM_`` name, or
    any other name of Placement's alphabet (``[A-Z0-9_]``, 1 to 255
    characters), which a newer os-traits may hold.
    """
    if name in _STANDARD_TRAITS:
        return None
    if not isinstance(name, str):
        return "not a string"
    reason = invalid_reason(name)
    if reason is None or (_TRAIT_MATCH(name)
                          and not name.startswith("CUSTOM_")):
        return None
    return reason


def fast_traits(traits: object) -> frozenset[str] | None:
    """:func:`check_traits`' result when the input is a plain collection
    of valid names, else ``None``."""
    if type(traits) not in _SET_TYPES:
        return None
    try:
        found = frozenset(traits)
    except TypeError:  # an unhashable member: check_traits names it
        return None
    extra = found - _STANDARD_TRAITS
    if extra and not extra <= _VALID_CUSTOM:
        for trait in extra:
            if type(trait) is not str or trait_reason(trait):
                return None
        if len(_VALID_CUSTOM) > _MAX_VALID_CUSTOM:
            _VALID_CUSTOM.clear()
        _VALID_CUSTOM.update(extra)
    return found


def fast_aggregates(aggregates: object) -> frozenset[str] | None:
    """:func:`check_aggregates`' result for a plain collection of
    canonical UUIDs, else ``None``."""
    if type(aggregates) not in _SET_TYPES:
        return None
    try:
        found = frozenset(aggregates)
    except TypeError:
        return None
    for aggregate in found:
        if type(aggregate) is not str or UUID_MATCH(aggregate) is None:
            return None
    return found


def check_uuid(provider: str, what: str, value: object) -> str:
    """Return ``value`` if it is a canonical (lower-case, dashed) UUID.

    Raises:
        InvalidProvider: naming ``provider`` and the field ``what``.
    """
    if isinstance(value, str) and _UUID.fullmatch(value):
        return value
    hint = "give a UUID in the form str(uuid.uuid4()) produces"
    if isinstance(value, str):
        try:
            hint = f"write it as {str(uuid.UUID(value))!r}"
        except ValueError:
            pass
    raise InvalidProvider(provider, what,
                          f"{value!r} is not a lower-case dashed UUID", hint)


def check_name(provider: str, value: object) -> str:
    """Return ``value`` if it is a usable provider name, else raise."""
    if isinstance(value, str) and 0 < len(value) <= MAX_NAME_LENGTH:
        return value
    raise InvalidProvider(
        provider, "name", f"{value!r} is not a string of 1 to "
        f"{MAX_NAME_LENGTH} characters", "give the provider a shorter, "
        "non-empty name (Placement's limit)")


def check_generation(provider: str, value: object) -> int | None:
    """Return ``value`` if it is ``None`` or a generation number, else raise."""
    if value is None or (isinstance(value, int)
                         and not isinstance(value, bool) and value >= 0):
        return value
    raise InvalidProvider(provider, "generation",
                          f"{value!r} is not None or an integer >= 0",
                          "pass the generation Placement returned")


def check_traits(provider: str, traits: Iterable[str]) -> frozenset[str]:
    """The traits as a frozenset, each checked as a trait name.

    Raises:
        InvalidProvider: naming the provider and the first bad trait.
    """
    found = frozenset(_strings(provider, "traits", traits))
    for trait in found:
        reason = trait_reason(trait)
        if reason:
            raise InvalidProvider(
                provider, "traits",
                f"{trait!r} is not a valid trait name: {reason}",
                "use an os_traits constant or a CUSTOM_ name "
                "(virtdriver.capabilities.traits.names.custom_trait)")
    return found


def check_aggregates(provider: str, aggregates: Iterable[str]
                     ) -> frozenset[str]:
    """The aggregate uuids as a frozenset, each checked as a UUID."""
    found = frozenset(_strings(provider, "aggregates", aggregates))
    for aggregate in found:
        check_uuid(provider, "aggregates", aggregate)
    return found


def _strings(provider: str, what: str, values: Iterable[str]) -> list[str]:
    if isinstance(values, (str, bytes)) or not isinstance(values, Iterable):
        raise InvalidProvider(
            provider, what, f"{values!r} is not a collection of names",
            f"pass a list or set of {what}, not a single string")
    values = list(values)
    for value in values:
        if not isinstance(value, str):
            raise InvalidProvider(provider, what, f"{value!r} is not a string",
                                  f"give each of the {what} as a string")
    return values
