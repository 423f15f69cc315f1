"""An OS file lock shared by every virtdriver process on one machine.

:func:`exclusive_lock` holds ``flock(LOCK_EX)`` on a lock file for the
length of a ``with`` block.  A second process (or thread) waits up to a
bounded time, then gets :class:`LockTimeout` naming the holder: its pid and
command line, written into the lock file by whoever holds it.  The lock is
re-entrant within one thread, so a caller that already holds it may call
code that takes it again.

The lock file itself is never deleted (deleting it would let two processes
lock two different files of the same name); it holds only the holder's
description, which is informative and never trusted for anything else
(credentials in URLs redacted).  The machine may be shared: the lock file
is opened without following a symbolic link, created ``0600``, refused if
it is not a private regular file of its own (one link) or its directory
is not private (:mod:`virtdriver.state_dir`), and never truncated — the
holder writes its description over the first line.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import pathlib
import sys
import threading
import time
from collections.abc import Iterator

from virtdriver.redact import redact_userinfo
from virtdriver.state_dir import (
    UnsafeStateError, check_private, check_regular, make_dirs, not_followed)

#: How long a second process waits for the lock by default, in seconds.
DEFAULT_TIMEOUT = 30.0
_POLL = 0.02
_POLL_MAX = 0.25

_held: dict[str, tuple[threading.Thread, int]] = {}
_held_lock = threading.Lock()
_path_locks: dict[str, threading.Lock] = {}


class LockTimeout(Exception):
    """Another process (or thread) held the lock for longer than we wait.

    Attributes:
        path: the lock file.
        holder: what the holder wrote into it (pid and command), or ``""``.
    """

    def __init__(self, path: pathlib.Path, purpose: str, waited: float,
                 holder: str) -> None:
        self.path = path
        self.holder = holder
        who = f"held by {holder}" if holder else "held by another process"
        super().__init__(
            f"{purpose} is locked ({path}, {who}); waited {waited:g} s. "
            "Wait for that process to finish or stop it, then run again")


class LockError(Exception):
    """The lock file cannot be created or opened (permissions, a path
    through a file)."""

    def __init__(self, path: pathlib.Path, purpose: str, exc: OSError):
        self.path = path
        super().__init__(
            f"cannot open the lock file {path} for {purpose}: "
            f"{exc.strerror or exc}; make its directory writable or use "
            "another state directory")


def describe_self() -> str:
    """``pid 123 (virtdriver report --format json)``: this process (a
    URL's ``user:password@`` redacted)."""
    command = redact_userinfo(" ".join(
        os.path.basename(a) if i == 0 else a
        for i, a in enumerate(sys.argv))) or "python"
    if len(command) > 200:
        command = command[:197] + "..."
    return f"pid {os.getpid()} ({command})"


def read_holder(path: pathlib.Path) -> str:
    """What the current holder of ``path`` wrote, or ``""``."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK
                     | os.O_CLOEXEC)
    except OSError:
        return ""
    try:
        text = os.pread(fd, 1024, 0).decode("utf-8", "replace")
    except OSError:
        return ""
    finally:
        os.close(fd)
    # Only the first line is the holder's: the file is never truncated.
    return text.split("\n", 1)[0].strip()[:300]


@contextlib.contextmanager
def exclusive_lock(path: str | os.PathLike[str], *, purpose: str,
                   timeout: float = DEFAULT_TIMEOUT) -> Iterator[None]:
    """Hold an exclusive lock on ``path`` (created if missing).

    Args:
        path: the lock file; its directory is created if missing.
        purpose: what the lock protects, for messages
            ("the state directory /var/lib/virtdriver").
        timeout: seconds to wait for another holder, at most.

    Raises:
        LockTimeout: another holder kept it for ``timeout`` seconds.
        LockError: the lock file cannot be opened.
        UnsafeStateError: the lock file is a link, not a regular file of
            one link, or it or its directory is not private.
    """
    path = pathlib.Path(path)
    key = os.path.abspath(path)
    me = threading.current_thread()
    with _held_lock:
        held = _held.get(key)
        if held is not None and held[0] is me:
            _held[key] = (me, held[1] + 1)
            reentered = True
        else:
            reentered = False
            thread_lock = _path_locks.setdefault(key, threading.Lock())
    if reentered:
        try:
            yield
        finally:
            with _held_lock:
                thread, count = _held[key]
                _held[key] = (thread, count - 1)
        return
    deadline = time.monotonic() + timeout
    if not thread_lock.acquire(timeout=max(timeout, 0)):
        raise LockTimeout(path, purpose, timeout, read_holder(path))
    try:
        fd = _open(path, purpose)
        try:
            _flock(fd, path, purpose, deadline, timeout)
            _write_holder(fd)
            with _held_lock:
                _held[key] = (me, 1)
            try:
                yield
            finally:
                with _held_lock:
                    _held.pop(key, None)
                with contextlib.suppress(OSError):
                    os.pwrite(fd, b"\n", 0)   # no holder now
        finally:
            os.close(fd)  # releases the flock
    finally:
        thread_lock.release()


def _open(path: pathlib.Path, purpose: str) -> int:
    try:
        make_dirs(path.parent)
        check_private(path.parent, path.parent.stat(),
                      "the lock file's directory")
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW
                     | os.O_NONBLOCK | os.O_CLOEXEC, 0o600)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise not_followed(path, "the lock file") from None
        raise LockError(path, purpose, exc) from None
    try:
        info = os.fstat(fd)
        check_regular(path, info, "the lock file")
        if info.st_nlink != 1:
            raise UnsafeStateError(
                path, f"the lock file {path} has {info.st_nlink} hard "
                "links; virtdriver writes into it, so it must be a file of "
                "its own", "remove it (a new one is made) and run again")
    except BaseException:
        os.close(fd)
        raise
    return fd


def _flock(fd: int, path: pathlib.Path, purpose: str, deadline: float,
           timeout: float) -> None:
    pause = _POLL
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except OSError as exc:
            if exc.errno not in (errno.EAGAIN, errno.EACCES, errno.EWOULDBLOCK):
                raise LockError(path, purpose, exc) from None
        if time.monotonic() >= deadline:
            raise LockTimeout(path, purpose, timeout, read_holder(path))
        time.sleep(min(pause, max(deadline - time.monotonic(), 0)))
        pause = min(pause * 2, _POLL_MAX)


def _write_holder(fd: int) -> None:
    text = f"{describe_self()} since {time.strftime('%Y-%m-%dT%H:%M:%S')}\n"
    with contextlib.suppress(OSError):
        os.pwrite(fd, text.encode("utf-8", "replace"), 0)
