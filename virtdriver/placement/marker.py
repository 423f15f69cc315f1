"""The agent's marking aggregate: one uuid per state directory.

Every provider an agent syncs carries this aggregate, so the agent lists
exactly its own providers (:mod:`~.listing`).  The uuid is made once, at
random, and kept in ``<state_dir>/placement-aggregate`` (one line): it
belongs to the state directory as the ledger does, so it survives a
restart, a new hostname or a moved directory, and two agents sharing no
state directory never share it — whatever their paths and hostnames.

The file is not a cache: a lost or damaged one means a new aggregate —
the next sync then finds its providers through the sync state (or
creates them, a 409 reading the existing ones) and marks them again; the
old aggregate stays on them, harmless, until an operator removes it.

A new aggregate is used only once it is saved.  When the file cannot be
written, :func:`read_marker` gives no aggregate and says why: the sync
then lists each tree by ``in_tree`` and marks nothing, so a state
directory that cannot keep its mark never puts a new one on every
provider at every sync.  The caller reports :attr:`Marker.problem` (the
command's warning on stderr, exit 2), since this package's log lines are
not shown by the commands.
"""

from __future__ import annotations

import logging
import pathlib
import uuid as uuidlib
from dataclasses import dataclass

from virtdriver.state_dir import UnsafeStateError, read_state_file
from virtdriver.state_file import write_atomically

LOG = logging.getLogger(__name__)

FILE_NAME = "placement-aggregate"


@dataclass(frozen=True)
class Marker:
    """The state directory's marking aggregate, as far as it could be had.

    Attributes:
        uuid: the aggregate to mark and list with, or ``None`` when none
            could be kept (the sync lists by ``in_tree``, marks nothing).
        problem: what went wrong, in one line with what to do, or
            ``None``; with ``uuid`` set it was repaired (a damaged file
            replaced), without it the sync is not marked.
    """

    uuid: str | None
    problem: str | None = None

    @property
    def unmarked(self) -> bool:
        """Whether no aggregate could be kept (a failure to report)."""
        return self.uuid is None


def read_marker(state_dir: pathlib.Path | str) -> Marker:
    """The state directory's marking aggregate, made (and saved) the
    first time or when the file is damaged.  Call under the state
    directory's lock.

    Raises:
        UnsafeStateError: the file is a link, not a regular file, or
            others may write it: refused, never replaced.
    """
    path = pathlib.Path(state_dir) / FILE_NAME
    damaged = None
    try:
        content = read_state_file(path)  # never through a link
        if content is not None:
            return Marker(str(uuidlib.UUID(content.decode("ascii").strip())))
    except UnsafeStateError:
        raise  # a link or a file others can write: refused, not replaced
    except (OSError, ValueError, UnicodeDecodeError) as exc:
        damaged = str(exc) or type(exc).__name__
    made = str(uuidlib.uuid4())
    try:
        write_atomically(path, made + "\n")
    except OSError as exc:
        why = ("" if damaged is None
               else f" (it holds no uuid: {damaged})")
        problem = (f"could not save the marking aggregate in {path}"
                   f"{why}: {exc.strerror or exc}; this sync marked no "
                   "provider and listed each tree instead — make "
                   f"{path} writable (permissions, free space, "
                   "immutable flag) or move it aside, then sync again")
        LOG.warning("%s", problem)
        return Marker(None, problem)
    if damaged is None:
        return Marker(made)
    problem = (f"{path} held no uuid ({damaged}); replaced by a new "
               f"marking aggregate {made} — the old one, if any, stays on "
               "our providers until an operator removes it")
    LOG.warning("%s", problem)
    return Marker(made, problem)


def agent_aggregate(state_dir: pathlib.Path | str) -> str | None:
    """The uuid of :func:`read_marker`, or ``None`` when none could be
    saved."""
    return read_marker(state_dir).uuid
