"""Configuration another user could write is refused (issue 26):
``--config-file``, the files of ``--config-dir``, the default file and the
file ``[DEFAULT] log_config_append`` names (Python's logging config, which
can run code) — when the file, a link to it or the directory holding it
belongs to another user or group or others may write it.  One line naming
the file and its mode, exit 2; nothing of it is applied."""

from __future__ import annotations

import os

import pytest

from virtdriver.cli import main

FAKE = ["--driver", "fake", "--host-spec", "small"]
NOBODY = 65534
as_root = pytest.mark.skipif(os.geteuid() != 0, reason="chown needs root")
#: A setting whose effect shows: every CPU of the small host dedicated.
SETTING = "[compute]\ncpu_dedicated_set = 0-3\n"
APPLIED = "PCPU 4"
#: A logging configuration that runs code when loaded.
HOSTILE_LOGGING = """[loggers]
keys=root
[handlers]
keys=h
[formatters]
keys=
[logger_root]
handlers=h
[handler_h]
class=StreamHandler
args=(__import__('pathlib').Path({marker!r}).write_text('ran'),)
"""


@pytest.fixture(autouse=True)
def state(tmp_path, monkeypatch):
    monkeypatch.setenv("VIRTDRIVER_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("VIRTDRIVER_CONFIG_DIRS", "")


def conf_file(directory, text=SETTING, mode=0o644, name="virtdriver.conf"):
    directory.mkdir(exist_ok=True)
    path = directory / name
    path.write_text(text)
    path.chmod(mode)
    return path


def refused(capsys, *argv) -> str:
    assert main(["report", *FAKE, *argv]) == 2
    captured = capsys.readouterr()
    assert APPLIED not in captured.out
    err = captured.err
    assert len(err.splitlines()) == 1, err
    assert err.startswith("virtdriver: ") and "Traceback" not in err
    return err


def applied(capsys, *argv) -> None:
    assert main(["report", *FAKE, *argv]) == 0, capsys.readouterr().err
    assert APPLIED in capsys.readouterr().out


@pytest.mark.parametrize("mode", [0o666, 0o646, 0o664], ids=oct)
def test_a_config_file_others_may_write_is_refused(tmp_path, capsys, mode):
    path = conf_file(tmp_path / "etc", mode=mode)
    err = refused(capsys, "--config-file", str(path))
    assert (f"config file {path} is writable by other users "
            f"(mode {mode:04o})") in err
    assert f"chmod go-w {path}" in err


@as_root
def test_a_config_file_of_another_user_is_refused(tmp_path, capsys):
    path = conf_file(tmp_path / "etc")
    os.chown(path, NOBODY, NOBODY)
    err = refused(capsys, "--config-file", str(path))
    assert (f"config file {path} belongs to another user (uid 65534, "
            "mode 0644)") in err


def test_a_config_file_in_a_directory_others_may_write_is_refused(
        tmp_path, capsys):
    path = conf_file(tmp_path / "open")
    path.parent.chmod(0o777)
    err = refused(capsys, "--config-file", str(path))
    assert (f"config file {path} is in {path.parent}, which is writable by "
            "other users (mode 0777)") in err


@as_root
def test_a_config_file_in_a_directory_of_another_user_is_refused(
        tmp_path, capsys):
    path = conf_file(tmp_path / "theirs")
    os.chown(path.parent, NOBODY, NOBODY)
    err = refused(capsys, "--config-file", str(path))
    assert f"is in {path.parent}, which belongs to another user" in err


def test_our_file_in_a_sticky_directory_is_read(tmp_path, capsys):
    """/tmp-like: others may write the directory but cannot replace a
    file that is not theirs."""
    path = conf_file(tmp_path / "sticky")
    path.parent.chmod(0o1777)
    applied(capsys, "--config-file", str(path))


@as_root
def test_a_link_of_another_user_is_refused(tmp_path, capsys):
    real = conf_file(tmp_path / "etc")
    sticky = tmp_path / "sticky"
    sticky.mkdir()
    sticky.chmod(0o1777)
    link = sticky / "virtdriver.conf"
    link.symlink_to(real)
    os.lchown(link, NOBODY, NOBODY)
    err = refused(capsys, "--config-file", str(link))
    assert f"config file {link} (a symbolic link) belongs to another user" \
        in err


@as_root
def test_our_link_to_a_file_of_another_user_is_refused(tmp_path, capsys):
    real = conf_file(tmp_path / "theirs")
    os.chown(real, NOBODY, NOBODY)
    link = tmp_path / "virtdriver.conf"
    link.symlink_to(real)
    err = refused(capsys, "--config-file", str(link))
    assert f"config file {link} (a link to {real}) belongs to another " \
        "user (uid 65534, mode 0644)" in err


def test_a_config_dir_others_may_write_is_refused_once(tmp_path, capsys):
    path = conf_file(tmp_path / "conf.d", name="10-host.conf")
    path.parent.chmod(0o777)
    err = refused(capsys, "--config-dir", str(path.parent))
    assert (f"config directory {path.parent} is writable by other users "
            "(mode 0777), who could add files to it") in err


def test_a_file_of_a_config_dir_others_may_write_is_refused(tmp_path,
                                                            capsys):
    path = conf_file(tmp_path / "conf.d", name="10-host.conf", mode=0o666)
    err = refused(capsys, "--config-dir", str(path.parent))
    assert f"config file {path} is writable by other users (mode 0666)" \
        in err


def test_the_default_file_others_may_write_is_refused(tmp_path, capsys,
                                                      monkeypatch):
    path = conf_file(tmp_path / "etc", mode=0o666)
    monkeypatch.setenv("VIRTDRIVER_CONFIG_DIRS", str(path.parent))
    err = refused(capsys)
    assert f"config file {path} is writable by other users" in err


def test_a_missing_default_file_is_fine_and_a_private_one_read(
        tmp_path, capsys, monkeypatch):
    empty = tmp_path / "nothing-here"
    empty.mkdir()
    monkeypatch.setenv("VIRTDRIVER_CONFIG_DIRS", str(empty))
    assert main(["report", *FAKE]) == 0
    capsys.readouterr()
    path = conf_file(tmp_path / "etc")
    monkeypatch.setenv("VIRTDRIVER_CONFIG_DIRS", str(path.parent))
    applied(capsys)


@pytest.mark.parametrize("where", ["file", "directory"])
def test_a_log_config_append_others_may_write_is_refused_unrun(
        tmp_path, capsys, where):
    marker = tmp_path / "ran"
    logging_conf = conf_file(tmp_path / "logging",
                             HOSTILE_LOGGING.format(marker=str(marker)),
                             name="logging.conf")
    if where == "file":
        logging_conf.chmod(0o666)
    else:
        logging_conf.parent.chmod(0o777)
    path = conf_file(tmp_path / "etc",
                     f"[DEFAULT]\nlog_config_append = {logging_conf}\n")

    err = refused(capsys, "--config-file", str(path))

    assert not marker.exists()
    assert f"[DEFAULT] log_config_append {logging_conf}" in err
    assert "(mode 0666)" in err if where == "file" else "(mode 0777)" in err


def test_a_private_log_config_append_is_used(tmp_path, capsys):
    marker = tmp_path / "ran"
    logging_conf = conf_file(tmp_path / "logging",
                             HOSTILE_LOGGING.format(marker=str(marker)),
                             name="logging.conf")
    path = conf_file(tmp_path / "etc",
                     f"[DEFAULT]\nlog_config_append = {logging_conf}\n")
    assert main(["report", *FAKE, "--config-file", str(path)]) == 0
    assert marker.read_text() == "ran"    # it is code: only ours runs
