"""The state directory's marking aggregate: made once, kept, replaced
(with a warning) when its file is damaged."""

from __future__ import annotations

import logging
import uuid as uuidlib

from virtdriver.placement.marker import FILE_NAME, agent_aggregate


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
    assert "is not one uuid" in caplog.text
