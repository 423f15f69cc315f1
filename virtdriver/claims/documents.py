"""Instances and images as the command line takes them (parsed JSON in,
frozen model out; pure).

INSTANCE.json::

    {"uuid": "<uuid>",
     "flavor": {"vcpus": 4, "memory_mb": 4096, "extra_specs": {}},
     "image": {"properties": {}},
     "allocations": {"<provider uuid>": {"resources": {"VCPU": 4}}}}

IMAGE.json: ``{"properties": {}}``.  ``image`` and ``allocations`` may be
left out (no properties, no allocations).  Every problem names the field.
"""

from __future__ import annotations

import uuid as uuidlib
from collections.abc import Iterable, Mapping
from typing import Any

from virtdriver.claims.model import ClaimError, Flavor, Instance
from virtdriver.providers.inventory import (
    MAX_INT, invalid_resource_class_reason)

_INSTANCE_KEYS = {"uuid", "flavor", "image", "allocations"}
_FLAVOR_KEYS = {"vcpus", "memory_mb", "extra_specs", "name", "root_gb",
                "ephemeral_gb", "swap"}
_DISK_KEYS = ("root_gb", "ephemeral_gb", "swap")


class InvalidDocument(ClaimError):
    """An instance or image document is unusable; the message names the
    file and field."""


def instance_from_document(document: Any, source: str) -> Instance:
    """The :class:`Instance` of an INSTANCE.json document.

    Raises:
        InvalidDocument: naming ``source`` and the field at fault.
    """
    data = _object(document, source, "the instance", _INSTANCE_KEYS)
    uuid = data.get("uuid")
    try:
        canonical = str(uuidlib.UUID(uuid)) if isinstance(uuid, str) \
            else None
    except ValueError:
        canonical = None
    if canonical is None:
        raise InvalidDocument(f"{source}: uuid: {uuid!r} is not a UUID; "
                              "give the instance's uuid")
    flavor = _flavor(data.get("flavor"), f"{source}: flavor")
    image = image_properties(data.get("image", {}), f"{source}: image")
    allocations = _allocations(data.get("allocations", {}),
                               f"{source}: allocations")
    return Instance(canonical, flavor, image, allocations)


def image_properties(document: Any, source: str, *,
                     also: Iterable[str] = ()) -> dict[str, Any]:
    """The properties of an IMAGE.json document (``{"properties": {}}``);
    the fields in ``also`` are allowed beside them (the caller reads
    them).

    Raises:
        InvalidDocument: naming ``source`` and the field at fault.
    """
    data = _object(document, source, "the image", {"properties", *also})
    properties = data.get("properties", {})
    if not isinstance(properties, Mapping) or not all(
            isinstance(key, str) for key in properties):
        raise InvalidDocument(f"{source}: properties must be an object of "
                              f"name -> value, not {_kind(properties)}")
    return dict(properties)


def _flavor(value: Any, where: str) -> Flavor:
    if value is None:
        raise InvalidDocument(f"{where}: missing; give "
                              "{\"vcpus\", \"memory_mb\", \"extra_specs\"}")
    data = _object(value, where, "the flavor", _FLAVOR_KEYS)
    sizes = {}
    for key in ("vcpus", "memory_mb"):
        amount = data.get(key)
        if isinstance(amount, bool) or not isinstance(amount, int) \
                or not 0 < amount <= MAX_INT:
            raise InvalidDocument(f"{where}.{key}: {amount!r} is not a "
                                  f"whole number from 1 to {MAX_INT}")
        sizes[key] = amount
    specs = data.get("extra_specs", {})
    if not isinstance(specs, Mapping) or not all(
            isinstance(k, str) and isinstance(v, str)
            for k, v in specs.items()):
        raise InvalidDocument(f"{where}.extra_specs must be an object of "
                              "string -> string (quote numbers: \"2\")")
    for key in _DISK_KEYS:
        amount = data.get(key, 0)
        if isinstance(amount, bool) or not isinstance(amount, int) \
                or not 0 <= amount <= 2**31 - 1:
            raise InvalidDocument(f"{where}.{key}: {amount!r} is not a "
                                  "whole number from 0 to 2147483647")
        sizes[key] = amount
    name = data.get("name", "")
    if not isinstance(name, str):
        raise InvalidDocument(f"{where}.name must be a string")
    return Flavor(sizes["vcpus"], sizes["memory_mb"], dict(specs), name,
                  **{key: sizes[key] for key in _DISK_KEYS})


def flavor_from_document(document: Any, source: str) -> Flavor:
    """The :class:`Flavor` of a FLAVOR.json document (``{"vcpus",
    "memory_mb", "extra_specs", "root_gb", "ephemeral_gb", "swap"}``).

    Raises:
        InvalidDocument: naming ``source`` and the field at fault.
    """
    return _flavor(document, source)


def allocations_from_document(document: Any, source: str
                              ) -> dict[str, dict[str, int]]:
    """ALLOCATIONS.json as Placement gives it (``GET /allocations/{uuid}``:
    ``{"allocations": {"<rp>": {"resources": {...}}}, ...}``; its other
    fields are ignored) → ``{rp: {resource class: amount}}``.

    Raises:
        InvalidDocument: naming ``source`` and the field at fault.
    """
    if not isinstance(document, Mapping) or "allocations" not in document:
        raise InvalidDocument(
            f"{source}: give Placement's allocations document "
            "{\"allocations\": {\"<provider uuid>\": {\"resources\": "
            "{...}}}} (GET /allocations/{consumer})")
    return _allocations(document["allocations"], f"{source}: allocations")


def _allocations(value: Any, where: str) -> dict[str, dict[str, int]]:
    if not isinstance(value, Mapping):
        raise InvalidDocument(f"{where} must be an object of provider uuid "
                              f"-> {{\"resources\": {{...}}}}, not "
                              f"{_kind(value)}")
    result = {}
    for provider, entry in value.items():
        here = f"{where}.{provider}"
        resources = entry.get("resources") if isinstance(entry, Mapping) \
            else None
        if not isinstance(resources, Mapping) or not all(
                isinstance(rc, str) and isinstance(n, int)
                and not isinstance(n, bool) for rc, n in resources.items()):
            raise InvalidDocument(f"{here}: give {{\"resources\": "
                                  "{\"<resource class>\": <amount>}}")
        for rc, amount in resources.items():
            reason = invalid_resource_class_reason(rc)
            if reason is not None:
                raise InvalidDocument(f"{here}.resources: {reason}; name "
                                      "a resource class, e.g. VCPU")
            if not 0 <= amount <= MAX_INT:
                raise InvalidDocument(
                    f"{here}.resources.{rc}: {amount} is not a whole number "
                    f"from 0 to {MAX_INT} (Placement's largest amount); "
                    "give the amount allocated")
        result[str(provider)] = dict(resources)
    return result


def _object(value: Any, where: str, what: str, known: set[str]
            ) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise InvalidDocument(f"{where}: {what} must be a JSON object, not "
                              f"{_kind(value)}")
    unknown = sorted(str(k) for k in value if k not in known)
    if unknown:
        raise InvalidDocument(f"{where}: unknown field(s) "
                              f"{', '.join(unknown[:5])}; known: "
                              f"{', '.join(sorted(known))}")
    return value


def _kind(value: Any) -> str:
    return "null" if value is None else type(value).__name__
