"""Golden tests of the text tree: ``virtdriver report --driver fake
--host-spec P`` for each fake preset, compared with the files under
``tests/functional/golden/``.

A change to the tree's rendering or to a preset shows here as a diff.
When the change is intended, rewrite the files and review them::

    UPDATE_GOLDEN=1 .venv/bin/python -m pytest -q tests/functional/test_tree_golden.py
"""

from __future__ import annotations

import os
import pathlib
import re
import socket

import pytest

from virtdriver import cli

PRESETS = ("small", "numa2-ht", "numa4-large")
GOLDEN = pathlib.Path(__file__).parent / "golden"
REPO = pathlib.Path(__file__).resolve().parents[2]
UPDATE = os.environ.get("UPDATE_GOLDEN") == "1"
# Anything that looks like a clock: an ISO date, a time of day, seconds.
CLOCK = re.compile(r"\d{4}-\d\d-\d\d|\d\d:\d\d:\d\d|\d+\.\d+ s\b")


def golden_path(preset: str) -> pathlib.Path:
    return GOLDEN / f"report-fake-{preset}.txt"


def text_tree(capsys, monkeypatch, state_dir: pathlib.Path, preset: str) -> str:
    monkeypatch.setenv("VIRTDRIVER_STATE_DIR", str(state_dir))
    status = cli.main(["report", "--driver", "fake", "--host-spec", preset])
    captured = capsys.readouterr()
    assert status == 0, captured.err
    assert captured.err == ""
    return captured.out


@pytest.mark.parametrize("preset", PRESETS)
def test_text_tree_matches_golden(preset, capsys, monkeypatch, tmp_path):
    out = text_tree(capsys, monkeypatch, tmp_path / "state", preset)
    path = golden_path(preset)
    if UPDATE:
        GOLDEN.mkdir(exist_ok=True)
        path.write_text(out)
    assert path.is_file(), (
        f"{path} is missing; run with UPDATE_GOLDEN=1 to write it")
    assert out == path.read_text(), (
        f"the text tree of preset {preset!r} differs from {path}; if the "
        "change is intended, rerun with UPDATE_GOLDEN=1 and review the diff")


@pytest.mark.parametrize("preset", PRESETS)
def test_text_tree_has_no_machine_dependent_content(
        preset, capsys, monkeypatch, tmp_path):
    first = text_tree(capsys, monkeypatch, tmp_path / "one", preset)
    monkeypatch.chdir(tmp_path)
    second = text_tree(capsys, monkeypatch, tmp_path / "two", preset)
    # Another state directory and working directory: the same bytes.
    assert first == second
    for path in (tmp_path, REPO, pathlib.Path.home()):
        assert str(path) not in first
    hostname = socket.gethostname().split(".")[0]
    assert not re.search(rf"(?<![\w-]){re.escape(hostname)}(?![\w-])", first), (
        f"the host name {hostname!r} is in the tree")
    assert not CLOCK.search(first), CLOCK.search(first)


def test_golden_files_are_only_the_presets():
    """A stale golden file (a preset renamed or dropped) is noticed."""
    assert sorted(p.name for p in GOLDEN.iterdir()) == sorted(
        golden_path(p).name for p in PRESETS)
