"""Configuration only this user (or root) can change.

A config file steers what virtdriver does as root — and the file that
``[DEFAULT] log_config_append`` names is Python's ``logging.config``,
which can run code.  :func:`untrusted` refuses a file that a user other
than this one or root could write, or replace:

* the file (or, for a symbolic link, the link and the file it leads to)
  belongs to another user who is not root, or group or others may write
  it;
* the directory holding it belongs to another user, or group or others
  may write it without the sticky bit (with it, as in ``/tmp``, only the
  file's owner can replace it);
* a config directory (``--config-dir``) others could add a ``*.conf`` to.

A path that does not exist, or is not a regular file, is not this
module's concern (the reader refuses it as such).
"""

from __future__ import annotations

import os
import stat
from collections.abc import Sequence

#: Group and others' write bits.
_OTHERS_WRITE = 0o022


def untrusted_config(files: Sequence[str], dirs: Sequence[str],
                     files_of_dirs: Sequence[str]) -> list[str]:
    """One line per config file (``--config-file``) or directory
    (``--config-dir``, and the files read from it) that cannot be trusted;
    a refused directory's own files are not named again."""
    bad_dirs = {os.path.normpath(path): problem for path in dirs
                if (problem := untrusted_dir(path)) is not None}
    read = [*files, *(path for path in files_of_dirs
                      if os.path.dirname(os.path.normpath(path))
                      not in bad_dirs)]
    return [*bad_dirs.values(),
            *(problem for problem in map(untrusted, read) if problem)]


def untrusted(path: str, what: str = "config file") -> str | None:
    """One line saying why ``path`` cannot be trusted (naming it, its
    mode and what to do), or ``None`` when only this user or root can
    change it (or it does not exist)."""
    try:
        link = os.lstat(path)
    except OSError:
        return None
    paths = [path]
    if stat.S_ISLNK(link.st_mode):
        paths.append(os.path.realpath(path))
    for here in paths:
        problem = _file_problem(here, path, what)
        if problem is None:
            problem = _holder_problem(os.path.dirname(os.path.abspath(here)),
                                      path, what)
        if problem is not None:
            return problem
    return None


def untrusted_dir(path: str, what: str = "config directory") -> str | None:
    """As :func:`untrusted`, for a directory whose files are read (others
    must not be able to add one)."""
    try:
        info = os.stat(path)
    except OSError:
        return None
    return _owner_or_mode(path, info, f"{what} {path}", "could add files "
                          "to it", sticky_ok=False)


def _file_problem(here: str, given: str, what: str) -> str | None:
    try:
        info = os.lstat(here)
    except OSError:
        return None
    name = f"{what} {given}" + (f" (a link to {here})" if here != given
                                else "")
    if stat.S_ISLNK(info.st_mode):       # the link itself: who may repoint
        return _owner(info, f"{name} (a symbolic link)",
                      "could point it elsewhere")
    if not stat.S_ISREG(info.st_mode):
        return None     # no configuration: the reader refuses it as such
    return _owner_or_mode(given, info, name, "could change it",
                          sticky_ok=False)


def _holder_problem(directory: str, given: str, what: str) -> str | None:
    try:
        info = os.stat(directory)
    except OSError:
        return None
    return _owner_or_mode(
        directory, info, f"{what} {given} is in {directory}, which",
        "could replace the file", sticky_ok=True)


def _owner(info: os.stat_result, name: str, could: str) -> str | None:
    if info.st_uid in (os.geteuid(), 0):
        return None
    return (f"{name} belongs to another user (uid {info.st_uid}), who "
            f"{could}; {_RULE}: remove it, or replace it with a link of "
            "this user's or root's")


#: Why a file is refused, for every message.
_RULE = "virtdriver reads configuration only root or this user can change"


def _owner_or_mode(path: str, info: os.stat_result, name: str, could: str,
                   *, sticky_ok: bool) -> str | None:
    mode = stat.S_IMODE(info.st_mode)
    if info.st_uid not in (os.geteuid(), 0):
        return (f"{name} belongs to another user (uid {info.st_uid}, mode "
                f"{mode:04o}), who {could}; {_RULE}: check it, then chown it "
                "to root, or use another")
    if mode & _OTHERS_WRITE and not (sticky_ok and mode & stat.S_ISVTX):
        return (f"{name} is writable by other users (mode {mode:04o}), "
                f"who {could}; {_RULE}: check it, then run chmod go-w "
                f"{path}")
    return None
