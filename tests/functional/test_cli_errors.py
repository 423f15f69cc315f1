"""The command's error policy: known errors are one message and exit 2 (3
when the environment is unreachable), anything else one line and exit 1,
the traceback only with ``--debug``, and a closed stdout is quiet."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys

import pytest

from virtdriver import cli
from virtdriver.cli.errors import exit_status
from virtdriver.drivers.libvirt.connection import LibvirtConnectionError
from virtdriver.filelock import LockError, LockTimeout

REPO = pathlib.Path(__file__).resolve().parents[2]


def raising(exc):
    def opener(uri):
        raise exc
    return opener


def test_unexpected_error_is_one_line_and_exit_1(capsys):
    status = cli.main(["host"], opener=raising(RuntimeError("boom\nmore")))

    captured = capsys.readouterr()
    assert status == cli.EXIT_INTERNAL == 70
    assert captured.out == ""
    assert captured.err.splitlines() == [
        "virtdriver: internal error: RuntimeError: boom more",
        "virtdriver: this is a bug; rerun with --debug for the traceback"]


@pytest.mark.parametrize("argv", [["--debug", "host"], ["host", "--debug"]])
def test_debug_shows_the_traceback(argv, capsys):
    status = cli.main(argv, opener=raising(KeyError("nodename")))

    err = capsys.readouterr().err
    assert status == cli.EXIT_INTERNAL
    assert err.startswith("Traceback (most recent call last):")
    assert "KeyError: 'nodename'" in err
    assert err.endswith("virtdriver: internal error: KeyError: 'nodename'\n")
    assert "rerun with --debug" not in err


def test_debug_shows_the_traceback_of_a_known_error_too(capsys):
    exc = LibvirtConnectionError("qemu:///system", "gone", "start it")
    status = cli.main(["host", "--debug"], opener=raising(exc))

    err = capsys.readouterr().err
    assert status == cli.EXIT_UNREACHABLE
    assert "Traceback" in err
    assert err.rstrip().endswith("start it")


def test_known_error_has_no_traceback(capsys, tmp_path):
    status = cli.main(["report", "--driver", "fake", "--host-spec",
                       str(tmp_path)])

    err = capsys.readouterr().err
    assert status == cli.EXIT_FAILURE
    assert err.startswith("virtdriver: fake host: ")
    assert "Traceback" not in err and err.count("\n") == 1


@pytest.mark.parametrize("exc, status", [
    (LockTimeout(pathlib.Path("/s/embed.lock"), "the embed root", 30.0,
                 "pid 7 (virtdriver report)"), cli.EXIT_UNREACHABLE),
    (LockError(pathlib.Path("/s/embed.lock"), "the embed root",
               PermissionError(13, "Permission denied")), cli.EXIT_FAILURE),
])
def test_lock_errors(exc, status, capsys):
    assert cli.main(["host"], opener=raising(exc)) == status
    assert capsys.readouterr().err == f"virtdriver: {exc}\n"


def test_a_driver_that_cannot_reach_libvirt_exits_3(capsys):
    # Nothing listens on port 1 of the loopback: connection refused.
    status = cli.main(["report", "--uri", "qemu+tcp://127.0.0.1:1/system"])

    err = capsys.readouterr().err
    assert status == cli.EXIT_UNREACHABLE
    assert err.startswith("virtdriver: cannot open libvirt at "
                          "qemu+tcp://127.0.0.1:1/system")
    assert "Traceback" not in err


def test_oserror_on_a_named_path_is_bad_input(tmp_path):
    named = str(tmp_path / "snap")
    inside = FileNotFoundError(2, "No such file", f"{named}/manifest.json")
    elsewhere = FileNotFoundError(2, "No such file", "/usr/lib/x.so")

    assert exit_status(inside, [named]) == cli.EXIT_FAILURE
    assert exit_status(elsewhere, [named]) is None
    assert exit_status(FileNotFoundError(2, "No such file"), [named]) is None


def _environment():
    return {**os.environ, "PYTHONPATH": str(REPO)}


def test_closed_stdout_exits_141_quietly():
    read_end, write_end = os.pipe()
    os.close(read_end)  # nobody will read: the first write fails
    try:
        child = subprocess.run(
            [sys.executable, "-m", "virtdriver.cli", "report", "--driver",
             "fake"], stdout=write_end, stderr=subprocess.PIPE, text=True,
            env=_environment(), timeout=60, check=False)
    finally:
        os.close(write_end)
    assert child.returncode == cli.EXIT_BROKEN_PIPE == 141
    assert child.stderr == ""


def test_report_piped_to_head_prints_no_traceback():
    child = subprocess.run(
        ["bash", "-c", "set -o pipefail; \"$0\" -m virtdriver.cli report "
         "--driver fake --host-spec numa4-large | head -1", sys.executable],
        capture_output=True, text=True, env=_environment(), timeout=60,
        check=False)
    assert child.stdout.startswith("fake-numa4-large (")
    assert child.stdout.count("\n") == 1
    assert child.stderr == ""
    assert child.returncode in (0, cli.EXIT_BROKEN_PIPE)
