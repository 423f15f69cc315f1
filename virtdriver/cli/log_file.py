"""The command's log file, opened as a state file is: never through a link,
never another user's, created ``0600`` whatever the umask.

oslo.log opens the log file itself, by name, following links, with the
umask's mode.  So :func:`checked_log_file` opens it first, the safe way
(``O_NOFOLLOW``, created ``0600``), and refuses it before oslo.log sees it
when it is:

* a symbolic link (a link planted in ``/tmp`` or a shared log directory
  would make root append to, or create, whatever it points to);
* owned by a user other than this one or root, or a regular file with
  more than one link (another user's hard link to a root-only file);
* not a regular file or a character device (``/dev/null``, ``/dev/full``
  stay usable);
* in a directory another user owns, or that others may write without the
  sticky bit (they could swap the file between this check and oslo.log's
  open).

Then :func:`guard` takes over the handler oslo.log made: its stream is
reopened the same safe way (and must be the file checked), and so is every
reopen after that (``WatchedFileHandler`` after a rotation by logrotate,
the rotating handlers' own rollover).  An existing log file of ours that
others may write loses those bits.
"""

from __future__ import annotations

import errno
import logging
import os
import stat

#: Mode bits others must not have on a file or directory we write a log in.
_OTHERS_WRITE = 0o022


class UnsafeLogFile(OSError):
    """A log file virtdriver will not write: ``strerror`` says why and
    what to do (one clause), ``filename`` is the file."""


def open_log(path: str) -> int:
    """Open ``path`` for appending the safe way (module doc); its fd.

    Raises:
        UnsafeLogFile: refused (module doc).
        OSError: it cannot be opened (no such directory, permissions).
    """
    _check_directory(path)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT
                     | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, 0o600)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            try:
                target = f" (to {os.readlink(path)})"
            except OSError:
                target = ""
            raise UnsafeLogFile(
                errno.ELOOP, f"it is a symbolic link{target}, and virtdriver "
                "does not write its log through a link; remove the link (it "
                "may have been planted) or choose another file",
                path) from None
        raise
    try:
        _check_file(path, fd)
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _check_directory(path: str) -> None:
    directory = os.path.dirname(os.path.abspath(path))
    try:
        info = os.stat(directory)
    except OSError:
        return      # the open says what is wrong
    if info.st_uid not in (os.geteuid(), 0):
        raise UnsafeLogFile(
            errno.EPERM, f"its directory {directory} belongs to another user "
            f"(uid {info.st_uid}), who could replace the file; choose a log "
            "file in a directory of this user's or root's", path)
    if info.st_mode & 0o002 and not info.st_mode & stat.S_ISVTX:
        raise UnsafeLogFile(
            errno.EPERM, f"its directory {directory} is writable by every "
            f"user (mode {stat.S_IMODE(info.st_mode):04o}, no sticky bit), "
            "who could replace the file; choose another directory or run "
            f"chmod o-w {directory}", path)


def _check_file(path: str, fd: int) -> None:
    info = os.fstat(fd)
    mode = stat.S_IMODE(info.st_mode)
    if info.st_uid not in (os.geteuid(), 0):
        raise UnsafeLogFile(
            errno.EPERM, f"it belongs to another user (uid {info.st_uid}, "
            f"mode {mode:04o}), and virtdriver does not write its log into "
            "another user's file; remove it or choose another file", path)
    if stat.S_ISCHR(info.st_mode):
        return
    if not stat.S_ISREG(info.st_mode):
        raise UnsafeLogFile(
            errno.EINVAL, "it is not a regular file; choose a file", path)
    if info.st_nlink != 1:
        raise UnsafeLogFile(
            errno.EMLINK, f"it has {info.st_nlink} hard links, so writing "
            "it would write another file too; remove it (a new one is "
            "made) or choose another file", path)
    if mode & _OTHERS_WRITE and info.st_uid == os.geteuid():
        os.fchmod(fd, mode & ~_OTHERS_WRITE)
    elif mode & _OTHERS_WRITE:
        raise UnsafeLogFile(
            errno.EPERM, f"other users may write it (mode {mode:04o}); run "
            f"chmod go-w {path} or choose another file", path)


def checked_log_file(path: str) -> tuple[int, int]:
    """Check (and create, ``0600``) the log file ``path`` before oslo.log
    opens it; its ``(device, inode)``.

    Raises:
        UnsafeLogFile, OSError: as :func:`open_log`.
    """
    fd = open_log(path)
    try:
        info = os.fstat(fd)
    finally:
        os.close(fd)
    return info.st_dev, info.st_ino


def guard(handler: logging.FileHandler, identity: tuple[int, int]) -> None:
    """Make ``handler`` (oslo.log's, on the file :func:`checked_log_file`
    checked as ``identity``) write through a safely opened stream, now and
    at every reopen; a refused reopen goes to ``handler.handleError``
like any write failure.

    Raises:
        UnsafeLogFile: the file was replaced since it was checked.
        OSError: it cannot be opened again.
    """
    def safe_open():
        fd = open_log(handler.baseFilename)
        return os.fdopen(fd, "a", encoding=handler.encoding,
                         errors=getattr(handler, "errors", None))

    handler._open = safe_open
    emit = handler.emit

    def checked_emit(record: logging.LogRecord) -> None:
        # A refused reopen raises outside the handler's own try: make it
        # a write failure the handler reports, not the logging caller's.
        try:
            emit(record)
        except OSError:
            handler.handleError(record)

    handler.emit = checked_emit
    stream = safe_open()
    info = os.fstat(stream.fileno())
    if (info.st_dev, info.st_ino) != identity:
        stream.close()
        raise UnsafeLogFile(
            errno.EBUSY, "it was replaced while the log was being set up; "
            "check who else writes in its directory", handler.baseFilename)
    old, handler.stream = handler.stream, stream
    if old is not None:
        old.close()
    if hasattr(handler, "_statstream"):   # WatchedFileHandler's identity
        handler._statstream()
