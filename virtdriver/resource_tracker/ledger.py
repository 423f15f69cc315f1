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
     "providers": {"<uuid>": ["COMPUTE_NODE", ...]},
     "proofs": {"<uuid>": "<hex HMAC-SHA256 of the uuid and its traits>"}}

``proofs`` are keyed with ``<state dir>/ledger.key`` (random, ``0600``,
made on first save).  An entry whose proof matches is *proven*: this
tracker wrote it.  Entries the tracker trusts outside a declared
ownership — the traits a driver that declares none set itself, the
tracker's own ``COMPUTE_STATUS_DISABLED`` — must be proven
(:meth:`Ledger.proven`); an edited entry, a lost key or a lost file makes
the tracker do less (keep a trait it cannot prove it set), never more.
An entry carried over unproven stays unproven until the tracker rewrites
it from what it saw itself.

It is written atomically (temporary file in the same directory, fsync,
``os.replace``), so a crash leaves the old or the new ledger, never half of
one.  A ledger that cannot be read is a :class:`LedgerError`; deleting the
file is always safe (``docs/resource-tracker.md``, "Recovery").
"""

from __future__ import annotations

import hashlib
import hmac
import pathlib
import secrets
from collections.abc import Iterable, Iterator, Mapping
from types import MappingProxyType

from virtdriver.state_dir import UnsafeStateError, read_state_file
from virtdriver.state_file import (
    CachedFile, driver_file, read_json, save_json, signature,
    write_atomically)

FORMAT = "virtdriver-trait-ledger"
VERSION = 1
#: The proof key's file in the state directory (module doc).
KEY_FILE = "ledger.key"
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

    def __init__(self, entries: Mapping[str, Iterable[str]] | None = None,
                 *, key: bytes | None = None,
                 proofs: Mapping[str, str] | None = None) -> None:
        self._entries = MappingProxyType(
            {uuid: frozenset(traits)
             for uuid, traits in (entries or {}).items()})
        self._key = key
        # uuid -> proof as stored: checked lazily, once (self._checked).
        self._proofs = dict(proofs or {})
        self._checked: dict[str, bool] = {}

    def __getitem__(self, uuid: str) -> frozenset[str]:
        return self._entries[uuid]

    def __iter__(self) -> Iterator[str]:
        return iter(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    def __repr__(self) -> str:
        return f"Ledger({dict(self._entries)!r})"

    def same_proofs(self, other: Ledger) -> bool:
        """Whether ``other`` stores the same proofs (equal ledgers compare
        entries only; a new proof is still a change to save)."""
        return self._proofs == other._proofs

    def entry(self, uuid: str) -> frozenset[str] | None:
        """The traits recorded for ``uuid``, ``None`` if it is not listed
        (the cheap exact lookup the tracker's fast path compares)."""
        return self._entries.get(uuid)

    def traits(self, uuid: str) -> frozenset[str]:
        """The traits recorded for ``uuid`` (empty if none)."""
        return self._entries.get(uuid, frozenset())

    def proven(self, uuid: str) -> frozenset[str] | None:
        """The traits recorded for ``uuid`` if this tracker provably wrote
        the entry (its proof matches, module doc); else ``None`` — not
        listed, edited, or written without the key."""
        entry = self._entries.get(uuid)
        if entry is None or self._key is None:
            return None
        ok = self._checked.get(uuid)
        if ok is None:
            ok = hmac.compare_digest(self._proofs.get(uuid, ""),
                                     _proof(self._key, uuid, entry))
            self._checked[uuid] = ok
        return entry if ok else None

    def with_key(self, key: bytes) -> Ledger:
        """This ledger, its proofs checked with ``key`` from now on."""
        if key == self._key:
            return self
        return Ledger(self._entries, key=key, proofs=self._proofs)

    def updated(self, changes: Mapping[str, frozenset[str] | None]
                ) -> Ledger:
        """A new ledger with ``changes`` applied (``None`` forgets); this
        one when they change nothing (so saving it writes nothing).  The
        entries changed are proven (with this ledger's key); the others
        keep their proofs, valid or not."""
        # What the tracker writes it derived from what it saw or proved,
        # so an unproven entry it writes again is proven from now on.
        todo = [(uuid, traits) for uuid, traits in changes.items()
                if self._entries.get(uuid) != traits or (
                    traits is not None and self._key is not None
                    and self.proven(uuid) is None)]
        if not todo:
            return self
        entries = dict(self._entries)
        proofs = dict(self._proofs)
        for uuid, traits in todo:
            if traits is None:
                entries.pop(uuid, None)
                proofs.pop(uuid, None)
            else:
                entries[uuid] = traits
                if self._key is not None:
                    proofs[uuid] = _proof(self._key, uuid, traits)
        return Ledger(entries, key=self._key, proofs=proofs)

    # -- the file -------------------------------------------------------------

    def to_json(self) -> dict:
        """The document :meth:`save` writes (providers and traits sorted)."""
        document = {"format": FORMAT, "version": VERSION,
                    "providers": {uuid: sorted(self._entries[uuid])
                                  for uuid in sorted(self._entries)}}
        proofs = {uuid: self._proofs[uuid] for uuid in sorted(self._proofs)
                  if uuid in self._entries}
        if proofs:
            document["proofs"] = proofs
        return document

    @classmethod
    def load(cls, path: pathlib.Path | str, key: bytes | None = None
             ) -> Ledger:
        """Read the ledger at ``path``; a missing file is an empty ledger.
        ``key`` checks its proofs (:meth:`proven`).

        Raises:
            LedgerError: unreadable, not JSON, or not a ledger document.
        """
        path = pathlib.Path(path)
        document = read_json(path, LedgerError)
        if document is None:
            return cls(key=key)
        proofs = document.get("proofs") if isinstance(document, dict) \
            else None
        if not isinstance(proofs, dict) or not all(
                isinstance(v, str) for v in proofs.values()):
            proofs = {}   # unreadable proofs prove nothing: do less
        return cls(_entries(path, document), key=key, proofs=proofs)

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
        self._key_path = pathlib.Path(state_dir) / KEY_FILE
        self._key: bytes | None = None
        super().__init__(ledger_path(state_dir, driver_name), self._load_ledger,
                         Ledger())

    @property
    def ledger(self) -> Ledger:
        """The ledger as last read or saved."""
        return self.value

    def read(self) -> Ledger:
        """The ledger as on disk now, its proofs checked with the state
        directory's key (made now if there is none: a ledger read
        before then proves nothing)."""
        self.key(create=True)
        ledger = super().read()
        if self._key is not None and ledger._key is None:
            self.value = ledger = ledger.with_key(self._key)
        return ledger

    def save(self, value: Ledger) -> None:
        """Write ``value`` if its entries or proofs differ from the file's
        (:meth:`CachedFile.save`)."""
        if value is not self.value and not value.same_proofs(self.value):
            value.save(self.path)
            self._signature = signature(self.path)
            self.value = value
            return
        super().save(value)

    def key(self, *, create: bool = False) -> bytes | None:
        """The state directory's proof key; ``None`` if there is none yet
        (and ``create`` is false) or it cannot be used (then nothing in
        the ledger is proven: the tracker does less)."""
        if self._key is None:
            try:
                raw = read_state_file(self._key_path)
            except (OSError, UnsafeStateError):
                return None
            if raw is None and create:
                raw = secrets.token_hex(32).encode("ascii")
                try:
                    write_atomically(self._key_path, raw.decode("ascii"))
                except OSError:
                    return None   # nothing proven: the tracker does less
            if raw is not None and len(raw.strip()) >= 32:
                self._key = raw.strip()
        return self._key

    def _load_ledger(self, path: pathlib.Path) -> Ledger:
        return Ledger.load(path, self.key())


def _proof(key: bytes, uuid: str, traits: frozenset[str]) -> str:
    message = "\n".join([uuid, *sorted(traits)]).encode("utf-8")
    return hmac.new(key, message, hashlib.sha256).hexdigest()


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
