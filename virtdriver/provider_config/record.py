"""The applied record: what provider config files put on which provider.

Per provider uuid, each trait and inventory the files apply now, with the
file and line that named it (provenance, for ``explain``) and whether
virtdriver *added* it (the provider lacked it when a file first named it).
It is what lets deleting an entry from a file remove what the entry
applied (``docs/provider-config.md``).

The record is a claim, never a proof.  The planner (:mod:`.apply`) removes
only a name the record lists for that provider, that no file gives the
provider now, that the provider still has, that is a ``CUSTOM_`` name the
driver does not own, and that the record says virtdriver added — and an
inventory only while it still has exactly the values virtdriver set.  So
an edited record can at worst remove, from the provider it names, a
``CUSTOM_`` trait or inventory the operator's own files no longer give it.

The file is ``<state dir>/provider-config-<driver>.json``::

    {"format": "virtdriver-provider-config-record", "version": 1,
     "providers": {"<uuid>": {
        "traits": {"CUSTOM_X": {"file": "/etc/.../a.yaml", "line": 9,
                                "entry": 0, "added": true}},
        "inventories": {"CUSTOM_Y": {"file": "...", "line": 12, "entry": 0,
                                     "added": true,
                                     "applied": {"total": 4, ...}}}}}}

written atomically (:func:`~virtdriver.state_file.
write_atomically`) under the state directory's lock, which the tracker
holds around every update.
"""

from __future__ import annotations

import pathlib
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from virtdriver.capabilities.traits.names import CUSTOM_PREFIX, invalid_reason
from virtdriver.provider_config.model import Source
from virtdriver.providers.errors import InvalidProvider
from virtdriver.providers.inventory import (
    Inventory, invalid_resource_class_reason, validate_inventory)
from virtdriver.providers.record import check_uuid
from virtdriver.state_file import (
    CachedFile, driver_file, read_json, save_json)

FORMAT = "virtdriver-provider-config-record"
VERSION = 1
_RECOVERY = ("delete {path}: the next update records again what the files "
             "apply; what they applied earlier and no longer name then stays "
             "on the providers (remove it by hand)")
_EMPTY: Mapping = MappingProxyType({})


class RecordError(ValueError):
    """The applied record cannot be read or written.

    Attributes:
        path: the record file.
    """

    def __init__(self, path: pathlib.Path, problem: str,
                 remedy: str | None = None) -> None:
        self.path = path
        remedy = remedy or _RECOVERY.format(path=path)
        super().__init__(f"provider config record {path}: {problem}; "
                         f"{remedy}")


def record_path(state_dir: pathlib.Path | str, driver_name: str
                ) -> pathlib.Path:
    """``<state_dir>/provider-config-<driver_name>.json``.

    Raises:
        ValueError: ``driver_name`` cannot be part of a file name (the
            ledger's rule, :func:`virtdriver.state_file.driver_file`).
    """
    return driver_file(state_dir, "provider-config", driver_name)


@dataclass(frozen=True, slots=True)
class Applied:
    """One trait or inventory the files apply to a provider.

    Attributes:
        path, line, entry: the file, line and entry that name it.
        added: whether virtdriver put it there (the provider lacked it);
            only what virtdriver added is ever removed.
        inventory: for a resource class, the record virtdriver set.
    """

    path: str
    line: int
    entry: int
    added: bool
    inventory: Inventory | None = None

    @property
    def source(self) -> Source:
        """Where it came from, as a :class:`~.model.Source`."""
        return Source(self.path, self.line, self.entry)

    def to_json(self) -> dict:
        document: dict[str, Any] = {"file": self.path, "line": self.line,
                                    "entry": self.entry, "added": self.added}
        if self.inventory is not None:
            document["applied"] = self.inventory.as_dict()
        return document


