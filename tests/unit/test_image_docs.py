"""docs/claims.md's image traits table and rebuild example say what the
code does."""

from __future__ import annotations

import pathlib
import re

import os_traits

from tests.unit.test_claims_rebuild import (
    instance, providers_from_tree_json, tree_document)
from virtdriver.claims import image_traits as it
from virtdriver.claims.image_traits import image_traits
from virtdriver.claims.rebuild import rebuild_conflicts

DOC = (pathlib.Path(__file__).parents[2] / "docs" / "claims.md").read_text()
FLAT = " ".join(DOC.split())
EXAMPLE = re.compile(r"`([a-z_:A-Z0-9]+)=([^`]+)`")
TRAIT = re.compile(r"`((?:COMPUTE|HW|CUSTOM)_[A-Z0-9_]+)`")


def table_rows() -> list[list[str]]:
    start = DOC.index("| property | traits | example | Nova |")
    rows = []
    for line in DOC[start:].splitlines()[2:]:
        if not line.startswith("|"):
            break
        rows.append([cell.strip() for cell in line.strip("|").split("|")])
    return rows


def test_every_property_the_code_reads_has_a_row():
    keys = {re.match(r"`([^`]+)`", row[0]).group(1) for row in table_rows()}
    assert keys == set(it.KEYS) | {"trait:<NAME>"}


def test_each_row_s_example_is_what_the_code_gives():
    for prop, _, example, _ in table_rows():
        key, value = EXAMPLE.search(example).groups()
        arrow = example.split("→")[1].split("(")[0]
        names = set(TRAIT.findall(arrow))
        extra = {}
        if key == "hw_mem_encryption_model":
            extra = {"hw_mem_encryption": "true"}
        if key == "hw_tpm_model":
            extra = {"hw_tpm_version": "2.0"}
        found = (image_traits(extra, value) if key == "disk_format"
                 else image_traits({key: value, **extra}))
        assert found.problems == (), (prop, found.problems)
        asked = found.forbidden if "forbids" in example else found.required
        if extra:       # the companion property adds its own traits
            assert names <= asked, (prop, asked)
        else:
            assert asked == names, (prop, asked)


def test_the_refusal_example_is_the_code_s():
    (message,) = [p.message for p in
                  image_traits({"hw_disk_bus": "scsii"}).problems]
    assert message in FLAT


def test_the_rebuild_example_is_the_code_s():
    providers = providers_from_tree_json(tree_document())
    (conflict,) = rebuild_conflicts(instance(), {"hw_disk_bus": "ide"},
                                    providers)
    message = conflict.message
    for uuid in providers:      # the doc elides uuids
        message = message.replace(f"({uuid})", "(…)")
    assert message in FLAT
    assert os_traits.COMPUTE_STORAGE_BUS_IDE in message
