"""State files: written so a crash leaves the old or the new one, and
re-read only when another process changed them.

Every file in a state directory (the trait ledger, the claims) is written
the same way (:func:`write_atomically`): a temporary file in the same
directory, flushed and fsynced, ``os.replace``d over the old one, then the
directory fsynced; the temporary file is created ``0600`` and exclusively
(never through a link), and missing directories private
(:func:`virtdriver.state_dir.make_dirs`).  A state file is read without
following a symbolic link and refused if another user could have written
it (:func:`virtdriver.state_dir.read_state_file`).  :func:`signature`
identifies a version of a file cheaply (one ``stat``), so a long-lived
tracker re-parses a file only after another process saved it.
"""

from __future__ import annotations

import contextlib
import json
import os
import pathlib
import re
import tempfile
from collections.abc import Callable
from typing import Any, Generic, Protocol, TypeVar

from virtdriver.state_dir import make_dirs, read_state_file
from virtdriver.long_numbers import long_number_reason

#: Builds a state file kind's own error: ``(path, problem, remedy)``;
#: ``remedy`` ``None`` means the kind's usual advice.
ErrorFactory = Callable[[pathlib.Path, str, "str | None"], Exception]
_DRIVER_NAME = re.compile(r"[A-Za-z0-9_.-]+")
_READ_REMEDY = ("make it and its directory readable, or use another state "
                "directory")


def driver_file(state_dir: pathlib.Path | str, kind: str, driver_name: str
                ) -> pathlib.Path:
    """``<state_dir>/<kind>-<driver_name>.json``: one driver's state file.

    Raises:
        ValueError: ``driver_name`` is not made of letters, digits, ``_``,
            ``.`` and ``-`` (it becomes part of a file name).
    """
    if not _DRIVER_NAME.fullmatch(driver_name):
        raise ValueError(
            f"driver name {driver_name!r} cannot name a ledger file (nor "
            "any state file); use letters, digits, '_', '.' and '-' only")
    return pathlib.Path(state_dir) / f"{kind}-{driver_name}.json"


def read_json(path: pathlib.Path, error: ErrorFactory) -> Any | None:
    """The JSON document in state file ``path``; ``None`` if there is no
    such file.

    Raises:
        error(...): not readable, not UTF-8, not JSON, or nested too deep.
        UnsafeStateError: a link, not a regular file, or writable by other
            users (:func:`~virtdriver.state_dir.read_state_file`).
    """
    try:
        raw = read_state_file(path)
        if raw is None:
            return None
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise error(path, f"not UTF-8 text ({exc})", None) from None
    except OSError as exc:
        raise error(path, f"cannot read it ({exc})", _READ_REMEDY) from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise error(path, f"not valid JSON (line {exc.lineno}, column "
                    f"{exc.colno}: {exc.msg})", None) from None
    except RecursionError:
        raise error(path, "nested too deeply", None) from None
    except ValueError as exc:  # a number Python will not read
        raise error(path, f"not valid JSON ({long_number_reason(exc) or exc})",
                    None) from None


def save_json(path: pathlib.Path, document: Any, error: ErrorFactory,
              what: str) -> None:
    """Write ``document`` (sorted, indented JSON) to state file ``path``
    atomically.

    Raises:
        error(...): it cannot be written; the old ``what`` is unchanged.
    """
    text = json.dumps(document, indent=1, sort_keys=True) + "\n"
    try:
        write_atomically(path, text)
    except OSError as exc:
        raise error(path, f"cannot write it ({exc})", (
            f"the old {what} is unchanged; make the state directory "
            "writable (permissions, free space) or use another one")
        ) from None


def write_atomically(path: pathlib.Path, text: str, *, mode: int = 0o600,
                     parents: bool = True) -> None:
    """Replace ``path``'s content with ``text`` atomically (parent
    directories created unless ``parents`` is false).  The new file has
    ``mode`` whatever the umask; whatever ``path`` was (a file, a symbolic
    link) is replaced, never written through.

    Raises:
        OSError: it cannot be written; the old file, if any, is unchanged
            and no temporary file is left behind.
    """
    temp = None
    try:
        if parents:
            make_dirs(path.parent)
        fd, temp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            if mode != 0o600:       # mkstemp's
                os.fchmod(handle.fileno(), mode)
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temp, path)
        temp = None
        _fsync_dir(path.parent)
    finally:
        if temp is not None:
            with contextlib.suppress(OSError):
                os.unlink(temp)


Signature = tuple[int, int, int, int, int]


def signature(path: pathlib.Path) -> Signature | None:
    """``(device, inode, size, mtime, ctime)`` of ``path``, or ``None``
    if it does not exist (or cannot be stat'ed).  An atomic replace always
    changes the inode, so a saved file never keeps its signature."""
    try:
        stat = path.stat()
    except OSError:
        return None
    return (stat.st_dev, stat.st_ino, stat.st_size, stat.st_mtime_ns,
            stat.st_ctime_ns)


def _fsync_dir(directory: pathlib.Path) -> None:
    """Make a rename in ``directory`` durable (where the OS allows it)."""
    with contextlib.suppress(OSError):
        fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


class Persisted(Protocol):
    """What :class:`CachedFile` keeps: a value that saves itself."""

    def save(self, path: pathlib.Path) -> None: ...


T = TypeVar("T", bound=Persisted)


class CachedFile(Generic[T]):
    """One state file's content, shared by the processes using its state
    directory: :meth:`read` parses the file again only when it changed
    (another process saved it); :meth:`save` writes a new version only if
    it differs.  Call both under the state directory's lock, so load,
    modify and save are one step no other process can split.

    Args:
        path: the file.
        load: ``path`` → its content (a missing file: the empty value);
            raises the file kind's own error.
        empty: the content before anything was read.
    """

    def __init__(self, path: pathlib.Path, load: Callable[[pathlib.Path], T],
                 empty: T) -> None:
        self.path = path
        self.value = empty
        self._load = load
        self._signature: Signature | None = None

    def read(self) -> T:
        """The content as on disk now."""
        now = signature(self.path)
        if now is None or now != self._signature:
            self.value = self._load(self.path)
            self._signature = now
        return self.value

    def save(self, value: T) -> None:
        """Write ``value`` if it differs from the file's (or there is no
        file yet); the file kind's error if it cannot be written."""
        if ((value is not self.value and value != self.value)
                or signature(self.path) is None):
            value.save(self.path)
            self._signature = signature(self.path)
        self.value = value
