"""Provider config files: schema 1.0, every refusal with file, entry and
line, hostile YAML, and the lines provenance records."""

from __future__ import annotations

import textwrap

import os_resource_classes as orc
import os_traits
import pytest

from virtdriver.provider_config import (
    EVERY_COMPUTE_NODE, ProviderConfigError, parse_file)
from virtdriver.providers.inventory import Inventory

UUID = "5213b75d-9260-42a6-b236-f39b0fd10561"

EXAMPLE = """\
meta:
  schema_version: '1.0'
providers:
  - identification:
      uuid: $COMPUTE_NODE
    traits:
      additional:
        - CUSTOM_RACK_7
        - CUSTOM_POWER_CAPPED
  - identification:
      name: cn1_NUMA0
    inventories:
      additional:
        - CUSTOM_FPGA:
            total: 4
            reserved: 1
            max_unit: 2
        - CUSTOM_PMEM_NS: {total: 8, allocation_ratio: 1.5}
  - identification: {uuid: 5213B75D-9260-42A6-B236-F39B0FD10561}
    traits: {additional: [CUSTOM_GOLD]}
"""


def write(tmp_path, text, name="a.yaml"):
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return path


def refused(tmp_path, text, name="a.yaml"):
    path = write(tmp_path, text, name)
    with pytest.raises(ProviderConfigError) as info:
        parse_file(path)
    assert info.value.path == str(path)
    return info.value


def test_example_parses_with_every_field_and_line(tmp_path):
    path = write(tmp_path, EXAMPLE)
    entries, warnings = parse_file(path)
    assert warnings == []
    default, numa, gold = entries
    assert default.identification.uuid == EVERY_COMPUTE_NODE
    assert default.identification.compute_node
    assert default.source.line == 4 and default.source.entry == 0
    assert {t: s.line for t, s in default.traits.items()} == {
        "CUSTOM_RACK_7": 8, "CUSTOM_POWER_CAPPED": 9}
    assert numa.identification.name == "cn1_NUMA0"
    assert numa.inventories == {
        "CUSTOM_FPGA": Inventory(4, reserved=1, max_unit=2),
        "CUSTOM_PMEM_NS": Inventory(8, allocation_ratio=1.5)}
    assert {rc: s.line for rc, s in numa.inventory_sources.items()} == {
        "CUSTOM_FPGA": 14, "CUSTOM_PMEM_NS": 18}
    assert {s.entry for s in numa.inventory_sources.values()} == {1}
    # Upper-case uuids are read as the tree writes them.
    assert gold.identification.uuid == UUID
    assert gold.traits["CUSTOM_GOLD"].line == 20
    assert str(gold.traits["CUSTOM_GOLD"]) == f"{path}:20 (providers[2])"


def test_yml_files_and_yaml_merge_keys_are_read(tmp_path):
    path = write(tmp_path, """\
        meta: {schema_version: '1.0'}
        providers:
          - identification: {name: a}
            inventories:
              additional:
                - CUSTOM_X: &record
                    total: 2
          - identification: {name: b}
            inventories:
              additional:
                - CUSTOM_X:
                    <<: *record
                    reserved: 1
        """, "b.yml")
    (a, b), _ = parse_file(path)
    assert a.inventories["CUSTOM_X"] == Inventory(2)
    assert b.inventories["CUSTOM_X"] == Inventory(2, reserved=1)
    assert b.inventory_sources["CUSTOM_X"].line == 11


def test_unknown_top_level_key_is_refused_at_its_line(tmp_path):
    error = refused(tmp_path, """\
        meta: {schema_version: '1.0'}
        common: &record
          total: 2
        """)
    assert error.line == 2 and "unknown field 'common'" in str(error)
    assert "schema 1.0 has only meta, providers here" in str(error)


def test_entry_without_traits_or_inventories_is_ignored_with_a_warning(
        tmp_path):
    path = write(tmp_path, """\
        meta: {schema_version: '1.0'}
        providers:
          - identification: {name: idle}
            traits: {additional: []}
          - identification: {name: busy}
            traits: {additional: [CUSTOM_A]}
        """)
    entries, warnings = parse_file(path)
    assert [e.identification.name for e in entries] == ["busy"]
    assert warnings == [f"{path}:3 (providers[0]): name 'idle' names no "
                        "traits and no inventories; ignored"]


@pytest.mark.parametrize("text", [
    "meta: {schema_version: '1.0'}\n",
    "meta: {schema_version: '1.0'}\nproviders:\n",
    "meta: {schema_version: '1.0'}\nproviders: []\n",
])
def test_no_providers_is_a_valid_empty_file(tmp_path, text):
    assert parse_file(write(tmp_path, text)) == ([], [])


def test_headings_left_after_deleting_every_item_mean_none(tmp_path):
    path = write(tmp_path, """\
        meta: {schema_version: '1.0'}
        providers:
          - identification: {name: a}
            traits:
              additional:
            inventories:
          - identification: {name: b}
            traits:
            inventories:
              additional:
                - CUSTOM_X: {total: 1}
        """)
    entries, warnings = parse_file(path)
    assert [e.identification.name for e in entries] == ["b"]
    assert "name 'a' names no traits and no inventories" in warnings[0]


