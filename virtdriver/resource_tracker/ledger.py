"""The trait ledger: which traits the tracker set on which provider.

Per provider uuid, the owned traits present after the tracker's last
successful update of it.  A provider listed (even with no traits) is one
this tracker managed.  The ledger is a record, never a proof: its entries
are trusted only within the ownership of the provider's node, and a gone
node's providers are removed only when more than the ledger shows they are
the tracker's (``docs/resource-tracker.md``).

The ledger lives in ``<state dir>/ledger-<driver>.json`` (see
:func:`ledger_path`), a JSON document with a format/version header::

    {"format": "virtdriver-trait-ledger", "version": 1,
     "providers": {"<uuid>": ["COMPUTE_NODE", ...]}}

It is written atomically (temporary file in the same directory, fsync,
``os.replace``), so a crash leaves the old or the new ledger, never half of
one.  A ledger that cannot be read is a :class:`LedgerError`; deleting the
file is always safe (``docs/resource-tracker.md``, "Recovery").
"""

from __future__ import annotations

import pathlib
from collections.abc import Iterable, Iterator, Mapping
from types import MappingProxyType

from virtdriver.state_file import (
    CachedFile, driver_file, read_json, save_json)

FORMAT = "virtdriver-trait-ledger"
VERSION = 1
_RECOVERY = ("delete {path}; the next update rebuilds it from the driver's "
             "owned names — nothing foreign is lost")


class LedgerError(ValueError):
    """The ledger file cannot be read or written.

    The message names the file, what is wrong and what to do.

    Attributes:
        path: the ledger file.
    """

    def __init__(self, path: pathlib.Path, problem: str,
                 remedy: str | None = None) -> None:
        self.path = path
        remedy = remedy or _RECOVERY.format(path=path)
        super().__init__(f"trait ledger {path}: {problem}; {remedy}")


def ledger_path(state_dir: pathlib.Path | str, driver_name: str
                ) -> pathlib.Path:
    """``<state_dir>/ledger-<driver_name>.json``.

    Raises:
        ValueError: ``driver_name`` cannot be part of a file name
            (:func:`virtdriver.state_file.driver_file`).
    """
    return driver_file(state_dir, "ledger", driver_name)


class Ledger(Mapping[str, frozenset[str]]):
    """An immutable map: provider uuid → traits the tracker set there.

    Change it with :meth:`updated`, which returns a new ledger, so a
    tracker can keep the old one until the new one is safely saved.
    """

    def __init__(self, entries: Mapping[str, Iterable[str]] | None = None
                 ) -> None:
        self._entries = MappingProxyType(
            {uuid: frozenset(traits)
             for uuid, traits in (entries or {}).items()})

    def __getitem__(self, uuid: str) -> frozenset[str]:
        return self._entries[uuid]

    def __iter__(self) -> Iterator[str]:
        return iter(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    def __repr__(self) -> str:
        return f"Ledger({dict(self._entries)!r})"

    def entry(self, uuid: str) -> frozenset[str] | None:
        """The traits recorded for ``uuid``, ``None`` if it is not listed
        (the cheap exact lookup the tracker's fast path compares)."""
        return self._entries.get(uuid)

    def traits(self, uuid: str) -> frozenset[str]:
        """The traits recorded for ``uuid`` (empty if none)."""
        return self._entries.get(uuid, frozenset())

    def updated(self, changes: Mapping[str, frozenset[str] | None]
                ) -> Ledger:
        """A new ledger with ``changes`` applied (``None`` forgets); this
        one when they change nothing (so saving it writes nothing)."""
        if all(self._entries.get(uuid) == traits
               for uuid, traits in changes.items()):
            return self
        entries = dict(self._entries)
        for uuid, traits in changes.items():
            if traits is None:
                entries.pop(uuid, None)
            else:
                entries[uuid] = traits
        return Ledger(entries)

    # -- the file -------------------------------------------------------------

    def to_json(self) -> dict:
        """The document :meth:`save` writes (providers and traits sorted)."""
        return {"format": FORMAT, "version": VERSION,
                "providers": {uuid: sorted(self._entries[uuid])
                              for uuid in sorted(self._entries)}}

    @classmethod
    def load(cls, path: pathlib.Path | str) -> Ledger:
        """Read the ledger at ``path``; a missing file is an empty ledger.

        Raises:
            LedgerError: unreadable, not JSON, or not a ledger document.
        """
        path = pathlib.Path(path)
        document = read_json(path, LedgerError)
        if document is None:
            return cls()
        return cls(_entries(path, document))

    def save(self, path: pathlib.Path | str) -> None:
        """Write the ledger to ``path`` atomically (parent dirs created).

        Raises:
            LedgerError: the file or its directory cannot be written; the
                old file, if any, is left as it was.
        """
        save_json(pathlib.Path(path), self.to_json(), LedgerError, "ledger")


class LedgerFile(CachedFile[Ledger]):
    """One ledger file, shared by every process using its state directory
    (:class:`~.state_file.CachedFile`: re-read when another process saved
    it, written only when it changed; use under the state lock).

    Raises (from :meth:`read` / :meth:`save`):
        LedgerError: the file cannot be read, is not a ledger, or cannot
            be written (then it is unchanged).
    """

    def __init__(self, state_dir: pathlib.Path | str, driver_name: str
                 ) -> None:
        super().__init__(ledger_path(state_dir, driver_name), Ledger.load,
                         Ledger())

    @property
    def ledger(self) -> Ledger:
        """The ledger as last read or saved."""
        return self.value


def _entries(path: pathlib.Path, document: object
             ) -> dict[str, frozenset[str]]:
    """The providers of a ledger document, checked."""
    if not isinstance(document, dict) or document.get("format") != FORMAT:
        raise LedgerError(path, f"not a trait ledger (no \"format\": "
                          f"\"{FORMAT}\" header)")
    version = document.get("version")
    if version != VERSION:
        raise LedgerError(path, f"version {version!r} is not {VERSION}, the "
                          "only version this virtdriver reads")
    providers = document.get("providers")
    if not isinstance(providers, dict):
        raise LedgerError(path, "\"providers\" is not an object of provider "
                          "uuid -> list of traits")
    entries = {}
    for uuid, traits in providers.items():
        if not (isinstance(traits, list)
                and all(isinstance(t, str) for t in traits)):
            raise LedgerError(path, f"providers.{uuid} is not a list of "
                              "trait names")
        entries[uuid] = frozenset(traits)
    return entries
