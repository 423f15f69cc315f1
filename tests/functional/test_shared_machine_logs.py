"""Log files on a shared machine (issue 26): ``--log-file``, ``--log-dir``
and ``[DEFAULT] log_file`` never write through a link another user
planted, nor into a file or directory of theirs, and a new log file is
``0600`` whatever the umask."""

from __future__ import annotations

import contextlib
import logging
import logging.handlers
import os
import stat

import pytest

from virtdriver.cli import main
from virtdriver.cli.log_file import UnsafeLogFile, checked_log_file, guard

FAKE = ["--driver", "fake", "--host-spec", "small"]
NOBODY = 65534
SECRET = "root:only\n"
as_root = pytest.mark.skipif(os.geteuid() != 0, reason="chown needs root")


@contextlib.contextmanager
def umask(value: int):
    before = os.umask(value)
    try:
        yield
    finally:
        os.umask(before)


@pytest.fixture
def victim(tmp_path):
    """A root-only file elsewhere, which must never change."""
    path = tmp_path / "elsewhere" / "secret"
    path.parent.mkdir()
    path.write_text(SECRET)
    path.chmod(0o600)
    return path


@pytest.fixture(autouse=True)
def state(tmp_path, monkeypatch):
    monkeypatch.setenv("VIRTDRIVER_STATE_DIR", str(tmp_path / "state"))


def how(kind: str, tmp_path, path) -> list[str]:
    """The command line that logs to ``path`` the ``kind`` way."""
    if kind == "--log-file":
        return ["--log-file", str(path)]
    if kind == "--log-dir":
        assert path.name == "virtdriver.log"
        return ["--log-dir", str(path.parent)]
    conf = tmp_path / "log.conf"
    conf.write_text(f"[DEFAULT]\nlog_file = {path}\n")
    return ["--config-file", str(conf)]


def refused(capsys, argv) -> str:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1, err
    assert "Traceback" not in err
    return err


KINDS = ["--log-file", "--log-dir", "[DEFAULT] log_file"]


@pytest.mark.parametrize("kind", KINDS)
def test_a_planted_link_is_refused_and_its_target_untouched(
        kind, tmp_path, victim, capsys):
    logs = tmp_path / "logs"
    logs.mkdir(mode=0o1777)
    logs.chmod(0o1777)        # /tmp-like: anyone may plant a link
    link = logs / "virtdriver.log"
    link.symlink_to(victim)
    before = os.stat(victim)

    err = refused(capsys, ["report", *FAKE, *how(kind, tmp_path, link)])

    assert err.startswith(f"virtdriver: will not log to {link}: it is a "
                          f"symbolic link (to {victim})")
    assert victim.read_text() == SECRET
    assert os.stat(victim).st_mtime_ns == before.st_mtime_ns


@pytest.mark.parametrize("kind", KINDS)
def test_a_link_to_a_missing_file_creates_nothing(kind, tmp_path, capsys):
    target = tmp_path / "etc" / "cron-job"
    target.parent.mkdir()
    link = tmp_path / "virtdriver.log"
    link.symlink_to(target)

    refused(capsys, ["report", *FAKE, *how(kind, tmp_path, link)])

    assert not target.exists()


@as_root
@pytest.mark.parametrize("kind", KINDS)
def test_another_users_file_is_refused_and_left_alone(kind, tmp_path,
                                                      capsys):
    theirs = tmp_path / "virtdriver.log"
    theirs.write_text("their lines\n")
    os.chown(theirs, NOBODY, NOBODY)

    err = refused(capsys, ["report", *FAKE, *how(kind, tmp_path, theirs)])

    assert "belongs to another user (uid 65534, mode 0644)" in err
    assert theirs.read_text() == "their lines\n"


@as_root
def test_a_directory_of_another_user_is_refused(tmp_path, capsys):
    theirs = tmp_path / "theirs"
    theirs.mkdir()
    os.chown(theirs, NOBODY, NOBODY)

    err = refused(capsys, ["report", *FAKE, "--log-dir", str(theirs)])

    assert f"its directory {theirs} belongs to another user" in err
    assert not (theirs / "virtdriver.log").exists()


def test_a_directory_everyone_may_write_without_sticky_bit_is_refused(
        tmp_path, capsys):
    open_dir = tmp_path / "open"
    open_dir.mkdir()
    open_dir.chmod(0o777)

    err = refused(capsys, ["report", *FAKE, "--log-dir", str(open_dir)])

    assert "(mode 0777, no sticky bit)" in err
    assert not (open_dir / "virtdriver.log").exists()


def test_a_hard_link_to_another_file_is_refused(tmp_path, victim, capsys):
    linked = tmp_path / "virtdriver.log"
    os.link(victim, linked)

    err = refused(capsys, ["report", *FAKE, "--log-file", str(linked)])

    assert "has 2 hard links" in err
    assert victim.read_text() == SECRET


@pytest.mark.parametrize("kind", KINDS)
def test_a_new_log_file_is_0600_under_umask_000(kind, tmp_path, capsys):
    path = tmp_path / "sticky" / "virtdriver.log"
    path.parent.mkdir(mode=0o1777)
    path.parent.chmod(0o1777)
    argv = ["report", *FAKE, *how(kind, tmp_path, path)]  # conf: 0644
    with umask(0):
        assert main(argv) == 0
    assert stat.S_IMODE(os.lstat(path).st_mode) == 0o600
    assert "report: logging to" in path.read_text()


def test_an_old_log_file_others_may_write_loses_those_bits(tmp_path):
    path = tmp_path / "virtdriver.log"
    path.write_text("old\n")
    path.chmod(0o666)
    assert main(["report", *FAKE, "--log-file", str(path)]) == 0
    assert stat.S_IMODE(os.lstat(path).st_mode) == 0o644
    assert path.read_text().startswith("old\n")


def test_a_reopen_after_rotation_does_not_follow_a_planted_link(
        tmp_path, victim):
    """logrotate moved the file away; a link now has its name: the
    handler's reopen refuses it instead of appending to the target."""
    path = tmp_path / "virtdriver.log"
    identity = checked_log_file(str(path))
    handler = logging.handlers.WatchedFileHandler(str(path))
    failures = []
    handler.handleError = lambda record: failures.append(
        __import__("sys").exc_info()[1])
    try:
        guard(handler, identity)
        handler.emit(logging.makeLogRecord({"msg": "before"}))
        os.rename(path, tmp_path / "virtdriver.log.1")
        path.symlink_to(victim)
        handler.emit(logging.makeLogRecord({"msg": "after"}))
    finally:
        handler.close()
    assert victim.read_text() == SECRET
    assert [type(f) for f in failures] == [UnsafeLogFile]
    assert (tmp_path / "virtdriver.log.1").read_text() == "before\n"