def test_newer_minor_version_is_read_with_a_warning(tmp_path):
    path = write(tmp_path, """\
        meta: {schema_version: '1.3'}
        providers:
          - identification: {name: a}
            traits: {additional: [CUSTOM_A]}
        """)
    entries, warnings = parse_file(path)
    assert len(entries) == 1
    assert warnings == [f"{path}:1: schema version 1.3: this virtdriver "
                        "reads the fields of 1.0 (any other field is "
                        "refused)"]


_HEAD = "meta: {schema_version: '1.0'}\nproviders:\n"


@pytest.mark.parametrize("body,line,where,problem", [
    # the document and meta
    ("", 1, "", "the file is empty"),
    ("- a\n", 1, "the document", "must be a mapping of meta, providers"),
    ("providers: []\n", 1, "the document", "'meta' is missing"),
    ("meta: {schema_version: '1.0'}\nprovider: []\n", 2, "the document",
     "unknown field 'provider'"),
    ("meta: {schema_version: 1.0}\n", 1, "meta.schema_version",
     "is 1.0 (float), not a string"),
    ("meta: {schema_version: '2.0'}\n", 1, "meta.schema_version",
     "'2.0' is not a version this virtdriver reads"),
    ("meta: {version: '1.0'}\n", 1, "meta", "unknown field 'version'"),
    ("meta: {schema_version: '1.0'}\nproviders: {}\n", 2, "providers",
     "must be a list of provider entries, not {} (MarkedMap)"),
    # entries and identification
    (_HEAD + "  - traits: {additional: [CUSTOM_A]}\n", 3, "providers[0]",
     "'identification' is missing"),
    (_HEAD + "  - identification: {name: a}\n    trait: [CUSTOM_A]\n", 4,
     "providers[0]", "unknown field 'trait'"),
    (_HEAD + "  - identification: {}\n", 3, "providers[0].identification",
     "is empty"),
    (_HEAD + f"  - identification: {{name: a, uuid: {UUID}}}\n", 3,
     "providers[0].identification", "has both uuid and name"),
    (_HEAD + "  - identification: {hostname: a}\n", 3,
     "providers[0].identification", "unknown field 'hostname'"),
    (_HEAD + "  - identification: {uuid: not-a-uuid}\n", 3,
     "providers[0].identification.uuid",
     "'not-a-uuid' (str) is neither a dashed UUID nor $COMPUTE_NODE"),
    (_HEAD + "  - identification: {uuid: $compute_node}\n", 3,
     "providers[0].identification.uuid", "neither a dashed UUID"),
    (_HEAD + "  - identification: {name: ''}\n", 3,
     "providers[0].identification.name", "is not a provider name"),
    (_HEAD + f"  - identification: {{name: {'x' * 201}}}\n", 3,
     "providers[0].identification.name", "is not a provider name"),
    # traits
    (_HEAD + "  - identification: {name: a}\n    traits: [CUSTOM_A]\n", 4,
     "providers[0].traits", "must be a mapping of additional"),
    (_HEAD + "  - identification: {name: a}\n    traits:\n"
     "      additional: CUSTOM_A\n", 5, "providers[0].traits.additional",
     "must be a list of trait names"),
    (_HEAD + "  - identification: {name: a}\n    traits:\n      additional:"
     "\n        - CUSTOM_A\n        - yes\n", 7,
     "providers[0].traits.additional[1]", "True (bool) is not a trait name"),
    (_HEAD + "  - identification: {name: a}\n    traits:\n      additional:"
     f"\n        - {os_traits.HW_CPU_X86_AVX2}\n", 6,
     "providers[0].traits.additional[0]",
     f"'{os_traits.HW_CPU_X86_AVX2}' is not a CUSTOM_ trait"),
    (_HEAD + "  - identification: {name: a}\n    traits:\n      additional:"
     "\n        - CUSTOM_lower\n", 6, "providers[0].traits.additional[0]",
     "'CUSTOM_lower' is not a CUSTOM_ trait (custom names must match"),
    (_HEAD + "  - identification: {name: a}\n    traits:\n      additional:"
     "\n        - CUSTOM_A\n        - CUSTOM_A\n", 7,
     "providers[0].traits.additional[1]",
     "CUSTOM_A appears twice (first at line 6)"),
    # inventories
    (_HEAD + "  - identification: {name: a}\n    inventories:\n"
     "      additional: [CUSTOM_X]\n", 5,
     "providers[0].inventories.additional[0]", "is not a mapping"),
    (_HEAD + "  - identification: {name: a}\n    inventories:\n"
     f"      additional:\n        - {orc.VCPU}: {{total: 4}}\n", 6,
     "providers[0].inventories.additional[0]",
     f"'{orc.VCPU}' is not a CUSTOM_ resource class"),
    (_HEAD + "  - identification: {name: a}\n    inventories:\n"
     "      additional:\n        - CUSTOM_X: {total: 4}\n"
     "        - CUSTOM_X: {total: 2}\n", 7,
     "providers[0].inventories.additional[1]",
     "CUSTOM_X appears twice (first at line 6)"),
    (_HEAD + "  - identification: {name: a}\n    inventories:\n"
     "      additional:\n        - CUSTOM_X: 4\n", 6,
     "providers[0].inventories.additional[0].CUSTOM_X",
     "4 (int) is not an inventory record"),
    (_HEAD + "  - identification: {name: a}\n    inventories:\n"
     "      additional:\n        - CUSTOM_X: {reserved: 1}\n", 6,
     "providers[0].inventories.additional[0].CUSTOM_X.total", "is missing"),
    (_HEAD + "  - identification: {name: a}\n    inventories:\n"
     "      additional:\n        - CUSTOM_X:\n            total: 4\n"
     "            reserved: 5\n", 8,
     "providers[0].inventories.additional[0].CUSTOM_X.reserved",
     "5 is greater than total (4)"),
    (_HEAD + "  - identification: {name: a}\n    inventories:\n"
     "      additional:\n        - CUSTOM_X:\n            total: '4'\n", 7,
     "providers[0].inventories.additional[0].CUSTOM_X.total",
     "'4' is not an integer"),
    (_HEAD + "  - identification: {name: a}\n    inventories:\n"
     "      additional:\n        - CUSTOM_X:\n            total: 4\n"
     "            allocation_ratio: -1\n", 8,
     "providers[0].inventories.additional[0].CUSTOM_X.allocation_ratio",
     "makes the capacity (total - reserved) * ratio negative"),
    (_HEAD + "  - identification: {name: a}\n    inventories:\n"
     "      additional:\n        - CUSTOM_X:\n            total: 4\n"
     "            maximum: 2\n", 8,
     "providers[0].inventories.additional[0].CUSTOM_X.maximum",
     "is not an inventory field"),
    (_HEAD + "  - identification: {name: a}\n    inventories:\n"
     "      extra: []\n", 5, "providers[0].inventories",
     "unknown field 'extra'"),
])
def test_refusals_name_file_line_and_place(tmp_path, body, line, where,
                                           problem):
    error = refused(tmp_path, body)
    # The first problem found; a body may have more (a misspelt
    # schema_version is an unknown field and a missing one).
    message = str(error.errors[0])
    assert error.line == line and error.where == where
    prefix = f"{tmp_path / 'a.yaml'}:{line}:" + (f" {where}:" if where
                                                  else "")
    assert message.startswith(prefix), message
    assert problem in message
    assert "; " in message and "\n" not in message  # cause; what to do


