"""Register test driver plugins without installing them anywhere shared.

:func:`register` writes, into a directory the test owns, the
``<name>-<version>.dist-info`` an installer would write (``METADATA`` and
``entry_points.txt``, read from the plugin's own ``pyproject.toml``);
with that directory and the plugin's project directory on ``sys.path``,
``importlib.metadata`` and stevedore find the plugin's entry points
exactly as they find an installed distribution's.
"""

from __future__ import annotations

import pathlib
import re
import tomllib
from collections.abc import Iterable

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
