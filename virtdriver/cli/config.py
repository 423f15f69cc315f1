"""``virtdriver config sample``: an annotated sample configuration.

The sample comes from oslo.config's own generator over the ``virtdriver``
namespace of the ``oslo.config.opts`` entry point (setup.cfg), so it is
exactly what ``oslo-config-generator --namespace virtdriver`` writes: every
option commented out at its default, with its help text.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import pathlib
import stat
import sys

from oslo_config import cfg, generator

from virtdriver.cli.errors import CommandError
from virtdriver.state_file import write_atomically

#: The ``oslo.config.opts`` entry point naming :func:`virtdriver.conf.list_opts`.
NAMESPACE = "virtdriver"


def sample_config() -> str:
    """The sample configuration file's text."""
    conf = cfg.ConfigOpts()
    generator.register_cli_opts(conf)
    conf(args=["--namespace", NAMESPACE], project="virtdriver",
         default_config_files=[], default_config_dirs=[], use_env=False)
    out = io.StringIO()
    generator.generate(conf, output_file=out)
    return out.getvalue()


def run_config(args: argparse.Namespace) -> int:
    """``config sample``: print the sample, or write it to ``--output``.

    Raises:
        CommandError: ``--output`` cannot be written (exit 2), a full
            disk included.
    """
    text = sample_config()
    if args.output:
        try:
            write_sample(pathlib.Path(args.output), text)
        except OSError as exc:
            if exc.filename is not None:   # the path (or its scratch file)
                raise CommandError(
                    f"cannot use {args.output}: {exc.strerror or exc}; "
                    "check the path and its permissions") from None
            # ENOSPC at write or close names no file.
            raise CommandError(
                f"--output {args.output}: cannot write the sample "
                f"({exc.strerror or exc}); free space or give another "
                "path") from None
    else:
        sys.stdout.write(text)
    return 0


def write_sample(target: pathlib.Path, text: str) -> None:
    """Write ``text`` to ``target`` the way ``report --output`` does: a
    new file (``0644``) renamed over whatever had the name — a symbolic
    link another user planted is replaced, never written through.  A
    character device (``/dev/null``) is written; a link to one, or a
    directory, FIFO or socket, is refused.

    Raises:
        CommandError: a target refused as said.
        OSError: it cannot be written (the old file, if any, unchanged).
    """
    try:
        info = os.lstat(target)
    except FileNotFoundError:
        info = None
    if info is not None and stat.S_ISCHR(info.st_mode):
        fd = os.open(target, os.O_WRONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        with os.fdopen(fd, "w", encoding="utf-8") as device:
            device.write(text)
        return
    if info is not None and stat.S_ISLNK(info.st_mode):
        with contextlib.suppress(OSError):
            if not stat.S_ISREG(os.stat(target).st_mode):
                raise CommandError(
                    f"--output {target} is a link to {os.readlink(target)}, "
                    "not to a file; to print the sample, leave out "
                    "--output; else give the path of a file")
    elif info is not None and not stat.S_ISREG(info.st_mode):
        raise CommandError(
            f"--output {target} is not a file (a directory, pipe or "
            "socket); give the path of a file")
    write_atomically(target, text, mode=0o644, parents=False)
