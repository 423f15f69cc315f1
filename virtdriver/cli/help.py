"""``virtdriver help [TOPIC]``: the documentation installed with virtdriver.

Messages that send the user to a document name it as ``virtdriver help
TOPIC``, so whoever installed virtdriver with pip (and has no checkout's
``docs/``) can follow them.  The documents are the checkout's ``docs/*.md``,
shipped in the package as ``virtdriver/_docs`` (setup.cfg's package_data;
in a checkout it is a link to ``docs/``).
"""

from __future__ import annotations

import argparse
import sys
from importlib import resources
from typing import TextIO

from virtdriver.cli.errors import CommandError
from virtdriver.cli.usage import closest

#: The packaged documents' directory inside the ``virtdriver`` package.
DOCS_DIR = "_docs"
SUFFIX = ".md"


def topics() -> dict[str, str]:
    """Every topic, sorted, with its document's title (its first
    heading)."""
    found = {}
    for entry in resources.files("virtdriver").joinpath(DOCS_DIR).iterdir():
        if entry.name.endswith(SUFFIX) and entry.is_file():
            found[entry.name[:-len(SUFFIX)]] = _title(entry.read_text(
                encoding="utf-8"))
    return dict(sorted(found.items()))


def topic_text(topic: str) -> str:
    """The document of ``topic``.

    Raises:
        CommandError: no such topic (with the closest one, if any).
    """
    known = topics()
    if topic not in known:  # also keeps "../x" from naming any other file
        guess = closest(topic, known)
        raise CommandError(
            f"help: no topic {topic!r}; "
            + (f"did you mean {guess!r}? " if guess else "")
            + "`virtdriver help` lists the topics")
    return (resources.files("virtdriver").joinpath(DOCS_DIR)
            .joinpath(topic + SUFFIX).read_text(encoding="utf-8"))


def run_help(args: argparse.Namespace, out: TextIO | None = None) -> int:
    """Print the topic's document, or with no topic the list of them."""
    out = out or sys.stdout
    if args.topic:
        out.write(topic_text(args.topic))
        return 0
    known = topics()
    width = max(map(len, known), default=0)
    out.write("Topics (`virtdriver help TOPIC` prints one):\n")
    for name, title in known.items():
        out.write(f"  {name:<{width}}  {title}\n")
    return 0


def _title(text: str) -> str:
    for line in text.splitlines():
        if line.startswith("#"):
            return line.lstrip("#").strip()
    return ""
