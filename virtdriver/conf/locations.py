"""Where the ``virtdriver`` command finds its config files by default.

As oslo.config offers it to every OpenStack service
(``cfg.find_config_files`` and ``cfg.find_config_dirs`` with project
``virtdriver``): the first ``virtdriver.conf`` and the first
``virtdriver.conf.d/`` found in ``~/.virtdriver/``, ``~/``,
``/etc/virtdriver/``, ``/etc/`` (then ``$SNAP_COMMON/etc/virtdriver`` and
``$SNAP/etc/virtdriver`` in a snap).  ``--config-file`` replaces the
default file and ``--config-dir`` the default directory, each on its own,
as with oslo's own options.  A directory's ``*.conf`` files are read in
name order, after the files.

``$VIRTDRIVER_CONFIG_DIRS`` (a ``:``-separated list; empty: none) replaces
the directories searched: test suites set it empty so that what is in the
machine's ``/etc`` never reaches them, packagers may point it elsewhere.

Computed without importing oslo.config, so a command with nothing to read
still starts fast (:class:`~virtdriver.conf.defaults.DefaultConf`).
"""

from __future__ import annotations

import os
from collections.abc import Sequence

PROJECT = "virtdriver"
#: The environment variable that replaces the searched directories.
SEARCH_ENV = "VIRTDRIVER_CONFIG_DIRS"


def search_dirs() -> list[str]:
    """The directories searched, first found wins (module doc)."""
    if SEARCH_ENV in os.environ:
        return [d for d in os.environ[SEARCH_ENV].split(":") if d]
    snap, snap_common = os.environ.get("SNAP"), os.environ.get("SNAP_COMMON")
    dirs = [os.path.expanduser(os.path.join("~", "." + PROJECT)),
            os.path.expanduser("~"), os.path.join("/etc", PROJECT), "/etc"]
    dirs += [os.path.join(base, "etc", PROJECT)
             for base in (snap_common, snap) if base]
    return dirs


def _first(name: str) -> list[str]:
    for directory in search_dirs():
        path = os.path.join(directory, name)
        if os.path.exists(path):
            return [path]
    return []


def default_files() -> list[str]:
    """The default config file, ``[]`` or one path."""
    return _first(PROJECT + ".conf")


def default_dirs() -> list[str]:
    """The default config directory, ``[]`` or one path."""
    return _first(PROJECT + ".conf.d")


def config_locations(files: Sequence[str] | None = (),
                     dirs: Sequence[str] | None = ()
                     ) -> tuple[list[str], list[str]]:
    """The files and directories a command reads: ``files``
    (``--config-file``) or the default file, ``dirs`` (``--config-dir``)
    or the default directory."""
    return (list(files) if files else default_files(),
            list(dirs) if dirs else default_dirs())
