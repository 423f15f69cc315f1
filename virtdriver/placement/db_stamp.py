"""The embedded Placement's database as the last sync left it: a stamp.

Building the embedded Placement (importing ``placement.deploy``, its
policy, auth and database layers) costs about three quarters of a warm
``virtdriver sync``.  When the SQLite file is exactly as our last clean
sync left it, Placement holds exactly what the sync state recorded, so a
sync with nothing to do need not start it:

* :class:`DatabaseStamp` — ``<state_dir>/placement.sqlite.stamp``: the
  database's device, inode, size, ``mtime_ns``, ``ctime_ns``, SQLite's
  file change counter and the sha256 of its content, and the sha256 of
  the sync state file, taken after the last write of a sync that ended
  clean (no error, nothing pending, no foreign provider in our trees).
  It is removed before Placement is started, so a run that dies half-way
  leaves none.  A rollback journal or WAL file beside the database, a
  missing or unreadable stamp, or any field differing means "someone
  else may have written": Placement is started.
* :meth:`DatabaseStamp.replay` — the real :func:`~.sync.sync`, on a copy
  of the sync state, against a stand-in client that answers listings
  from that state and refuses every other request.  If it finishes with
  nothing to report (no write, no read of a provider's parts, no note)
  its result stands, with 0 requests and a note saying Placement was not
  started; anything else (the tree changed, a provider is missing, a
  filter the stand-in cannot answer, a marking aggregate no provider
  carries yet — the ``placement-aggregate`` file replaced) returns
  ``None`` and the caller syncs against the real Placement.

The stamp is only a shortcut: it never makes the sync write or delete
anything, and a stale one can only cost a Placement start.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import os
import pathlib
from typing import Any

from virtdriver.placement.marker import Marker
from virtdriver.placement.result import SyncResult
from virtdriver.placement.state import FILE_NAME as STATE_FILE
from virtdriver.placement.state import SyncState, SyncStateFile
from virtdriver.placement.counts import RequestCounts
from virtdriver.state_dir import UnsafeStateError, read_state_file
from virtdriver.state_file import write_atomically

LOG = logging.getLogger(__name__)

FORMAT = "virtdriver-embedded-stamp"
VERSION = 1
#: Files beside the database whose presence means a transaction is open
#: or was interrupted (SQLite's rollback journal, WAL and its index).
_SIDE_FILES = ("-journal", "-wal", "-shm")
_CHUNK = 1 << 20


class DatabaseStamp:
    """The stamp of one embedded database (module doc).

    Args:
        db: the SQLite file.
        state_dir: holds the sync state file and the stamp.
        endpoint: the embedded client's endpoint id (what the sync state
            is bound to).
    """

    def __init__(self, db: pathlib.Path, state_dir: pathlib.Path,
                 endpoint: str) -> None:
        self.db = pathlib.Path(db)
        self.state_dir = pathlib.Path(state_dir)
        self.path = self.state_dir / f"{self.db.name}.stamp"
        self.endpoint = endpoint

    def current(self) -> dict | None:
        """The database's and the state file's stamp now; ``None`` when
        either is missing or a journal beside the database exists."""
        if any(os.path.lexists(f"{self.db}{suffix}")
               for suffix in _SIDE_FILES):
            return None
        try:
            # Never through a link: whoever planted one gets a start.
            fd = os.open(self.db, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
            with os.fdopen(fd, "rb") as handle:
                info = os.fstat(handle.fileno())
                header = handle.read(100)
                digest = hashlib.sha256(header)
                for chunk in iter(lambda: handle.read(_CHUNK), b""):
                    digest.update(chunk)
            state = read_state_file(self.state_dir / STATE_FILE)
        except (OSError, UnsafeStateError):
            return None
        if state is None:
            return None
        return {"db": {"dev": info.st_dev, "ino": info.st_ino,
                       "size": info.st_size, "mtime_ns": info.st_mtime_ns,
                       "ctime_ns": info.st_ctime_ns,
                       "change_counter": int.from_bytes(header[24:28],
                                                        "big"),
                       "sha256": digest.hexdigest()},
                "state_sha256": hashlib.sha256(state).hexdigest()}

    def matches(self) -> bool:
        """Whether the database and state file are as last stamped."""
        try:
            text = read_state_file(self.path)
            doc = json.loads(text.decode("utf-8")) if text else None
        except (OSError, ValueError, UnsafeStateError):
            return False
        if not isinstance(doc, dict) or doc.get("format") != FORMAT or \
                doc.get("version") != VERSION:
            return False
        now = self.current()
        return now is not None and doc.get("stamp") == now

    def record(self) -> None:
        """Stamp the database and state file as they are now (after our
        last write).  A failure only costs the next run a start."""
        now = self.current()
        if now is None:
            self.forget()
            return
        try:
            write_atomically(self.path, json.dumps(
                {"format": FORMAT, "version": VERSION, "stamp": now},
                sort_keys=True) + "\n")
        except OSError as exc:
            LOG.warning("could not write %s: %s; the next sync starts the "
                        "embedded Placement", self.path, exc.strerror or exc)

    def forget(self) -> None:
        """Remove the stamp (before Placement is started)."""
        try:
            self.path.unlink(missing_ok=True)
        except OSError as exc:
            LOG.warning("could not remove %s: %s", self.path,
                        exc.strerror or exc)

    def replay(self, tree: Any, marker: Marker, **options: Any
               ) -> SyncResult | None:
        """The sync's result without starting Placement, or ``None`` when
        Placement is needed (module doc).  ``marker``: the marking
        aggregate the real sync would use — a new one (the file replaced)
        is on no provider yet, so it needs Placement, as does none at all
        (or a problem to report); ``options`` are :func:`~.sync.sync`'s.
        Call it under the state directory's lock.
        """
        from virtdriver.placement.sync import sync

        if marker.uuid is None or marker.problem or not self.matches():
            return None
        state = SyncStateFile(self.state_dir).load()
        if state.note or state.endpoint != self.endpoint:
            return None
        stand_in = _StateClient(_copy(state))
        try:
            result = sync(tree, stand_in, state=stand_in.state,
                          marker=marker.uuid, **options)
        except _NeedPlacement as exc:
            LOG.debug("embedded Placement needed: %s", exc)
            return None
        if (not result.ok or result.outcomes or result.foreign
                or result.notes or stand_in.asked):
            return None
        return dataclasses.replace(result, notes=(
            f"embedded Placement not started: {self.db} is exactly as the "
            f"last sync left it ({self.path}), and nothing changed",))


def _copy(state: SyncState) -> SyncState:
    """A copy the replay may change (its records are immutable)."""
    twin = SyncState(state.endpoint)
    twin.microversion = state.microversion
    twin.providers = dict(state.providers)
    twin.custom_traits = set(state.custom_traits)
    twin.custom_classes = set(state.custom_classes)
    twin.wrote_aggregates = dict(state.wrote_aggregates)
    return twin


class _NeedPlacement(Exception):
    """The stand-in cannot answer: the real Placement must."""


class _StateClient:
    """A client answering ``GET /resource_providers`` (``in_tree``,
    ``member_of``) from a sync state; every other call raises
    :class:`_NeedPlacement`.  It sends nothing: its counts stay 0."""

    def __init__(self, state: SyncState) -> None:
        self.state = state
        self.endpoint = state.endpoint
        self.negotiated = state.microversion
        self.counts = RequestCounts({})
        self.retried = 0
        self.asked: list[str] = []

    def adopt_microversion(self, text: str) -> None:
        """The state's version is already the one in use."""

    def list_providers(self, **filters: str) -> list[dict]:
        """The state's providers matching ``filters``, as Placement lists
        them."""
        root = filters.pop("in_tree", None)
        member_of = filters.pop("member_of", None)
        if filters:
            raise _NeedPlacement(f"a listing by {sorted(filters)}")
        wanted = None
        if member_of is not None:
            if member_of.startswith("in:"):
                member_of = member_of[3:]
            wanted = set(member_of.split(","))
        return [{"uuid": known.uuid, "name": known.name,
                 "generation": known.generation,
                 "parent_provider_uuid": known.parent_uuid,
                 "root_provider_uuid": known.root_uuid}
                for known in self.state.providers.values()
                if (root is None or known.root_uuid == root)
                and (wanted is None or wanted & known.aggregates)]

    def __getattr__(self, name: str) -> Any:
        self.asked.append(name)
        raise _NeedPlacement(f"the sync wants {name}")
