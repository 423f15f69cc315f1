"""Replaying a host snapshot: while inside :func:`replaying`, a snapshot
directory is a fakelibvirt host that the real libvirt driver reads
(``--snapshot DIR`` of the host commands, each side of ``diff``)."""

from __future__ import annotations

import argparse
import contextlib
import pathlib
from collections.abc import Iterator
from types import ModuleType


@contextlib.contextmanager
def replaying(snapshot: str, args: argparse.Namespace | None = None
              ) -> Iterator[tuple[str, str, ModuleType]]:
    """While inside, the snapshot directory ``snapshot`` is a fakelibvirt
    host and fakelibvirt stands in for libvirt: yields its URI, the reason
    to give for it and the fakelibvirt module (``virtdriver diff`` replays
    two in turn).  ``args`` gets the recorded node name and disk size
    (``recorded_host``, ``recorded_disk_gb``) the command reports."""
    from virtdriver import fakelibvirt
    from virtdriver.fakelibvirt.snapshot import read_snapshot
    from virtdriver.fakelibvirt.swap import use_fakelibvirt

    documents = read_snapshot(snapshot)
    if args is not None:
        args.recorded_host = documents.compute_host
        args.recorded_disk_gb = documents.disk_gb
    # The URI names the directory, so evidence says where facts came from.
    name = f"snapshot{pathlib.Path(snapshot).resolve()}"
    fakelibvirt.register_host(name, documents)
    try:
        with use_fakelibvirt() as fake:
            yield f"fake:///{name}", f"replaying snapshot {snapshot}", fake
    finally:
        fakelibvirt.unregister_host(name)
