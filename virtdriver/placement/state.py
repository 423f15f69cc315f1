"""What the last sync saw in Placement, persisted in the state directory.

(:class:`Listed` is a provider as a listing shows it: what a record is
checked against.)

Per provider, what Placement held at one generation (:class:`Known`): its
name, parent, inventories, traits and aggregates.  The sync trusts a record
only while Placement still lists the provider at that generation — then
nothing can have changed there and no content needs reading; when the
generation moved it reads the provider again.  The state is a *cache*,
never a proof: it never makes the sync delete anything or remove a trait
(ownership comes from the caller), so a lost, stale or edited file can
only cost reads.

The file, ``<state_dir>/placement-sync.json``, is written atomically
(:func:`~virtdriver.state_file.write_atomically`) and only
when it changed, under the state directory's lock when used through
:meth:`SyncStateFile.locked`::

    {"format": "virtdriver-placement-sync", "version": 1,
     "checksum": "<sha256 of the canonical state>",
     "state": {"endpoint": "http://127.0.0.1:8778", "microversion": "1.39",
               "custom_traits": [...], "custom_classes": [...],
               "providers": {"<uuid>": {"name": ..., "parent": ...,
                   "root": ..., "generation": 3, "inventories": {...},
                   "traits": [...], "aggregates": [...]}}}}

A file that is too big, not UTF-8 JSON, of another format or version,
fails its checksum (hand-edited, truncated) or holds one bad value is
*ignored* (the sync reads what it needs from Placement and writes a good
file); :attr:`SyncState.note` says why.  The checksum catches edits and
corruption, not a forger who recomputes it; such a file is still only
believed for providers whose generation matches Placement's.  A file that
is a symbolic link or writable by other users is refused
(:class:`~virtdriver.state_dir.UnsafeStateError`), like every state file.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import pathlib
import stat
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import NamedTuple

from virtdriver.filelock import DEFAULT_TIMEOUT, exclusive_lock
from virtdriver.placement.errors import PlacementRequestError
from virtdriver.providers.errors import ProviderTreeError
from virtdriver.providers.inventory import Inventory, validate_inventory
from virtdriver.providers.record import (
    check_aggregates, check_generation, check_name, check_traits, check_uuid)
from virtdriver.state_file import write_atomically
from virtdriver.resource_tracker.tracker import LOCK_FILE
from virtdriver.state_dir import UnsafeStateError, read_state_file

LOG = logging.getLogger(__name__)

FORMAT = "virtdriver-placement-sync"
VERSION = 1
FILE_NAME = "placement-sync.json"
#: A state file larger than this is ignored unread.
MAX_BYTES = 64 * 1024 * 1024
_NO_INVENTORY: Mapping[str, Inventory] = MappingProxyType({})


class Listed(NamedTuple):
    """A provider as ``GET /resource_providers`` lists it."""

    uuid: str
    name: str
    generation: int
    parent_uuid: str | None
    root_uuid: str

    @classmethod
    def from_body(cls, body: object) -> Listed:
        """One provider of a listing, checked.

        Raises:
            PlacementRequestError: it lacks a field (not Placement, or
                older than microversion 1.14).
        """
        try:
            item = cls(body["uuid"], body["name"], body["generation"],
                       body.get("parent_provider_uuid"),
                       body["root_provider_uuid"])
        except (KeyError, TypeError, AttributeError):
            item = None
        if (item is None or not isinstance(item.uuid, str)
                or not isinstance(item.name, str)
                or not isinstance(item.generation, int)
                or not isinstance(item.root_uuid, str)):
            raise PlacementRequestError(
                "GET /resource_providers: a provider in Placement's answer "
                "lacks uuid, name, generation or root_provider_uuid; check "
                "that the URL is Placement's (microversion 1.14 or later)")
        return item


@dataclass(frozen=True)
class Known:
    """What Placement held for one provider at one generation."""

    uuid: str
    name: str
    parent_uuid: str | None
    root_uuid: str
    generation: int
    inventory: Mapping[str, Inventory] = field(
        default_factory=lambda: _NO_INVENTORY)
    traits: frozenset[str] = frozenset()
    aggregates: frozenset[str] = frozenset()

    def to_json(self) -> dict:
        return {"name": self.name, "parent": self.parent_uuid,
                "root": self.root_uuid, "generation": self.generation,
                "inventories": {rc: rec.as_dict() for rc, rec
                                in sorted(self.inventory.items())},
                "traits": sorted(self.traits),
                "aggregates": sorted(self.aggregates)}

    @classmethod
    def from_json(cls, uuid: object, doc: object) -> Known:
        """Parse and check one entry.

        Raises:
            ValueError: naming the provider and the bad field.
        """
        label = f"provider {uuid!r}"
        uuid = check_uuid(label, "uuid", uuid)
        if not isinstance(doc, dict) or set(doc) != _ENTRY_KEYS:
            raise ValueError(f"{label}: expected the keys "
                             f"{', '.join(sorted(_ENTRY_KEYS))}")
        generation = check_generation(label, doc["generation"])
        if generation is None:
            raise ValueError(f"{label}: generation is null")
        parent = doc["parent"]
        return cls(
            uuid=uuid, name=check_name(label, doc["name"]),
            parent_uuid=None if parent is None else check_uuid(
                label, "parent", parent),
            root_uuid=check_uuid(label, "root", doc["root"]),
            generation=generation,
            inventory=validate_inventory(label, doc["inventories"]),
            traits=check_traits(label, doc["traits"]),
            aggregates=check_aggregates(label, doc["aggregates"]))


_ENTRY_KEYS = frozenset({"name", "parent", "root", "generation",
                         "inventories", "traits", "aggregates"})


class SyncState:
    """The sync's memory of one Placement service (see module doc).

    Attributes:
        endpoint: the service it describes (``None``: not bound yet).
        microversion: the version negotiated with it.
        providers: uuid → :class:`Known`.
        custom_traits, custom_classes: ``CUSTOM_`` names known to exist
            there.
        note: why a loaded file was ignored, if it was.
        wrote_aggregates: per provider, the aggregates this process set —
            the only aggregates a sync may take away again (never saved:
            a file must not be able to make a sync remove anything).
    """

    def __init__(self, endpoint: str | None = None) -> None:
        self.endpoint = endpoint
        self.microversion: str | None = None
        self.providers: dict[str, Known] = {}
        self.custom_traits: set[str] = set()
        self.custom_classes: set[str] = set()
        self.note: str | None = None
        self.wrote_aggregates: dict[str, frozenset[str]] = {}

    def bind(self, endpoint: str) -> None:
        """Describe ``endpoint`` from now on; what was known about another
        service is forgotten (its generations mean nothing here)."""
        if self.endpoint is not None and self.endpoint != endpoint:
            LOG.info("sync state described %s, not %s: starting afresh",
                     self.endpoint, endpoint)
            self.__init__(endpoint)
        self.endpoint = endpoint

    def to_json(self) -> dict:
        """The file's ``state`` object (canonical: sorted)."""
        return {"endpoint": self.endpoint, "microversion": self.microversion,
                "custom_traits": sorted(self.custom_traits),
                "custom_classes": sorted(self.custom_classes),
                "providers": {uuid: known.to_json() for uuid, known
                              in sorted(self.providers.items())}}

    @classmethod
    def from_json(cls, doc: object) -> SyncState:
        """Parse a file's ``state`` object.

        Raises:
            ValueError: what is wrong, naming the field.
        """
        keys = {"endpoint", "microversion", "custom_traits",
                "custom_classes", "providers"}
        if not isinstance(doc, dict) or set(doc) != keys:
            raise ValueError(f"state: expected the keys "
                             f"{', '.join(sorted(keys))}")
        if not isinstance(doc["endpoint"], str):
            raise ValueError("state.endpoint: not a string")
        if doc["microversion"] is not None and not isinstance(
                doc["microversion"], str):
            raise ValueError("state.microversion: not a string")
        state = cls(doc["endpoint"])
        state.microversion = doc["microversion"]
        for name in ("custom_traits", "custom_classes"):
            names = doc[name]
            if not isinstance(names, list) or not all(
                    isinstance(n, str) and n.startswith("CUSTOM_")
                    for n in names):
                raise ValueError(f"state.{name}: not a list of CUSTOM_ "
                                 "names")
            getattr(state, name).update(names)
        if not isinstance(doc["providers"], dict):
            raise ValueError("state.providers: not an object")
        for uuid, entry in doc["providers"].items():
            state.providers[uuid] = Known.from_json(uuid, entry)
        return state


