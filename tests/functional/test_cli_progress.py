"""The CLI's progress bar and its global ``--quiet`` and ``--log-file``.

A real ``virtdriver sync`` of 20 ironic nodes to the embedded Placement
runs in a subprocess whose stderr is a pseudo-terminal (``pty.openpty``)
or a pipe.  A provider config file with a newer schema version makes the
run log one warning, so hiding it (``--quiet``) and writing it to
``--log-file`` can both be seen.
"""

from __future__ import annotations

import errno
import io
import json
import os
import pathlib
import pty
import re
import subprocess
import sys
import threading
import uuid

import pytest

from virtdriver.cli import main
from virtdriver.render.progress import MIN_INTERVAL, Progress, progress_bar

NODES = 20
BAR = re.compile(r"\rsyncing providers \[[#-]{30}\] (\d+)/(\d+)")
WARNING = "schema version 1.1"
SUMMARY = f"sync: synced, {NODES} providers changed"
#: oslo.log's default line: time, pid, level, logger, request context.
STAMP = r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3} \d+"


@pytest.fixture
def host(tmp_path: pathlib.Path) -> dict[str, pathlib.Path]:
    """An ironic inventory, a config naming a provider config directory
    whose one file draws a warning, and an empty state directory."""
    inventory = tmp_path / "nodes.json"
    inventory.write_text(json.dumps({"nodes": [
        {"uuid": str(uuid.UUID(int=i + 1)), "resource_class": "baremetal.gold",
         "properties": {"cpus": 4, "memory_mb": 1024}}
        for i in range(NODES)]}))
    (tmp_path / "provider-config").mkdir()
    (tmp_path / "provider-config" / "newer.yaml").write_text(
        "meta:\n  schema_version: '1.1'\n")
    conf = tmp_path / "virtdriver.conf"
    conf.write_text("[compute]\nprovider_config_location = "
                    f"{tmp_path / 'provider-config'}\n")
    return {"inventory": inventory, "conf": conf, "state": tmp_path / "state",
            "out": tmp_path / "stdout"}


def sync_argv(host, *before: str, after: tuple[str, ...] = ()) -> list[str]:
    return [sys.executable, "-m", "virtdriver.cli", *before, "sync",
            "--driver", "ironic", "--inventory", str(host["inventory"]),
            "--config-file", str(host["conf"]), *after]


def env_for(host) -> dict[str, str]:
    return dict(os.environ, VIRTDRIVER_STATE_DIR=str(host["state"]))


def run_on_pty(host, argv: list[str]) -> tuple[int, str, str]:
    """Run ``argv`` with stderr on a pseudo-terminal; stdout to a file."""
    master, slave = pty.openpty()
    with host["out"].open("wb") as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=slave,
                                stdin=subprocess.DEVNULL, env=env_for(host))
    os.close(slave)
    said = bytearray()
    try:
        while True:
            try:
                chunk = os.read(master, 4096)
            except OSError as exc:  # EIO: the child closed the terminal
                if exc.errno != errno.EIO:
                    raise
                break
            if not chunk:
                break
            said += chunk
    finally:
        os.close(master)
        status = proc.wait(timeout=60)
    return status, host["out"].read_text(), said.decode().replace("\r\n", "\n")


def run_in_process_on_pty(host, args: list[str], monkeypatch
                          ) -> tuple[int, str, str]:
    """``main(args)`` in this process with ``sys.stderr`` on a
    pseudo-terminal (a terminal as the bar sees one) and stdout captured:
    the command's own code path without a new interpreter's start."""
    master, slave = pty.openpty()
    err = os.fdopen(slave, "w", encoding="utf-8")
    out = io.StringIO()
    said = bytearray()

    def drain() -> None:  # so a full terminal buffer never blocks main()
        while True:
            try:
                chunk = os.read(master, 4096)
            except OSError:  # EIO: the terminal's other end closed
                return
            if not chunk:
                return
            said.extend(chunk)

    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    try:
        with monkeypatch.context() as patch:
            patch.setenv("VIRTDRIVER_STATE_DIR", str(host["state"]))
            patch.setattr(sys, "stdout", out)
            patch.setattr(sys, "stderr", err)
            status = main(args)
    finally:
        err.close()
        reader.join(60)
        os.close(master)
    return status, out.getvalue(), said.decode().replace("\r\n", "\n")


