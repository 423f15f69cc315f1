"""Choosing virtdriver's state directory: option, environment, defaults."""

from __future__ import annotations

import os
import pathlib

import pytest

from virtdriver import state_dir as state_dir_module
from virtdriver.drivers.libvirt import connection
from virtdriver.state_dir import StateDirError, state_dir


@pytest.fixture
def no_env(monkeypatch):
    monkeypatch.delenv("VIRTDRIVER_STATE_DIR", raising=False)


def test_the_option_wins_over_the_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("VIRTDRIVER_STATE_DIR", str(tmp_path / "env"))

    chosen = state_dir(tmp_path / "option" / "deeper")

    assert chosen == tmp_path / "option" / "deeper"
    assert chosen.is_dir()
    assert not (tmp_path / "env").exists()


def test_the_option_may_be_a_string(tmp_path):
    assert state_dir(str(tmp_path / "s")) == tmp_path / "s"


@pytest.mark.parametrize("unset", [None, ""])
def test_an_unset_option_falls_back_to_the_environment(tmp_path, monkeypatch,
                                                       unset):
    monkeypatch.setenv("VIRTDRIVER_STATE_DIR", str(tmp_path / "env"))

    assert state_dir(unset) == tmp_path / "env"


def test_an_empty_environment_variable_counts_as_unset(tmp_path, monkeypatch):
    monkeypatch.setenv("VIRTDRIVER_STATE_DIR", "")
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))

    assert state_dir() == tmp_path / "home" / ".local" / "state" / "virtdriver"


def test_root_gets_var_lib(tmp_path, monkeypatch, no_env):
    assert state_dir_module.ROOT_DEFAULT == pathlib.Path("/var/lib/virtdriver")
    monkeypatch.setattr(state_dir_module, "ROOT_DEFAULT", tmp_path / "var")
    monkeypatch.setattr(os, "geteuid", lambda: 0)

    assert state_dir() == tmp_path / "var"


def test_other_users_get_their_home(tmp_path, monkeypatch, no_env):
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))

    chosen = state_dir()

    assert chosen == tmp_path / "home" / ".local" / "state" / "virtdriver"
    assert chosen.is_dir()


def test_relative_paths_become_absolute(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("VIRTDRIVER_STATE_DIR", "rel/state")

    assert state_dir() == tmp_path / "rel" / "state"
    assert state_dir("opt") == tmp_path / "opt"


def test_an_environment_file_is_refused_saying_where_it_came_from(
        tmp_path, monkeypatch):
    plain = tmp_path / "plain"
    plain.write_text("not a directory")
    monkeypatch.setenv("VIRTDRIVER_STATE_DIR", str(plain))

    with pytest.raises(StateDirError) as caught:
        state_dir()

    message = str(caught.value)
    assert isinstance(caught.value, ValueError)
    assert caught.value.path == plain
    assert message.startswith(
        f"the state directory {plain} (from $VIRTDRIVER_STATE_DIR) exists "
        "and is not a directory; ")
    assert "point $VIRTDRIVER_STATE_DIR at a directory" in message
    assert "\n" not in message
    assert plain.read_text() == "not a directory"


def test_an_option_file_is_refused_naming_the_option(tmp_path, monkeypatch):
    plain = tmp_path / "plain"
    plain.write_text("")
    monkeypatch.setenv("VIRTDRIVER_STATE_DIR", str(tmp_path / "fine"))

    with pytest.raises(StateDirError) as caught:
        state_dir(plain)

    assert caught.value.source == "from [virtdriver] state_dir"
    assert str(caught.value).startswith(
        f"the state directory {plain} (from [virtdriver] state_dir) exists "
        "and is not a directory; set [virtdriver] state_dir to a directory")


def test_a_default_file_is_refused_saying_what_to_set(tmp_path, monkeypatch,
                                                      no_env):
    plain = tmp_path / "var"
    plain.write_text("")
    monkeypatch.setattr(state_dir_module, "ROOT_DEFAULT", plain)
    monkeypatch.setattr(os, "geteuid", lambda: 0)

    with pytest.raises(StateDirError) as caught:
        state_dir()

    assert f"{plain} (the default for root)" in str(caught.value)
    assert "set [virtdriver] state_dir or $VIRTDRIVER_STATE_DIR" in str(
        caught.value)


def test_a_path_through_a_file_cannot_be_created(tmp_path, monkeypatch):
    plain = tmp_path / "plain"
    plain.write_text("")
    monkeypatch.setenv("VIRTDRIVER_STATE_DIR", str(plain / "below"))

    with pytest.raises(StateDirError) as caught:
        state_dir()

    assert str(caught.value).startswith(
        f"cannot create the state directory {plain / 'below'} (from "
        "$VIRTDRIVER_STATE_DIR): Not a directory; ")


def test_the_connection_module_re_exports_it():
    assert connection.state_dir is state_dir
    assert connection.StateDirError is StateDirError
