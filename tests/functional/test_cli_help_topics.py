"""Messages that send the user to a document can be followed by whoever
installed virtdriver with pip: they name ``virtdriver help TOPIC``, which
prints the document shipped in the package (issue 26: they named
``docs/X.md``, which only a checkout has)."""

from __future__ import annotations

import ast
import configparser
import functools
import pathlib
import re

import pytest

from virtdriver import cli
from virtdriver.cli.help import DOCS_DIR, topics

ROOT = pathlib.Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "virtdriver"
#: Strings this branch may not edit (another one owns the package); the
#: lead's merge turns them into `virtdriver help provider-config`.
NOT_YET: set[tuple[str, str]] = set()
HELP = re.compile(r"virtdriver help ([a-z0-9-]+)")


@functools.cache
def message_strings() -> tuple[tuple[str, int, str], ...]:
    """Every string literal in virtdriver/ that is no docstring (f-string
    parts included): the text of messages, help and hints."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if DOCS_DIR in path.relative_to(PACKAGE).parts:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        docstrings = {
            id(node.body[0].value) for node in ast.walk(tree)
            if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef,
                                 ast.AsyncFunctionDef))
            and node.body and isinstance(node.body[0], ast.Expr)
            and isinstance(node.body[0].value, ast.Constant)}
        for node in ast.walk(tree):
            if (isinstance(node, ast.Constant) and isinstance(node.value, str)
                    and id(node) not in docstrings):
                found.append((str(path.relative_to(ROOT)), node.lineno,
                              node.value))
    return tuple(found)


def test_no_message_names_a_file_of_the_checkout():
    named = [(path, line, text) for path, line, text in message_strings()
             if "docs/" in text and (path, text) not in NOT_YET]
    assert named == []


def test_every_topic_a_message_names_is_one_help_prints(capsys):
    named = {topic for _, _, text in message_strings()
             for topic in HELP.findall(text)}
    assert {"configuration", "claims", "exit-codes"} <= named
    assert named <= set(topics())
    for topic in sorted(named):
        assert cli.main(["help", topic]) == 0
        assert capsys.readouterr().out == (
            ROOT / "docs" / f"{topic}.md").read_text(encoding="utf-8")


def test_the_docs_ship_in_the_package():
    # A checkout links virtdriver/_docs to docs/; an sdist and a wheel
    # hold the files themselves, through setup.cfg's package_data.
    assert (PACKAGE / DOCS_DIR).resolve() == (ROOT / "docs").resolve()
    setup = configparser.ConfigParser()
    setup.read(ROOT / "setup.cfg")
    patterns = setup["options.package_data"]["virtdriver"].split()
    assert f"{DOCS_DIR}/*.md" in patterns
    assert set(topics()) == {p.stem for p in (ROOT / "docs").glob("*.md")}


def test_help_lists_the_topics_with_their_titles(capsys):
    assert cli.main(["help"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "Topics (`virtdriver help TOPIC` prints one):"
    assert "  exit-codes" in "\n".join(out)
    assert any(line.split() == ["exit-codes", "Exit", "codes"]
               for line in out)


@pytest.mark.parametrize("topic", ["../README", "/etc/passwd", "exit-codes.md",
                                   "EXIT-CODES"])
def test_help_prints_only_its_own_topics(capsys, topic):
    assert cli.main(["help", topic]) == 2
    err = capsys.readouterr().err.splitlines()
    assert err[0].startswith(f"virtdriver: help: no topic {topic!r}; ")
    assert err[0].endswith("`virtdriver help` lists the topics")
