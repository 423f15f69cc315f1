"""A driver that declares no ownership owns the traits it set itself,
proved by the ledger's keyed proofs (issue 30)."""

from __future__ import annotations

import json

from virtdriver.resource_tracker.ledger import LedgerFile
from virtdriver.resource_tracker.reconcile import settle_self_set

UUID = "9d8d1b52-3a5f-4e36-bf4e-6f0a3a7c2e10"


def test_it_keeps_what_it_adds_and_may_remove_only_that():
    done = settle_self_set({"A", "OPERATOR"}, {"B"}, ledger={"A"})
    assert done.traits == {"B", "OPERATOR"}
    assert done.restored == {"OPERATOR"}
    assert done.stale == {"A"}
    assert done.ledger == {"B"}


def test_nothing_proven_removes_nothing():
    done = settle_self_set({"A", "OPERATOR"}, set(), ledger=None)
    assert done.traits == {"A", "OPERATOR"}
    assert done.ledger == frozenset() and done.stale == frozenset()


def test_a_trait_someone_else_set_and_it_also_sets_stays_someone_elses():
    done = settle_self_set({"SHARED"}, {"SHARED"}, ledger=set())
    assert done.ledger == frozenset()
    assert settle_self_set({"SHARED"}, set(), ledger=done.ledger
                           ).traits == {"SHARED"}


def test_its_trait_removed_by_others_is_drift():
    done = settle_self_set(set(), {"A"}, ledger={"A"})
    assert done.removed_by_others == {"A"}
    assert done.ledger == {"A"}


def ledger_file(tmp_path):
    found = LedgerFile(tmp_path, "nova")
    found.read()
    return found


def test_entries_the_tracker_wrote_are_proven_and_edits_are_not(tmp_path):
    first = ledger_file(tmp_path)
    first.save(first.ledger.updated({UUID: frozenset({"A"}),
                                     "other": frozenset({"B"})}))
    assert ledger_file(tmp_path).ledger.proven(UUID) == {"A"}
    document = json.loads(first.path.read_text())
    document["providers"][UUID].append("CUSTOM_RACK_7")
    first.path.write_text(json.dumps(document))
    edited = ledger_file(tmp_path).ledger
    assert edited.proven(UUID) is None          # edited: proves nothing
    assert edited.proven("other") == {"B"}      # the rest still does
    assert UUID in edited                       # still read, as before


def test_an_unproven_entry_carried_over_stays_unproven(tmp_path):
    first = ledger_file(tmp_path)
    first.save(first.ledger.updated({UUID: frozenset({"A"})}))
    document = json.loads(first.path.read_text())
    document["providers"][UUID] = ["A", "FORGED"]
    first.path.write_text(json.dumps(document))
    again = ledger_file(tmp_path)
    again.save(again.ledger.updated({"new": frozenset({"C"})}))
    later = ledger_file(tmp_path).ledger
    assert later.proven(UUID) is None and later.proven("new") == {"C"}


def test_a_lost_key_proves_nothing(tmp_path):
    first = ledger_file(tmp_path)
    first.save(first.ledger.updated({UUID: frozenset({"A"})}))
    (tmp_path / "ledger.key").unlink()
    assert ledger_file(tmp_path).ledger.proven(UUID) is None
    assert oct((tmp_path / "ledger.key").stat().st_mode & 0o777) == "0o600"
