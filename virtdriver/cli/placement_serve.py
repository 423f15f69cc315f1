"""``virtdriver placement serve``: the state directory's embedded Placement
on loopback, for the client operators already know — and for no one else.

``virtdriver sync`` with no Placement named keeps Placement's database in
the state directory (``placement.sqlite``) and runs Placement inside its
own process.  This command serves that database over HTTP on 127.0.0.1,
so ``openstack resource provider list`` (osc-placement) can look at it and
clean it, until SIGINT or SIGTERM.

Every request must carry the random token of this run, kept ``0600`` in
the state directory (:mod:`virtdriver.placement.serve_token`): other
local users get ``401``.  The banner names the token's file, never the
token.  The state directory's lock is held only while Placement starts
(its schema created or migrated, as a ``sync`` would): then ``sync``,
``claim`` or an agent cycle run beside the service, SQLite and
Placement's generations keeping their writes apart.
"""

from __future__ import annotations

import argparse
import shlex
import sys
from typing import TextIO

from virtdriver.cli.errors import CommandError

#: The microversion the printed commands ask for (every call osc-placement
#: makes for providers, inventories, traits and allocations has it).
OSC_MICROVERSION = "1.39"


def osc_commands(url: str, token_path: str) -> list[str]:
    """The shell lines that point ``openstack`` (osc-placement) at ``url``
    with the token in ``token_path`` and list the providers."""
    return [f"export OS_AUTH_TYPE=admin_token OS_ENDPOINT={url} "
            f"OS_TOKEN=\"$(cat {shlex.quote(token_path)})\" "
            f"OS_PLACEMENT_API_VERSION={OSC_MICROVERSION}",
            "openstack resource provider list"]


def run_placement_serve(args: argparse.Namespace,
                        out: TextIO | None = None) -> int:
    """Serve the embedded Placement until a signal; exit 0."""
    from virtdriver.cli.sync import EMBEDDED_DB
    from virtdriver.filelock import exclusive_lock
    from virtdriver.placement.client import NOAUTH_ROLES, NOAUTH_TOKEN
    from virtdriver.placement.loopback import HOST, serve
    from virtdriver.placement.serve_token import (
        TokenGate, new_token, remove_token, token_file)
    from virtdriver.resource_tracker.tracker import LOCK_FILE
    from virtdriver.state_dir import StateDirError, state_dir

    out = out or sys.stdout
    try:
        directory = state_dir()
    except StateDirError as exc:
        raise CommandError(str(exc)) from exc
    db = directory / EMBEDDED_DB
    if not db.is_file():
        raise CommandError(
            f"no embedded Placement in {directory}: {db} does not exist; "
            "run `virtdriver sync` first, or name the state directory that "
            "holds it ([virtdriver] state_dir, $VIRTDRIVER_STATE_DIR)")
    issued: list[tuple[str, object]] = []

    def initialising():
        return exclusive_lock(directory / LOCK_FILE,
                              purpose=f"the virtdriver state directory "
                              f"{directory}")

    def gate(app, port: int):
        try:
            token, path = new_token(directory, port)
        except OSError as exc:
            raise CommandError(
                f"cannot write the token file "
                f"{token_file(directory, port)}: {exc.strerror or exc}; "
                "make the state directory writable") from None
        issued.append((token, path))
        return TokenGate(app, token, path, admin_token=NOAUTH_TOKEN,
                         admin_roles=NOAUTH_ROLES)

    def announce(port: int) -> None:
        url = f"http://{HOST}:{port}"
        path = str(token_file(directory, port))
        lines = [f"serving the embedded Placement of {directory} on {url}",
                 f"  (for this user only: every request needs the token in "
                 f"{path}; loopback only; SIGINT or SIGTERM stops it)",
                 "  with osc-placement:",
                 *(f"    {line}" for line in osc_commands(url, path))]
        out.write("\n".join(lines) + "\n")
        out.flush()

    try:
        serve(db, port=args.port, threads=True, announce=announce,
              initialising=initialising, wrap=gate)
    except OSError as exc:
        raise CommandError(
            f"cannot listen on {HOST}:{args.port} ({exc.strerror or exc})"
            "; choose another --port, or 0 for any free one") from exc
    finally:
        for token, path in issued:
            remove_token(path, token)
    return 0
