"""docs/provider-config.md tells the truth: its worked example plans as it
says, its provenance table has the lines the code records, its record
example and error messages are the code's."""

from __future__ import annotations

import json
import pathlib
import re

import os_traits
import pytest

from virtdriver.provider_config import (
    AppliedRecord, ProviderConfigError, apply_plan, load_directory, plan)
from virtdriver.resource_tracker.provider_tree import ProviderTree

DOC = pathlib.Path(__file__).parents[2] / "docs" / "provider-config.md"
SHOWN_DIR = "/etc/virtdriver/provider_config"
TEXT = DOC.read_text()


def blocks(kind):
    return re.findall(rf"```{kind}\n(.*?)```", TEXT, re.S)


EXAMPLE = blocks("yaml")[0]


def host():
    tree = ProviderTree()
    tree.new_root("cmp1")
    tree.update_traits("cmp1", [os_traits.COMPUTE_NODE])
    tree.new_child("cmp1_NUMA0", "cmp1")
    tree.new_child("cmp1_NUMA1", "cmp1")
    return tree


def run(tmp_path, text, tree, record):
    (tmp_path / "site.yaml").write_text(text)
    done = plan(load_directory(tmp_path), tree.snapshot(), record)
    apply_plan(tree, done)
    return done


def test_worked_example_plans_and_deletes_as_the_doc_says(tmp_path):
    tree = host()
    first = run(tmp_path, EXAMPLE, tree, AppliedRecord())
    shown_first, shown_delete = blocks("text")[:2]
    assert first.describe() == shown_first.splitlines()
    assert tree.record("cmp1_NUMA1").traits == frozenset()

    rows = re.findall(r"^\| `(\S+)` \| (trait|inventory) `(\w+)`.*"
                      r"\| `site\.yaml:(\d+)` \|$", TEXT, re.M)
    assert len(rows) == 4
    for provider, kind, name, line in rows:
        uuid = tree.record(provider).uuid
        applied = getattr(first.record.provider(uuid),
                          "traits" if kind == "trait" else "inventories")
        assert applied[name].line == int(line)
        assert applied[name].path == str(tmp_path / "site.yaml")

    edited = EXAMPLE.replace("        - CUSTOM_POWER_CAPPED\n", "")
    assert edited != EXAMPLE
    second = run(tmp_path, edited, tree, first.record)
    assert second.describe() == shown_delete.splitlines()


def test_record_example_is_what_the_code_writes(tmp_path):
    tree = host()
    done = run(tmp_path, EXAMPLE, tree, AppliedRecord())
    shown = json.loads(blocks("json")[0])
    written = done.record.to_json()
    assert (shown["format"], shown["version"]) == (written["format"],
                                                   written["version"])
    entry = shown["providers"]["<cmp1 uuid>"]["traits"]["CUSTOM_RACK_7"]
    entry["file"] = entry["file"].replace(SHOWN_DIR, str(tmp_path))
    cmp1 = written["providers"][tree.record("cmp1").uuid]
    assert cmp1["traits"]["CUSTOM_RACK_7"] == entry


@pytest.mark.parametrize("index,old,new", [
    (0, "- CUSTOM_RACK_7", f"- {os_traits.HW_CPU_X86_AVX2}"),
    (1, "total: 2", "total: 0"),
])
def test_error_examples_are_the_codes_messages(tmp_path, index, old, new):
    shown = blocks("text")[2].splitlines()[index]
    assert old in EXAMPLE
    (tmp_path / "site.yaml").write_text(EXAMPLE.replace(old, new))
    with pytest.raises(ProviderConfigError) as info:
        load_directory(tmp_path)
    assert str(info.value).replace(str(tmp_path), SHOWN_DIR) == shown


def test_the_missing_directory_warning_is_the_codes(tmp_path):
    shown = blocks("log")[0].splitlines()[0]
    missing = tmp_path / "provider_confg"
    [warning] = load_directory(missing).warnings
    assert f"provider config: {warning}".replace(
        str(missing), "/etc/virtdriver/provider_confg") == shown
