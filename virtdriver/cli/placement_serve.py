"""``virtdriver placement serve``: the state directory's embedded Placement
on loopback, for the client operators already know.

``virtdriver sync`` with no Placement named keeps Placement's database in
the state directory (``placement.sqlite``) and runs Placement inside its
own process.  This command serves that database over HTTP on 127.0.0.1
(``noauth2``: the token ``admin``), so ``openstack resource provider
list`` (osc-placement) can look at it and clean it, until SIGINT or
SIGTERM.  It holds the state directory's lock meanwhile, so a ``sync`` or
an agent cycle waits for it (and gives up after the lock's timeout, as
with any other holder) instead of writing under the operator's hands.
"""

from __future__ import annotations

import argparse
import sys
from typing import TextIO

from virtdriver.cli.errors import CommandError

#: The microversion the printed commands ask for (every call osc-placement
#: makes for providers, inventories, traits and allocations has it).
OSC_MICROVERSION = "1.39"


def osc_commands(url: str) -> list[str]:
    """The shell lines that point ``openstack`` (osc-placement) at ``url``
    and list the providers."""
    return [f"export OS_AUTH_TYPE=admin_token OS_ENDPOINT={url} "
            f"OS_TOKEN=admin OS_PLACEMENT_API_VERSION={OSC_MICROVERSION}",
            "openstack resource provider list"]


def run_placement_serve(args: argparse.Namespace,
                        out: TextIO | None = None) -> int:
    """Serve the embedded Placement until a signal; exit 0."""
    from virtdriver.cli.sync import EMBEDDED_DB
    from virtdriver.filelock import exclusive_lock
    from virtdriver.placement.loopback import HOST, serve
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

    def announce(port: int) -> None:
        url = f"http://{HOST}:{port}"
        lines = [f"serving the embedded Placement of {directory} on {url}",
                 "  (noauth2, token admin, loopback only; syncs wait "
                 "meanwhile; SIGINT or SIGTERM stops it)",
                 "  with osc-placement:",
                 *(f"    {line}" for line in osc_commands(url))]
        out.write("\n".join(lines) + "\n")
        out.flush()

    with exclusive_lock(directory / LOCK_FILE,
                        purpose=f"the virtdriver state directory "
                        f"{directory}"):
        try:
            serve(db, port=args.port, threads=True, announce=announce)
        except OSError as exc:
            raise CommandError(
                f"cannot listen on {HOST}:{args.port} ({exc.strerror or exc})"
                "; choose another --port, or 0 for any free one") from exc
    return 0
