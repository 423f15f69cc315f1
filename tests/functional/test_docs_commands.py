"""Every command in ``docs/`` marked runnable works as written.

A fenced block whose info string is ``sh runnable`` is run one command at
a time, each with ``bash -e -c``, in a fresh temporary working directory
shared by the block's commands, with ``VIRTDRIVER_STATE_DIR`` a fresh
temporary directory, the repository's ``.venv/bin`` first on ``PATH`` and
the repository root in ``$REPO``.  A command is one line, or a line ending
in ``\\`` with the lines it continues, or a line starting a heredoc
(``<<'EOF'``) up to its terminator.  It must exit 0, or the status written
as a trailing ``# exit N`` on its first or last line.
"""

from __future__ import annotations

import dataclasses
import os
import pathlib
import re
import subprocess
import tempfile

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]
DOCS = REPO / "docs"
VENV_BIN = REPO / ".venv" / "bin"
GUIDES = ("getting-started.md", "operators.md", "test-authors.md")
FENCE = re.compile(r"^(```+|~~~+)\s*(.*?)\s*$")
HEREDOC = re.compile(r"<<-?\s*(['\"]?)([A-Za-z_][A-Za-z0-9_]*)\1")
EXIT = re.compile(r"\s#\s*exit\s+(\d+)\s*$")
TIMEOUT = 60


@dataclasses.dataclass(frozen=True)
class Command:
    """One command of a runnable block: its text, where it starts, and the
    exit status it must end with."""

    text: str
    file: str
    line: int
    status: int


def runnable_blocks(path: pathlib.Path) -> list[list[Command]]:
    """The ``sh runnable`` blocks of a markdown file, as commands."""
    blocks: list[list[Command]] = []
    lines = path.read_text().splitlines()
    i = 0
    while i < len(lines):
        opening = FENCE.match(lines[i])
        if not opening:
            i += 1
            continue
        fence, info = opening.groups()
        body_start = i + 1
        i = body_start
        while i < len(lines) and not lines[i].startswith(fence):
            i += 1
        if info.split() == ["sh", "runnable"]:
            blocks.append(split_commands(lines[body_start:i], path.name,
                                         body_start + 1))
        i += 1
    return blocks


def split_commands(lines: list[str], file: str, first: int) -> list[Command]:
    """Group a block's lines into commands (continuations, heredocs)."""
    commands = []
    i = 0
    while i < len(lines):
        start = i
        line = lines[i]
        i += 1
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        group = [line]
        while group[-1].endswith("\\") and i < len(lines):
            group.append(lines[i])
            i += 1
        for match in HEREDOC.finditer("\n".join(group)):
            terminator = match.group(2)
            while i < len(lines):
                group.append(lines[i])
                i += 1
                if lines[i - 1].strip() == terminator:
                    break
        found = EXIT.search(group[0]) or EXIT.search(group[-1])
        commands.append(Command("\n".join(group), file, first + start,
                                int(found.group(1)) if found else 0))
    return commands


def run_block(commands: list[Command], tmp: pathlib.Path) -> list[str]:
    """Run a block's commands; one message per command that misbehaved."""
    work, state = tmp / "work", tmp / "state"
    work.mkdir()
    state.mkdir()
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("VIRTDRIVER_")}
    env.update(VIRTDRIVER_STATE_DIR=str(state), REPO=str(REPO),
               PATH=f"{VENV_BIN}{os.pathsep}{os.environ.get('PATH', '')}")
    failures = []
    for command in commands:
        try:
            done = subprocess.run(
                ["bash", "-e", "-c", command.text], cwd=work, env=env,
                capture_output=True, text=True, timeout=TIMEOUT)
        except subprocess.TimeoutExpired:
            failures.append(f"{command.file}:{command.line}: "
                            f"{command.text!r} ran past {TIMEOUT} s")
            continue
        if done.returncode != command.status:
            failures.append(
                f"{command.file}:{command.line}: {command.text!r} exited "
                f"{done.returncode}, expected {command.status}\n"
                f"stdout: {done.stdout[-2000:]}\nstderr: {done.stderr[-2000:]}")
    return failures


def doc_blocks() -> list[pytest.param]:
    params = []
    for path in sorted(DOCS.glob("*.md")):
        for n, block in enumerate(runnable_blocks(path), 1):
            params.append(pytest.param(block, id=f"{path.name}-{n}"))
    return params


@pytest.mark.parametrize("block", doc_blocks())
def test_runnable_block_works_as_written(block, tmp_path):
    assert block, "an empty runnable block"
    failures = run_block(block, tmp_path)
    assert not failures, "\n".join(failures)


@pytest.mark.parametrize("guide", GUIDES)
def test_each_guide_has_runnable_commands(guide):
    blocks = runnable_blocks(DOCS / guide)
    assert sum(len(b) for b in blocks) >= 3, f"docs/{guide}"


# The runner itself, on temporary markdown files (never by breaking docs).

def write_md(tmp_path: pathlib.Path, body: str) -> pathlib.Path:
    path = tmp_path / "guide.md"
    path.write_text(body)
    return path


def run_md(tmp_path: pathlib.Path, body: str) -> list[str]:
    blocks = runnable_blocks(write_md(tmp_path, body))
    assert blocks
    failures = []
    for block in blocks:
        failures += run_block(block, pathlib.Path(tempfile.mkdtemp(dir=tmp_path)))
    return failures


def test_a_failing_line_fails_the_block(tmp_path):
    failures = run_md(tmp_path, "text\n\n```sh runnable\ntrue\n"
                      "virtdriver report --driver fake --host-spec nosuch\n"
                      "```\n")
    assert len(failures) == 1
    assert failures[0].startswith("guide.md:5: ")
    assert "exited 2, expected 0" in failures[0]


def test_bash_e_stops_inside_a_command(tmp_path):
    assert run_md(tmp_path, "```sh runnable\nfalse; true\n```\n")


def test_trailing_exit_comment_sets_the_expected_status(tmp_path):
    assert run_md(tmp_path, "```sh runnable\nexit 3  # exit 3\n```\n") == []
    failures = run_md(tmp_path, "```sh runnable\ntrue  # exit 1\n```\n")
    assert len(failures) == 1 and "exited 0, expected 1" in failures[0]


def test_other_blocks_are_not_run(tmp_path):
    body = ("```sh\nfalse\n```\n```\nfalse\n```\n```sh runnable-not\n"
            "false\n```\n")
    assert runnable_blocks(write_md(tmp_path, body)) == []


def test_heredoc_and_continuation_are_one_command(tmp_path):
    body = ("```sh runnable\ncat > a.json <<'EOF'\n{\"x\": 1}\n\nfalse\nEOF\n"
            "grep -q '\"x\": 1' a.json && \\\n  ! grep -q x b.json 2>/dev/null"
            "\n# a comment\ntest \"$(cat a.json | wc -l)\" = 3\n```\n")
    [block] = runnable_blocks(write_md(tmp_path, body))
    assert [c.line for c in block] == [2, 7, 10]
    (tmp_path / "run").mkdir()
    assert run_block(block, tmp_path / "run") == []


def test_environment_is_as_documented(tmp_path):
    body = ("```sh runnable\n"
            'test "$(command -v virtdriver)" = "$REPO/.venv/bin/virtdriver"\n'
            'test -d "$VIRTDRIVER_STATE_DIR"\n'
            'test -z "$(ls -A "$VIRTDRIVER_STATE_DIR")"\n'
            'test "$(pwd)" != "$REPO"\n'
            "touch here\n"
            "test -f here\n"
            "```\n")
    assert run_md(tmp_path, body) == []
