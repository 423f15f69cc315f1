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
"""

from __future__ import annotations

import logging
import pathlib
import uuid as uuidlib

from virtdriver.state_dir import UnsafeStateError, read_state_file
from virtdriver.state_file import write_atomically

LOG = logging.getLogger(__name__)

FILE_NAME = "placement-aggregate"


def agent_aggregate(state_dir: pathlib.Path | str) -> str:
    """The state directory's marking aggregate, made (and saved) the
    first time.  Call under the state directory's lock.

    A file that cannot be written is logged: the aggregate is still
    used for this process, and made anew by the next one.
    """
    path = pathlib.Path(state_dir) / FILE_NAME
    try:
        content = read_state_file(path)  # never through a link
        if content is not None:
            return str(uuidlib.UUID(content.decode("ascii").strip()))
    except UnsafeStateError:
        raise  # a link or a file others can write: refused, not replaced
    except (OSError, ValueError, UnicodeDecodeError) as exc:
        LOG.warning("%s is not one uuid (%s); a new marking aggregate "
                    "replaces it (the old one stays on our providers; an "
                    "operator may remove it)", path, exc)
    made = str(uuidlib.uuid4())
    try:
        write_atomically(path, made + "\n")
    except OSError as exc:
        LOG.warning("could not save the marking aggregate in %s: %s; the "
                    "next process makes another", path,
                    exc.strerror or exc)
    return made