def test_a_terminal_shows_the_bar_to_the_end_then_clears_it(host):
    status, out, err = run_on_pty(host, sync_argv(host))
    assert status == 0, err
    steps = [(int(done), int(total)) for done, total in BAR.findall(err)]
    assert steps, err
    assert all(total == NODES for _, total in steps)
    assert steps[-1] == (NODES, NODES)
    dones = [done for done, _ in steps]
    assert dones == sorted(dones)
    # How many redraws there are depends on the machine's speed: the rate
    # limit is tested with a clock of the test's own (below).
    # Cleared at the end, before anything else is said.
    assert err[err.rindex(f"{NODES}/{NODES}"):].startswith(
        f"{NODES}/{NODES}\r\x1b[K")
    assert WARNING in err
    assert "syncing" not in out and SUMMARY in out


def test_a_pipe_never_sees_the_bar(host, capsys, monkeypatch):
    monkeypatch.setenv("VIRTDRIVER_STATE_DIR", str(host["state"]))
    status = main(sync_argv(host)[3:])   # in this process: no terminal
    done = capsys.readouterr()
    assert status == 0, done.err
    assert SUMMARY in done.out
    assert WARNING in done.err  # the warning still shows
    for stream in (done.out, done.err):
        assert "syncing providers" not in stream
        assert "\r" not in stream and "\x1b" not in stream


def test_quiet_hides_the_bar_and_warnings_and_log_file_keeps_them(
        host, tmp_path, monkeypatch):
    log = tmp_path / "virtdriver.log"
    log.write_text("an earlier run's line\n")
    status, out, err = run_in_process_on_pty(
        host, sync_argv(host, after=("--quiet", "--log-file", str(log)))[3:],
        monkeypatch)
    assert status == 0, err
    assert SUMMARY in out
    assert err == ""
    lines = log.read_text().splitlines()
    assert lines[0] == "an earlier run's line"  # appended, not replaced
    [record] = [line for line in lines[1:] if WARNING in line]
    assert re.match(rf"{STAMP} WARNING virtdriver\.[\w.]+ \[-\] provider "
                    "config: ", record), record


def test_quiet_still_prints_errors(host, capsys):
    status = main(["--quiet", "sync", "--driver", "ironic", "--inventory",
                   str(host["inventory"].with_name("missing.json"))])
    err = capsys.readouterr().err
    assert status == 2
    assert "missing.json" in err


def test_an_unopenable_log_file_is_bad_input(tmp_path, capsys):
    path = tmp_path / "no-such-dir" / "virtdriver.log"
    assert main(["--log-file", str(path), "drivers"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"virtdriver: --log-file {path}: cannot open it")
    assert "fix the path" in err


def test_the_agent_and_the_global_option_are_one_log_file(tmp_path):
    from virtdriver.cli.parser import build_parser
    parser = build_parser()
    before = parser.parse_args(["--log-file", "a.log", "agent", "--once"])
    after = parser.parse_args(["agent", "--once", "--log-file", "b.log"])
    neither = parser.parse_args(["agent", "--once"])
    assert (before.log_file, after.log_file, neither.log_file) == (
        "a.log", "b.log", None)


class Stream:
    """A stream that says it is a terminal and keeps what was written."""

    def __init__(self, tty: bool = True) -> None:
        self.text, self.tty = "", tty

    def write(self, text: str) -> None:
        self.text += text

    def flush(self) -> None:
        pass

    def isatty(self) -> bool:
        return self.tty


def test_redraws_are_rate_limited_but_the_last_step_always_draws():
    now = [0.0]
    stream = Stream()
    bar = Progress("working", stream=stream, clock=lambda: now[0])
    bar(1, 4)
    now[0] += MIN_INTERVAL / 2
    bar(2, 4)           # too soon: skipped
    now[0] += MIN_INTERVAL
    bar(3, 4)
    bar(4, 4)           # the last one, however soon
    assert re.findall(r"(\d)/4", stream.text) == ["1", "3", "4"]
    bar.clear()
    assert stream.text.endswith("\r\x1b[K")


@pytest.mark.parametrize(("tty", "quiet"), [(False, False), (True, True)])
def test_off_a_terminal_or_quiet_the_bar_writes_nothing(tty, quiet):
    stream = Stream(tty)
    with progress_bar("working", quiet=quiet, stream=stream) as bar:
        bar(1, 1)
    assert stream.text == ""