def test_reserved_source_file_key_is_refused_like_any_unknown_field(
        tmp_path):
    # Nova reserves __source_file for itself; here it is just unknown.
    error = refused(tmp_path, _HEAD + "  - identification: {name: a}\n"
                    "    __source_file: x.yaml\n")
    assert "unknown field '__source_file'" in str(error)


@pytest.mark.parametrize("raw,problem", [
    (b"meta: {schema_version: '1.0'}\n# caf\xe9\n", "not UTF-8 text"),
    (b"meta: {schema_version: '1.0'}\nmeta: {}\n", "appears twice"),
    (b"meta: !!python/object:os.system {}\n", "not valid YAML"),
    (b"meta: [\n", "not valid YAML"),
    (b"meta: {schema_version: '1.0'}\n---\nmeta: {}\n", "not valid YAML"),
    (b"a: &a [x, x, x, x, x, x, x, x, x, x]\n"
     + b"".join(b"%c: &%c [*%c, *%c, *%c, *%c, *%c, *%c, *%c, *%c, *%c, "
                b"*%c]\n" % ((ord("b") + i, ord("b") + i) + (ord("a") + i,)
                             * 10) for i in range(8)),
     "holds more than 1000000 values"),
    (b"a: " + b"[" * 70 + b"]" * 70 + b"\n", "nested more than 64"),
])
def test_hostile_files_are_refused_with_one_line(tmp_path, raw, problem):
    path = tmp_path / "a.yaml"
    path.write_bytes(raw)
    with pytest.raises(ProviderConfigError) as info:
        parse_file(path)
    message = str(info.value)
    assert message.startswith(f"{path}: ") and problem in message
    assert "\n" not in message


def test_too_big_file_is_refused_before_parsing(tmp_path, monkeypatch):
    from virtdriver.drivers import data_files
    monkeypatch.setattr(data_files, "MAX_FILE_BYTES", 64)
    path = write(tmp_path, EXAMPLE)
    with pytest.raises(ProviderConfigError, match="larger than 64 bytes"):
        parse_file(path)


def test_a_directory_or_missing_file_is_refused(tmp_path):
    (tmp_path / "d.yaml").mkdir()
    with pytest.raises(ProviderConfigError, match="is a directory"):
        parse_file(tmp_path / "d.yaml")
    with pytest.raises(ProviderConfigError, match="cannot read"):
        parse_file(tmp_path / "none.yaml")
