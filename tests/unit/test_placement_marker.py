"""The state directory's marking aggregate: made once, kept, replaced
(with a warning) when its file is damaged."""

from __future__ import annotations

import logging
import subprocess
import uuid as uuidlib

import pytest

from virtdriver.placement.marker import FILE_NAME, agent_aggregate, read_marker


def test_made_once_and_kept(tmp_path):
    first = agent_aggregate(tmp_path)

    assert str(uuidlib.UUID(first)) == first
    assert (tmp_path / FILE_NAME).read_text() == first + "\n"
    assert agent_aggregate(tmp_path) == first


def test_two_state_directories_have_two(tmp_path):
    assert agent_aggregate(tmp_path / "a") != agent_aggregate(tmp_path / "b")


def test_a_damaged_file_is_replaced_with_a_warning(tmp_path, caplog):
    (tmp_path / FILE_NAME).write_text("not a uuid\n")

    with caplog.at_level(logging.WARNING, "virtdriver.placement.marker"):
        made = agent_aggregate(tmp_path)

    assert str(uuidlib.UUID(made)) == made
    assert agent_aggregate(tmp_path) == made
    assert "held no uuid" in caplog.text


def test_an_unsavable_file_gives_no_aggregate_and_says_why(tmp_path):
    path = tmp_path / FILE_NAME
    path.write_text("damaged\n")
    done = subprocess.run(["chattr", "+i", str(path)], capture_output=True)
    if done.returncode != 0:
        pytest.skip("no immutable flag on this filesystem")
    try:
        first, second = read_marker(tmp_path), read_marker(tmp_path)
        assert agent_aggregate(tmp_path) is None
    finally:
        subprocess.run(["chattr", "-i", str(path)], check=False)

    assert first.uuid is None and first.unmarked
    assert second == first   # nothing minted, nothing different
    assert first.problem.startswith(f"could not save the marking aggregate "
                                    f"in {path}")