@dataclass(frozen=True, slots=True)
class ProviderRecord:
    """What the files apply to one provider: name → :class:`Applied`."""

    traits: Mapping[str, Applied] = field(default_factory=lambda: _EMPTY)
    inventories: Mapping[str, Applied] = field(
        default_factory=lambda: _EMPTY)

    def __post_init__(self) -> None:
        object.__setattr__(self, "traits", MappingProxyType(dict(self.traits)))
        object.__setattr__(self, "inventories",
                           MappingProxyType(dict(self.inventories)))

    @property
    def empty(self) -> bool:
        """Whether it records nothing."""
        return not self.traits and not self.inventories


EMPTY = ProviderRecord()


class AppliedRecord(Mapping[str, ProviderRecord]):
    """An immutable map: provider uuid → :class:`ProviderRecord`.

    Change it with :meth:`updated` or :meth:`without`, which return a new
    record, so the old one stays until the new one is saved.
    """

    def __init__(self, providers: Mapping[str, ProviderRecord] | None = None
                 ) -> None:
        self._providers = MappingProxyType(
            {uuid: record for uuid, record in (providers or {}).items()
             if not record.empty})

    def __getitem__(self, uuid: str) -> ProviderRecord:
        return self._providers[uuid]

    def __iter__(self) -> Iterator[str]:
        return iter(self._providers)

    def __len__(self) -> int:
        return len(self._providers)

    def __repr__(self) -> str:
        return f"AppliedRecord({dict(self._providers)!r})"

    def provider(self, uuid: str) -> ProviderRecord:
        """What is recorded for ``uuid`` (an empty record if nothing)."""
        return self._providers.get(uuid, EMPTY)

    def trait_source(self, uuid: str, trait: str) -> Applied | None:
        """Which file and line applied ``trait`` to ``uuid`` (``None`` if
        no provider config file did): the provenance ``explain`` shows."""
        return self.provider(uuid).traits.get(trait)

    def updated(self, changes: Mapping[str, ProviderRecord | None]
                ) -> AppliedRecord:
        """A new record with ``changes`` applied (``None`` or an empty
        record forgets the provider)."""
        providers = dict(self._providers)
        for uuid, record in changes.items():
            if record is None or record.empty:
                providers.pop(uuid, None)
            else:
                providers[uuid] = record
        return AppliedRecord(providers)

    def without(self, uuids: Iterable[str]) -> AppliedRecord:
        """A new record forgetting ``uuids`` (providers that were removed)."""
        return self.updated(dict.fromkeys(uuids))

    # -- the file -------------------------------------------------------------

    def to_json(self) -> dict:
        """The document :meth:`save` writes (everything sorted)."""
        return {"format": FORMAT, "version": VERSION, "providers": {
            uuid: {kind: {name: applied[name].to_json()
                          for name in sorted(applied)}
                   for kind, applied in (("traits", record.traits),
                                         ("inventories", record.inventories))
                   if applied}
            for uuid, record in sorted(self._providers.items())}}

    @classmethod
    def from_json(cls, document: Any, path: pathlib.Path) -> AppliedRecord:
        """The record a document describes, every field checked.

        Raises:
            RecordError: not a record of this version, or any field wrong.
        """
        return cls(_Reader(path).document(document))

    @classmethod
    def load(cls, path: pathlib.Path | str) -> AppliedRecord:
        """Read the record at ``path``; a missing file is an empty record.

        Raises:
            RecordError: unreadable, not JSON, or not a valid record.
        """
        path = pathlib.Path(path)
        document = read_json(path, RecordError)
        if document is None:
            return cls()
        return cls.from_json(document, path)

    def save(self, path: pathlib.Path | str) -> None:
        """Write the record to ``path`` atomically (parent dirs created).

        Raises:
            RecordError: it cannot be written; the old file is unchanged.
        """
        save_json(pathlib.Path(path), self.to_json(), RecordError, "record")


