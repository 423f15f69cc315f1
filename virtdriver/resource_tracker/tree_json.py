"""The canonical JSON form of a provider tree, in Placement's shapes.

::

    {"providers": [
        {"uuid": ..., "name": ..., "parent_provider_uuid": ... | null,
         "root_provider_uuid": ..., "generation": ... | null,
         "inventories": {RC: {"total", "reserved", "min_unit", "max_unit",
                              "step_size", "allocation_ratio"}},
         "traits": [sorted], "aggregates": [sorted]}]}

Parents come before children (each tree in preorder, siblings and roots in
creation order); inventories are keyed in sorted order.  This module turns
records into that document and checks a document's *shape*; the values are
checked when the tree is built from it (``ProviderTree.from_json``).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping

from virtdriver.providers.errors import InvalidProvider, describe
from virtdriver.providers.record import ProviderData

#: Keys every provider object may have, with the value a missing one means.
#: ``uuid`` and ``name`` have no default: they are required.
OPTIONAL_KEYS = {"parent_provider_uuid": None, "root_provider_uuid": None,
                 "generation": None, "inventories": {}, "traits": [],
                 "aggregates": []}
REQUIRED_KEYS = ("uuid", "name")


def to_json(providers: Iterable[ProviderData]) -> dict:
    """The document for ``providers`` (given parents before children)."""
    return {"providers": [
        {"uuid": p.uuid, "name": p.name,
         "parent_provider_uuid": p.parent_uuid,
         "root_provider_uuid": p.root_uuid,
         "generation": p.generation,
         "inventories": {rc: p.inventory[rc].as_dict()
                         for rc in sorted(p.inventory)},
         "traits": sorted(p.traits),
         "aggregates": sorted(p.aggregates)}
        for p in providers]}


def provider_objects(document: Mapping | str | bytes) -> list[dict]:
    """The provider objects of a document, each with every key present.

    Raises:
        InvalidProvider: the document is not JSON, has no ``providers``
            list, or a provider object is not an object, lacks ``uuid`` or
            ``name``, or has a key this form does not know.
    """
    if isinstance(document, (str, bytes)):
        try:
            document = json.loads(document)
        except ValueError as exc:
            raise InvalidProvider("provider tree document", "(document)",
                                  f"is not JSON ({exc})",
                                  "give the output of to_json()") from None
    providers = (document.get("providers")
                 if isinstance(document, Mapping) else None)
    if not isinstance(providers, list):
        raise InvalidProvider("provider tree document", "providers",
                              "is missing or not a list",
                              'give {"providers": [...]} as to_json() does')
    return [_complete(position, entry)
            for position, entry in enumerate(providers)]


def _complete(position: int, entry: object) -> dict:
    where = f"provider #{position} in the document"
    if not isinstance(entry, Mapping):
        raise InvalidProvider(where, "(provider)", "is not a JSON object",
                              "give each provider as an object")
    where = describe(entry.get("name"), entry.get("uuid"))
    for key in REQUIRED_KEYS:
        if key not in entry:
            raise InvalidProvider(where, key, "is missing",
                                  "every provider needs a uuid and a name")
    for key in entry:
        if key not in OPTIONAL_KEYS and key not in REQUIRED_KEYS:
            raise InvalidProvider(
                where, key, "is not a provider key",
                f"use only {', '.join(REQUIRED_KEYS + tuple(OPTIONAL_KEYS))}")
    return {**OPTIONAL_KEYS, **entry}
