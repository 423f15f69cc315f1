"""Where virtdriver keeps its state (the ``qemu:///embed`` root, caches).

The directory is, in order: the ``[virtdriver] state_dir`` option (passed
in by the caller), ``$VIRTDRIVER_STATE_DIR``, ``/var/lib/virtdriver`` for
root, ``~/.local/state/virtdriver`` for other users.  An empty value counts
as unset.  This module does not import libvirt, so code without libvirt
(the CLI's option checks) may use it.

The machine may be shared, so the directory and its files are the
service's own (``docs/operators.md``, "A shared machine"):
:func:`make_dirs` creates the directory and its missing parents with
:func:`dir_mode` whatever the umask; :func:`check_private` refuses a
directory or file another user could change (an :class:`UnsafeStateError`
naming it and its mode); :func:`read_state_file` reads a state file
without following a symbolic link.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

ENV_VAR = "VIRTDRIVER_STATE_DIR"
OPTION = "[virtdriver] state_dir"
ROOT_DEFAULT = Path("/var/lib/virtdriver")


class StateDirError(ValueError):
    """The state directory cannot be used.

    Attributes:
        path: the directory wanted.
        source: where it came from, in words ("$VIRTDRIVER_STATE_DIR").
        problem: what is wrong, one clause naming ``path`` and ``source``.
        hint: what to do.
    """

    def __init__(self, path: Path, source: str, problem: str,
                 hint: str) -> None:
        self.path = path
        self.source = source
        self.problem = problem
        self.hint = hint
        super().__init__(f"{problem}; {hint}")


class UnsafeStateError(StateDirError):
    """A state directory or state file that is a symbolic link, not a
    regular file, or that another user could change: nothing is read or
    written through it.  ``source`` is ``""``."""

    def __init__(self, path: Path, problem: str, hint: str) -> None:
        super().__init__(path, "", problem, hint)


def dir_mode() -> int:
    """The mode of a directory virtdriver creates for its state: ``0700``;
    ``0755`` for root, because the embedded libvirt runs QEMU as its own
    user (``libvirt-qemu``), which must reach the embed root inside it.
    Files in it are ``0600`` either way."""
    return 0o755 if os.geteuid() == 0 else 0o700


def make_dirs(path: Path) -> None:
    """Create ``path`` and its missing parents, each with :func:`dir_mode`
    whatever the umask (an existing directory is left as it is).

    Raises:
        OSError: one cannot be created.
    """
    missing = []
    here = Path(path)
    while not os.path.lexists(here) and here != here.parent:
        missing.append(here)
        here = here.parent
    mode = dir_mode()
    for directory in reversed(missing):
        try:
            os.mkdir(directory, mode)
        except FileExistsError:
            continue           # made meanwhile: checked where it is used
        # The umask may have taken bits off; never more than ``mode``.
        fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY
                     | os.O_NOFOLLOW | os.O_CLOEXEC)
        try:
            os.fchmod(fd, mode)
        finally:
            os.close(fd)


def check_private(path: Path, info: os.stat_result, what: str) -> None:
    """Refuse ``path`` (``info``: its ``stat``) if a user other than this
    one (or root) owns it or may write it.

    Args:
        what: "the state directory", "the state file", for the message.

    Raises:
        UnsafeStateError: naming ``path``, its owner or mode, what to do.
    """
    mode = f"mode {stat.S_IMODE(info.st_mode):04o}"
    if info.st_uid not in (os.geteuid(), 0):
        raise UnsafeStateError(
            path, f"{what} {path} belongs to another user (uid "
            f"{info.st_uid}, {mode}), who could change it",
            f"use a state directory of this user's own, or chown it to "
            f"this user (uid {os.geteuid()}) after checking its content")
    if info.st_mode & 0o022:
        raise UnsafeStateError(
            path, f"{what} {path} is writable by other users ({mode})",
            f"check its content, then run chmod go-w {path}; or use "
            "another state directory")


def read_state_file(path: Path) -> bytes | None:
    """The content of state file ``path``; ``None`` if there is none.

    The file is opened without following a symbolic link (and without
    blocking on a FIFO) and must be a regular file :func:`check_private`
    accepts.

    Raises:
        UnsafeStateError: a link, not a regular file, or not private.
        OSError: it cannot be read.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK
                     | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise not_followed(path, "the state file") from None
        raise
    with os.fdopen(fd, "rb") as stream:
        check_regular(path, os.fstat(fd), "the state file")
        return stream.read()


def check_regular(path: Path, info: os.stat_result, what: str) -> None:
    """Refuse ``path`` unless it is a private regular file.

    Raises:
        UnsafeStateError: as said.
    """
    if not stat.S_ISREG(info.st_mode):
        raise UnsafeStateError(
            path, f"{what} {path} is not a regular file",
            "move it aside; virtdriver writes a new one")
    check_private(path, info, what)


def not_followed(path: Path, what: str) -> UnsafeStateError:
    """The error for a state file that is a symbolic link."""
    try:
        target = f" (to {os.readlink(path)})"
    except OSError:
        target = ""
    return UnsafeStateError(
        path, f"{what} {path} is a symbolic link{target}; virtdriver does "
        "not follow links in its state directory",
        "remove the link (it may have been planted) and run again")


def state_dir(configured: str | os.PathLike[str] | None = None) -> Path:
    """virtdriver's state directory, absolute, created if missing.

    Args:
        configured: the ``[virtdriver] state_dir`` option, if set; it wins
            over the environment and the defaults.

    Missing directories are created with :func:`dir_mode`.

    Raises:
        StateDirError: the path exists and is not a directory, or it
            cannot be created.
        UnsafeStateError: another user owns it or may write it.
    """
    path, source, hint = _choose(configured)
    if path.exists() and not path.is_dir():
        raise StateDirError(path, source,
                            f"the state directory {path} ({source}) exists "
                            "and is not a directory", hint)
    try:
        make_dirs(path)
        info = path.stat()
    except OSError as exc:
        raise StateDirError(path, source,
                            f"cannot create the state directory {path} "
                            f"({source}): {exc.strerror or exc}",
                            hint) from None
    check_private(path, info, "the state directory")
    return path


def chosen_path(configured: str | os.PathLike[str] | None = None) -> Path:
    """The state directory :func:`state_dir` would use, absolute, without
    creating or checking anything (for a reader that only looks for a
    file in it)."""
    return _choose(configured)[0]


def _choose(configured: str | os.PathLike[str] | None
            ) -> tuple[Path, str, str]:
    """The path, where it came from, and what to do if it is unusable."""
    if configured is not None and os.fspath(configured):
        return (_absolute(configured), f"from {OPTION}",
                f"set {OPTION} to a directory you may write, or unset it")
    env = os.environ.get(ENV_VAR)
    if env:
        return (_absolute(env), f"from ${ENV_VAR}",
                f"point ${ENV_VAR} at a directory you may write, or unset "
                "it")
    if os.geteuid() == 0:
        path, source = ROOT_DEFAULT, "the default for root"
    else:
        path = Path.home() / ".local" / "state" / "virtdriver"
        source = "the default for non-root users"
    return (path, source,
            f"move {path} aside, or set {OPTION} or ${ENV_VAR} to a "
            "directory you may write")


def _absolute(raw: str | os.PathLike[str]) -> Path:
    # libvirt refuses a relative embed root; resolve against the cwd now.
    return Path(os.path.abspath(os.path.expanduser(os.fspath(raw))))