def checksum(state_doc: dict) -> str:
    """sha256 of the canonical JSON of a ``state`` object."""
    text = json.dumps(state_doc, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class SyncStateFile:
    """``<state_dir>/placement-sync.json``: load, save, lock.

    Args:
        state_dir: the state directory (shared with the ledger and its
            lock file).
        lock_timeout: seconds to wait for another process holding the
            directory's lock.
    """

    def __init__(self, state_dir: pathlib.Path | str, *,
                 lock_timeout: float = DEFAULT_TIMEOUT) -> None:
        self.state_dir = pathlib.Path(state_dir)
        self.path = self.state_dir / FILE_NAME
        self.lock_path = self.state_dir / LOCK_FILE
        self._lock_timeout = lock_timeout
        self._saved: str | None = None
        # The state last loaded or saved, and the file's signature then:
        # reused while no other process rewrote the file.
        self._state: SyncState | None = None
        self._signature: tuple | None = None

    @contextlib.contextmanager
    def locked(self) -> Iterator[SyncState]:
        """Hold the state directory's lock; yield the state as the file
        has it now; save it afterwards (also when the body raised — what
        it learnt is true either way).

        Raises:
            LockTimeout, LockError: the lock (naming the holder).
        """
        with exclusive_lock(self.lock_path, timeout=self._lock_timeout,
                            purpose=f"the virtdriver state directory "
                            f"{self.state_dir}"):
            state = self.load()
            try:
                yield state
            finally:
                self.save(state)

    def load(self) -> SyncState:
        """The state in the file; an empty one (with :attr:`SyncState.note`
        saying why) if it is missing or cannot be believed.

        The same object is returned again while the file is unchanged
        (one ``stat``); what this process remembers beyond the file
        (:attr:`SyncState.wrote_aggregates`) carries over a reload.
        """
        previous = self._state
        state = self._read()
        if state is not previous and previous is not None and \
                previous.endpoint == state.endpoint:
            state.wrote_aggregates = previous.wrote_aggregates
        self._state = state
        return state

    def _read(self) -> SyncState:
        try:
            info = self.path.lstat()   # a link is refused when read
        except FileNotFoundError:
            self._signature = None
            return SyncState(self._state.endpoint if self._state else None)
        except OSError as exc:
            return self._ignored(f"cannot read it: {exc.strerror}")
        signature = _signature(info)
        if signature == self._signature and self._state is not None:
            return self._state
        if not (stat.S_ISREG(info.st_mode) or stat.S_ISLNK(info.st_mode)):
            return self._ignored("not a regular file")
        if info.st_size > MAX_BYTES:
            return self._ignored(f"{info.st_size} bytes, over the limit of "
                                 f"{MAX_BYTES}")
        try:
            raw = read_state_file(self.path) or b""
            text = raw.decode("utf-8")
            doc = json.loads(text)
        except OSError as exc:
            return self._ignored(f"cannot read it: {exc.strerror}")
        except UnsafeStateError:
            raise                   # refused, not ignored: a planted file
        except UnicodeDecodeError as exc:
            return self._ignored(f"not UTF-8 (byte {exc.start})")
        except (ValueError, RecursionError) as exc:
            return self._ignored(f"not JSON ({exc})")
        if (not isinstance(doc, dict)
                or set(doc) != {"format", "version", "checksum", "state"}
                or doc["format"] != FORMAT):
            return self._ignored(f"not a {FORMAT} document")
        if doc["version"] != VERSION:
            return self._ignored(f"version {doc['version']!r}, this "
                                 f"virtdriver reads version {VERSION}")
        if not isinstance(doc["state"], dict) or \
                checksum(doc["state"]) != doc["checksum"]:
            return self._ignored("its checksum does not match (edited or "
                                 "damaged)")
        try:
            state = SyncState.from_json(doc["state"])
        except (ValueError, ProviderTreeError) as exc:
            return self._ignored(str(exc))
        self._saved, self._signature = _render(state), signature
        return state

    def save(self, state: SyncState) -> bool:
        """Write ``state`` if it differs from the file; whether it wrote.

        A failure is logged, not raised: the sync's work is done, and a
        missing state costs the next sync reads, nothing else.
        """
        if state.endpoint is None:
            return False
        text = _render(state)
        if text == self._saved and self.path.exists():
            return False
        try:
            write_atomically(self.path, text)
            self._signature = _signature(self.path.stat())
        except OSError as exc:
            LOG.warning("could not save the sync state %s: %s; the next "
                        "sync reads Placement again", self.path,
                        exc.strerror or exc)
            self._signature = None
            return False
        self._saved, self._state = text, state
        return True

    def _ignored(self, why: str) -> SyncState:
        self._signature = self._saved = None
        state = SyncState()
        state.note = (f"sync state {self.path} ignored: {why}; the sync "
                      "reads Placement instead and writes a new one")
        LOG.warning("%s", state.note)
        return state


def _signature(info: os.stat_result) -> tuple:
    return (info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns,
            info.st_ctime_ns)


def _render(state: SyncState) -> str:
    body = state.to_json()
    return json.dumps({"format": FORMAT, "version": VERSION,
                       "checksum": checksum(body), "state": body},
                      sort_keys=True, indent=1) + "\n"


def known_roots(state_dir: pathlib.Path | str) -> dict[str, str]:
    """Root name → uuid of the roots the state directory's sync state
    records (for :class:`~virtdriver.resource_tracker.tracker.
    ResourceTracker`'s ``known_roots``); empty if the file is missing or
    cannot be believed.  Read under the state directory's lock."""
    state = SyncStateFile(state_dir).load()
    return {known.name: uuid for uuid, known in state.providers.items()
            if known.parent_uuid is None}