class RecordFile(CachedFile[AppliedRecord]):
    """One record file, shared by the processes using its state directory
    (:class:`~virtdriver.state_file.CachedFile`: re-read
    when another process saved it, written only when it changed; use under
    the state lock, as the tracker does for the ledger).

    Raises (from :meth:`read` / :meth:`save`):
        RecordError: the file cannot be read, is not a record, or cannot
            be written (then it is unchanged).
    """

    def __init__(self, state_dir: pathlib.Path | str, driver_name: str
                 ) -> None:
        super().__init__(record_path(state_dir, driver_name),
                         AppliedRecord.load, AppliedRecord())

    @property
    def record(self) -> AppliedRecord:
        """The record as last read or saved."""
        return self.value


class _Reader:
    """Checks a record document, naming the file and field at fault."""

    def __init__(self, path: pathlib.Path) -> None:
        self.path = path

    def fail(self, where: str, problem: str) -> RecordError:
        return RecordError(self.path, f"{where}: {problem}" if where
                           else problem)

    def object(self, value: Any, where: str, known: Iterable[str] | None
               ) -> dict:
        if not isinstance(value, dict):
            raise self.fail(where, "is not a JSON object")
        if known is not None:
            unknown = sorted(set(value) - set(known))
            if unknown:
                raise self.fail(where, f"unknown field {unknown[0][:40]!r}")
        return value

    def document(self, document: Any) -> dict[str, ProviderRecord]:
        if (not isinstance(document, dict)
                or document.get("format") != FORMAT):
            raise self.fail("", f"not a provider config record (no "
                            f"\"format\": \"{FORMAT}\" header)")
        if document.get("version") != VERSION:
            raise self.fail("", f"version {document.get('version')!r} is "
                            f"not {VERSION}, the only version this "
                            "virtdriver reads")
        self.object(document, "", ("format", "version", "providers"))
        providers = self.object(document.get("providers"), "providers",
                                None)
        found = {}
        for uuid, value in providers.items():
            where = f"providers.{uuid[:40]}"
            try:
                check_uuid("record", "uuid", uuid)
            except InvalidProvider:
                raise self.fail(where, "is not a lower-case dashed provider "
                                "uuid") from None
            entry = self.object(value, where, ("traits", "inventories"))
            traits = self.object(entry.get("traits", {}), f"{where}.traits",
                                 None)
            inventories = self.object(entry.get("inventories", {}),
                                      f"{where}.inventories", None)
            found[uuid] = ProviderRecord(
                {name: self.applied(name, item, f"{where}.traits", False)
                 for name, item in traits.items()},
                {rc: self.applied(rc, item, f"{where}.inventories", True)
                 for rc, item in inventories.items()})
        return found

    def applied(self, name: str, value: Any, where: str, inventory: bool
                ) -> Applied:
        where = f"{where}.{name[:60]}"
        bad = (invalid_resource_class_reason(name) if inventory
               else invalid_reason(name))
        if bad or not name.startswith(CUSTOM_PREFIX):
            raise self.fail(where, "is not a CUSTOM_ name; provider config "
                            "files apply nothing else")
        known = ("file", "line", "entry", "added") + (
            ("applied",) if inventory else ())
        item = self.object(value, where, known)
        path, line, entry = (item.get(key) for key in ("file", "line",
                                                       "entry"))
        added = item.get("added")
        if not isinstance(path, str) or not path:
            raise self.fail(f"{where}.file", "is not a file name")
        for key, number, least in (("line", line, 1), ("entry", entry, 0)):
            if (not isinstance(number, int) or isinstance(number, bool)
                    or number < least):
                raise self.fail(f"{where}.{key}", f"is not an integer >= "
                                f"{least}")
        if not isinstance(added, bool):
            raise self.fail(f"{where}.added", "is not true or false")
        record = None
        if inventory:
            try:
                record = validate_inventory(where, {name: item.get(
                    "applied")})[name]
            except InvalidProvider as exc:
                raise self.fail(f"{where}.applied", exc.reason) from None
        return Applied(path, line, entry, added, record)
