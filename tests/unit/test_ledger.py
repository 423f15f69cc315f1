"""The trait ledger file: format, atomic save, clear errors."""

from __future__ import annotations

import json
import os

import pytest

from virtdriver.resource_tracker.ledger import (
    FORMAT, Ledger, LedgerError, ledger_path)

UUID = "c0000000-0000-4000-8000-000000000001"


def test_missing_file_is_empty(tmp_path):
    assert len(Ledger.load(tmp_path / "none.json")) == 0


def test_round_trip_and_header(tmp_path):
    path = tmp_path / "sub" / "ledger-fake.json"
    Ledger({UUID: ["COMPUTE_NODE", "HW_ARCH_X86_64"]}).save(path)
    document = json.loads(path.read_text())
    assert document["format"] == FORMAT and document["version"] == 1
    assert Ledger.load(path) == {UUID: {"COMPUTE_NODE", "HW_ARCH_X86_64"}}
    assert [p.name for p in path.parent.iterdir()] == [path.name]


def test_updated_returns_new_ledger():
    old = Ledger({UUID: ["COMPUTE_NODE"]})
    new = old.updated({UUID: None, "x": frozenset({"A"})})
    assert old == {UUID: {"COMPUTE_NODE"}}
    assert new == {"x": {"A"}} and new.traits(UUID) == frozenset()


@pytest.mark.parametrize("text,problem", [
    ("{not json", "not valid JSON"),
    ('{"providers": {}}', "not a trait ledger"),
    (json.dumps({"format": FORMAT, "version": 9, "providers": {}}),
     "version 9"),
    (json.dumps({"format": FORMAT, "version": 1, "providers": []}),
     '"providers" is not an object'),
    (json.dumps({"format": FORMAT, "version": 1,
                 "providers": {UUID: "COMPUTE_NODE"}}),
     f"providers.{UUID} is not a list"),
    ("\udcff", "not UTF-8 text"),
])
def test_corrupt_file_names_file_problem_and_recovery(tmp_path, text,
                                                      problem):
    path = tmp_path / "ledger-fake.json"
    path.write_bytes(text.encode("utf-8", "surrogateescape"))
    with pytest.raises(LedgerError) as info:
        Ledger.load(path)
    message = str(info.value)
    assert str(path) in message and problem in message
    assert f"delete {path}; the next update rebuilds it" in message
    assert info.value.path == path


def test_unreadable_path_says_to_fix_access(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(LedgerError, match="cannot read it.*make it and its "
                                          "directory readable"):
        Ledger.load(blocker / "ledger-fake.json")


def test_failed_save_keeps_old_file_and_leaves_no_temp(tmp_path,
                                                       monkeypatch):
    path = tmp_path / "ledger-fake.json"
    Ledger({UUID: ["COMPUTE_NODE"]}).save(path)

    def broken(*args):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", broken)
    with pytest.raises(LedgerError, match="No space left.*old ledger is "
                                          "unchanged"):
        Ledger({UUID: ["HW_ARCH_X86_64"]}).save(path)
    assert Ledger.load(path) == {UUID: {"COMPUTE_NODE"}}
    assert [p.name for p in tmp_path.iterdir()] == [path.name]


def test_ledger_path_refuses_names_that_are_not_file_names(tmp_path):
    assert ledger_path(tmp_path, "fake") == tmp_path / "ledger-fake.json"
    with pytest.raises(ValueError, match="cannot name a ledger file"):
        ledger_path(tmp_path, "../etc")
