"""Config files checked around oslo.config's reading of them.

oslo.config opens a file in the locale's encoding and lets a directory's
``IsADirectoryError`` or a ``UnicodeDecodeError`` out as a traceback; and
it ignores options it does not know, so a misspelt ``cpu_dedicated_sett``
silently does not apply.  :func:`file_problems` and
:func:`unknown_options` turn both into one line per problem, for a
:class:`~virtdriver.conf.reader.ConfigError`.

Which sections are checked for unknown options: only those virtdriver
registers (``[compute]``, ``[libvirt]``, ``[placement]``, ``[virtdriver]``;
in virtdriver's file they are virtdriver's, even though Nova uses the same
names).
``[DEFAULT]`` is shared with oslo.log and other libraries, and any other
section belongs to someone else: both are left alone.
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Iterable, Mapping

from oslo_config import cfg

from virtdriver.conf.reader import DOCS
from virtdriver.regular_file import NotRegularFile, read_regular


def file_problems(path: str) -> list[str]:
    """What keeps ``path`` from being read as a UTF-8 config file.

    Empty when it is a readable regular file of UTF-8 text; nothing is
    read from a device or FIFO.
    """
    if not os.path.exists(path):
        return [f"cannot read config file {path}: it does not exist or is "
                "not readable; check the --config-file path"]
    if os.path.isdir(path):
        return [f"config file {path} is a directory; give a file (options "
                "are read from files only, not from directories)"]
    try:
        data = read_regular(path)
    except NotRegularFile:  # /dev/zero would never end, a FIFO block
        return [f"config file {path} is not a regular file (a device, pipe "
                "or socket); give the path of a config file"]
    except OSError as exc:
        return [f"cannot read config file {path}: {exc.strerror or exc}; "
                "check its permissions"]
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        return [f"config file {path} is not UTF-8 text (byte "
                f"0x{data[exc.start]:02x} on line {line}); save it as "
                "UTF-8"]
    return []


def known_options(groups: Iterable[tuple[str, Iterable[cfg.Opt]]]
                  ) -> dict[str, frozenset[str]]:
    """Every name a file may use in each group (deprecated names too)."""
    known: dict[str, set[str]] = {}
    for group, opts in groups:
        names = known.setdefault(group.lower(), set())
        for opt in opts:
            names.update((opt.name, opt.dest))
            names.update(d.name for d in opt.deprecated_opts
                         if d.name and (d.group or group).lower()
                         == group.lower())
    return {group: frozenset(names) for group, names in known.items()}


def unknown_options(path: str, known: Mapping[str, frozenset[str]]
                    ) -> list[str]:
    """One problem per option of ``path`` that a section in ``known`` does
    not have, naming the closest known option.

    Section names match case-insensitively, as oslo.config reads them;
    option names exactly.  Sections not in ``known`` are not looked at.
    """
    sections: dict[str, dict[str, list[str]]] = {}
    cfg.ConfigParser(path, sections).parse()
    problems = []
    for section, options in sections.items():
        names = known.get(section.lower())
        if names is None:
            continue
        for option in options:
            if option in names:
                continue
            close = difflib.get_close_matches(option, sorted(names), n=1)
            hint = (f"did you mean {close[0]}?" if close else
                    f"[{section}] has {', '.join(sorted(names))}")
            problems.append(
                f"[{section}] {option} in {path} is not a virtdriver option, "
                f"so it would be ignored; {hint} Fix the name or remove the "
                f"line (every option: {DOCS})")
    return problems
