"""Register test driver plugins without installing them anywhere shared.

:func:`register` writes, into a directory the test owns, the
``<name>-<version>.dist-info`` an installer would write (``METADATA`` and
``entry_points.txt``, read from the plugin's own ``pyproject.toml``);
with that directory and the plugin's project directory on ``sys.path``,
``importlib.metadata`` and stevedore find the plugin's entry points
exactly as they find an installed distribution's.
"""

from __future__ import annotations

import contextlib
import importlib
import pathlib
import re
import sys
import tomllib
from collections.abc import Iterable, Iterator

from stevedore.extension import ExtensionManager

from virtdriver.drivers.loader import NAMESPACE

#: This directory: one project directory per plugin.
PLUGINS = pathlib.Path(__file__).resolve().parent
#: Every test plugin's project directory name.
NAMES = ("virtdriver_example", "virtdriver_broken")


def register(target: pathlib.Path, names: Iterable[str] = NAMES
             ) -> list[str]:
    """Write each plugin's dist-info into ``target``; return the path
    entries that make them importable and registered (``target``, then
    each project directory)."""
    target.mkdir(parents=True, exist_ok=True)
    paths = [str(target)]
    for name in names:
        project = PLUGINS / name
        write_dist_info(project, target)
        paths.append(str(project))
    return paths


@contextlib.contextmanager
def registered(target: pathlib.Path, names: Iterable[str] = NAMES
               ) -> Iterator[list[str]]:
    """While inside, the plugins are registered in this process
    (:func:`register`'s paths first on ``sys.path``, stevedore's view of
    the namespace dropped); yields those paths (a fresh process needs
    them on ``PYTHONPATH``).  After, ``sys.path`` is as it was and the
    plugins' modules are forgotten."""
    names = tuple(names)
    paths = register(target, names)
    saved = list(sys.path)
    sys.path[:0] = paths
    _forget()
    try:
        yield paths
    finally:
        sys.path[:] = saved
        for module in [m for m in sys.modules if m.split(".")[0] in names]:
            del sys.modules[module]
        _forget()


def _forget() -> None:
    importlib.invalidate_caches()
    ExtensionManager.ENTRY_POINT_CACHE.pop(NAMESPACE, None)


def write_dist_info(project: pathlib.Path, target: pathlib.Path) -> None:
    """``target/<name>-<version>.dist-info`` for ``project``'s
    ``pyproject.toml`` ``[project]`` table."""
    meta = tomllib.loads((project / "pyproject.toml").read_text())["project"]
    stem = f"{re.sub(r'[-_.]+', '_', meta['name'])}-{meta['version']}"
    info = target / f"{stem}.dist-info"
    info.mkdir(exist_ok=True)
    (info / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: {meta['name']}\n"
        f"Version: {meta['version']}\n")
    lines = []
    for group, entries in meta.get("entry-points", {}).items():
        lines.append(f"[{group}]")
        lines += [f"{key} = {value}" for key, value in entries.items()]
    (info / "entry_points.txt").write_text("\n".join(lines) + "\n")
