"""The applied record file: round trip, header, atomic save, change
detection, and every hostile content refused with the file and the way
out."""

from __future__ import annotations

import json

import os_resource_classes as orc
import os_traits
import pytest

from virtdriver.provider_config import (
    Applied, AppliedRecord, ProviderRecord, RecordError, RecordFile,
    record_path)
from virtdriver.provider_config.record import FORMAT
from virtdriver.providers.inventory import Inventory

UUID = "c0000000-0000-4000-8000-000000000001"
OTHER = "c0000000-0000-4000-8000-000000000002"


def sample():
    return AppliedRecord({
        UUID: ProviderRecord(
            {"CUSTOM_A": Applied("/etc/pc/a.yaml", 8, 0, True),
             "CUSTOM_B": Applied("/etc/pc/b.yaml", 3, 2, False)},
            {"CUSTOM_X": Applied("/etc/pc/a.yaml", 12, 0, True,
                                 Inventory(4, reserved=1))}),
        OTHER: ProviderRecord({"CUSTOM_C": Applied("/etc/pc/a.yaml", 20, 1,
                                                   True)})})


def test_round_trip_through_the_file(tmp_path):
    path = record_path(tmp_path / "state", "fake")
    assert path == tmp_path / "state" / "provider-config-fake.json"
    sample().save(path)
    assert AppliedRecord.load(path) == sample()
    document = json.loads(path.read_text())
    assert document["format"] == FORMAT and document["version"] == 1
    assert document["providers"][UUID]["inventories"]["CUSTOM_X"] == {
        "file": "/etc/pc/a.yaml", "line": 12, "entry": 0, "added": True,
        "applied": {"total": 4, "reserved": 1, "min_unit": 1,
                    "max_unit": 2**31 - 1, "step_size": 1,
                    "allocation_ratio": 1.0}}
    assert "inventories" not in document["providers"][OTHER]
    assert [p.name for p in path.parent.iterdir()] == [path.name]


def test_missing_file_is_empty_and_empty_providers_are_dropped(tmp_path):
    assert len(AppliedRecord.load(tmp_path / "none.json")) == 0
    record = sample().updated({OTHER: ProviderRecord()})
    assert set(record) == {UUID}
    assert set(sample().without([UUID])) == {OTHER}
    assert sample().provider("nope") == ProviderRecord()


def test_trait_source_is_the_provenance(tmp_path):
    applied = sample().trait_source(UUID, "CUSTOM_B")
    assert str(applied.source) == "/etc/pc/b.yaml:3 (providers[2])"
    assert sample().trait_source(OTHER, "CUSTOM_A") is None


def test_record_file_rereads_only_after_a_change(tmp_path):
    file = RecordFile(tmp_path, "fake")
    assert len(file.read()) == 0
    file.save(sample())
    assert file.read() is file.record
    other = RecordFile(tmp_path, "fake")   # another process
    assert other.read() == sample()
    other.save(sample().without([OTHER]))
    assert set(file.read()) == {UUID}
    with pytest.raises(ValueError, match="cannot name a ledger file"):
        RecordFile(tmp_path, "../x")


def document(providers):
    return json.dumps({"format": FORMAT, "version": 1,
                       "providers": providers})


GOOD = {"file": "/a.yaml", "line": 3, "entry": 0, "added": True}


@pytest.mark.parametrize("text,problem", [
    ("{not json", "not valid JSON (line 1"),
    ("[" * 100000, "nested too deeply"),
    ('{"providers": {}}', "not a provider config record"),
    (json.dumps({"format": FORMAT, "version": 2, "providers": {}}),
     "version 2 is not 1"),
    (json.dumps({"format": FORMAT, "version": 1, "providers": {},
                 "extra": 1}), "unknown field 'extra'"),
    (document([]), "providers: is not a JSON object"),
    (document({"cn1": {}}), "providers.cn1: is not a lower-case dashed"),
    (document({UUID.upper(): {}}), "is not a lower-case dashed"),
    (document({UUID: []}), f"providers.{UUID}: is not a JSON object"),
    (document({UUID: {"aggregates": {}}}), "unknown field 'aggregates'"),
    (document({UUID: {"traits": {os_traits.COMPUTE_NODE: GOOD}}}),
     f"providers.{UUID}.traits.{os_traits.COMPUTE_NODE}: is not a CUSTOM_ "
     "name"),
    (document({UUID: {"traits": {"CUSTOM_lower": GOOD}}}),
     "is not a CUSTOM_ name"),
    (document({UUID: {"inventories": {orc.VCPU: GOOD}}}),
     f"inventories.{orc.VCPU}: is not a CUSTOM_ name"),
    (document({UUID: {"traits": {"CUSTOM_A": "yes"}}}),
     "traits.CUSTOM_A: is not a JSON object"),
    (document({UUID: {"traits": {"CUSTOM_A": {**GOOD, "line": 0}}}}),
     "traits.CUSTOM_A.line: is not an integer >= 1"),
    (document({UUID: {"traits": {"CUSTOM_A": {**GOOD, "entry": True}}}}),
     "traits.CUSTOM_A.entry: is not an integer >= 0"),
    (document({UUID: {"traits": {"CUSTOM_A": {**GOOD, "file": ""}}}}),
     "traits.CUSTOM_A.file: is not a file name"),
    (document({UUID: {"traits": {"CUSTOM_A": {**GOOD, "added": 1}}}}),
     "traits.CUSTOM_A.added: is not true or false"),
    (document({UUID: {"traits": {"CUSTOM_A": {**GOOD, "applied": {}}}}}),
     "unknown field 'applied'"),
    (document({UUID: {"inventories": {"CUSTOM_X": GOOD}}}),
     "inventories.CUSTOM_X.applied: is a NoneType, not a mapping"),
    (document({UUID: {"inventories": {"CUSTOM_X": {
        **GOOD, "applied": {"total": 0}}}}}),
     "inventories.CUSTOM_X.applied: 0 is not an integer from 1"),
    ("\udcff", "not UTF-8 text"),
])
def test_hostile_record_is_refused_naming_file_and_way_out(tmp_path, text,
                                                           problem):
    path = record_path(tmp_path, "fake")
    path.write_bytes(text.encode("utf-8", "surrogateescape"))
    with pytest.raises(RecordError) as info:
        AppliedRecord.load(path)
    message = str(info.value)
    assert message.startswith(f"provider config record {path}: ")
    assert problem in message, message
    assert f"; delete {path}: the next update records again" in message
    assert info.value.path == path
    with pytest.raises(RecordError):
        RecordFile(tmp_path, "fake").read()


def test_unwritable_state_directory_leaves_the_old_record(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(RecordError, match="cannot write it .* the old "
                       "record is unchanged"):
        sample().save(blocker / "provider-config-fake.json")
