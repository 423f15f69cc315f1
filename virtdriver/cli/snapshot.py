"""``virtdriver snapshot``: record what the driver reads from this host.

The snapshot is written whole or not at all: into a fresh directory beside
the target, renamed into place once complete.  The target must be new, an
empty directory, or an earlier snapshot (which is replaced); anything else
is refused before libvirt is read.
"""

from __future__ import annotations

import argparse
import os
import pathlib
import shutil
import sys
import tempfile
from typing import TextIO

from virtdriver.capabilities.traits.config import TraitConfig
from virtdriver.cli.errors import CommandError
from virtdriver.cli.host import Opener, read_with
from virtdriver.drivers.libvirt.recorder import record_host
from virtdriver.fakelibvirt.documents import HostDocuments
from virtdriver.fakelibvirt.snapshot import MANIFEST, write_snapshot
from virtdriver.render.progress import progress_bar


def run_snapshot(args: argparse.Namespace, config: TraitConfig, *,
                 opener: Opener, out: TextIO | None = None,
                 host: str | None = None,
                 nodedev_uri: str | None = None) -> int:
    """Record the host into ``args.output``; ``host``: the node name the
    driver would use (``[DEFAULT] host``), recorded for replays;
    ``nodedev_uri``: ``[libvirt] nodedev_uri``."""
    out = out or sys.stdout
    target = pathlib.Path(args.output)
    check_target(target)
    with progress_bar("recording node devices",
                      quiet=getattr(args, "quiet", False)) as bar:
        documents, choice = read_with(
            args.uri, opener,
            lambda conn, uri: record_host(conn, uri, config, progress=bar,
                                          host=host, nodedev_uri=nodedev_uri))
    write_whole(target, documents, choice.uri)
    out.write(f"recorded {choice.uri} ({choice.reason}) into {target}: "
              f"host capabilities, {len(documents.domain_capabilities)} "
              f"domain capabilities document(s), "
              f"{len(documents.domain_capabilities_errors)} refused, "
              f"{len(documents.node_devices)} node device(s)\n")
    return 0


def check_target(target: pathlib.Path) -> None:
    """Refuse a target that is a file, or a directory holding other things.

    Raises:
        CommandError: naming the target and what to give instead.
    """
    if target.is_dir():
        if (target / MANIFEST).is_file() or not any(target.iterdir()):
            return
        problem = f"is a directory holding other files (no {MANIFEST})"
    elif target.exists() or target.is_symlink():
        problem = "exists and is not a directory"
    else:
        blocker = next((p for p in target.absolute().parents if p.exists()),
                       None)
        if blocker is None or blocker.is_dir():
            return
        raise CommandError(f"snapshot -o {target} cannot be created: "
                           f"{blocker} is not a directory; choose another "
                           "path")
    raise CommandError(f"snapshot -o {target} {problem}; give a new "
                       "directory, an empty one, or an earlier snapshot to "
                       "replace")


def write_whole(target: pathlib.Path, documents: HostDocuments,
                uri: str) -> None:
    """Write the snapshot beside ``target``, then rename it into place.

    Raises:
        CommandError: the directory cannot be created or written; nothing
            is left behind but parent directories that were missing.
    """
    parent = target.absolute().parent
    try:
        parent.mkdir(parents=True, exist_ok=True)
        staging = pathlib.Path(tempfile.mkdtemp(
            prefix=f".{target.name}.", dir=parent))
    except OSError as exc:
        raise CommandError(
            f"snapshot -o {target}: cannot create a directory there "
            f"({exc.strerror or exc}); choose a path you may write") from exc
    try:
        write_snapshot(staging, documents, uri)
        os.chmod(staging, 0o777 & ~_umask())  # mkdtemp makes it 0700
        if target.is_dir():
            _replace(target, staging)
        else:
            os.rename(staging, target)
    except OSError as exc:
        shutil.rmtree(staging, ignore_errors=True)
        raise CommandError(
            f"snapshot -o {target}: cannot write it ({exc.strerror or exc}"
            f"{f': {exc.filename}' if exc.filename else ''}); nothing was "
            "written; choose a path you may write") from exc


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _replace(target: pathlib.Path, staging: pathlib.Path) -> None:
    old = pathlib.Path(tempfile.mkdtemp(prefix=f".{target.name}.old.",
                                        dir=staging.parent))
    os.rename(target, old / "snapshot")
    try:
        os.rename(staging, target)
    except OSError:
        os.rename(old / "snapshot", target)
        raise
    finally:
        shutil.rmtree(old, ignore_errors=True)
