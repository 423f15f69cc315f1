"""Hostile or broken data files are refused in one line, never a traceback."""

import json
import os

import pytest

from virtdriver.drivers import data_files
from virtdriver.drivers.data_files import MAX_DEPTH, load_data_file
from virtdriver.drivers.fake_host import FakeHostError, load_spec
from virtdriver.drivers.ironic_inventory import InventoryError, load_inventory


class Refused(ValueError):
    pass


def load(path):
    return load_data_file(path, "test data", Refused)


def refused(path):
    with pytest.raises(Refused) as info:
        load(path)
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith(f"{path}: ")
    return message


def test_non_utf8_names_the_byte_offset_and_line(tmp_path):
    path = tmp_path / "host.yaml"
    path.write_bytes(b"cells: 1\nname: caf\xe9\n")
    message = refused(path)
    assert "not UTF-8 text: byte 0xe9 at offset 18 (line 2)" in message
    assert "save the test data as UTF-8" in message


def test_a_utf8_byte_order_mark_is_not_content(tmp_path):
    path = tmp_path / "host.json"
    path.write_bytes(b"\xef\xbb\xbf" + json.dumps({"cells": 1}).encode())
    assert load(path) == {"cells": 1}


def test_a_directory_is_named_as_one(tmp_path):
    message = refused(tmp_path)
    assert "is a directory, not a test data file" in message


def test_a_device_is_not_read(tmp_path):
    assert "is not a regular file" in refused(os.devnull)


def test_size_is_capped_before_parsing(tmp_path, monkeypatch):
    monkeypatch.setattr(data_files, "MAX_FILE_BYTES", 100)
    path = tmp_path / "big.json"
    path.write_text("[" + "0," * 60 + "0]")
    message = refused(path)
    assert "larger than 100 bytes" in message and "trim it" in message
    path.write_text("[0]")
    assert load(path) == [0]


def test_the_real_cap_is_16_mib():
    assert data_files.MAX_FILE_BYTES == 16 * 1024 * 1024


def billion_laughs():
    lines = ['a: &a ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", '
             '"lol"]']
    previous = "a"
    for name in "bcdefghi":
        lines.append(f"{name}: &{name} [" + ", ".join([f"*{previous}"] * 9)
                     + "]")
        previous = name
    return "\n".join(lines) + "\n"


def test_a_yaml_alias_bomb_is_refused(tmp_path):
    path = tmp_path / "bomb.yaml"
    path.write_text(billion_laughs())
    message = refused(path)      # 9**9 values: refused, never expanded
    assert f"more than {data_files.MAX_VALUES} values" in message
    assert "YAML alias" in message


def test_a_few_aliases_are_fine(tmp_path):
    path = tmp_path / "nodes.yaml"
    path.write_text("gold: &gold {cpus: 64}\n"
                    "nodes: [{properties: *gold}, {properties: *gold}]\n")
    data = load(path)
    assert data["nodes"][1]["properties"] == {"cpus": 64}


def test_a_recursive_alias_is_refused(tmp_path):
    path = tmp_path / "loop.yaml"
    path.write_text("a: &a [*a]\n")
    assert "refers to the value that holds it" in refused(path)


@pytest.mark.parametrize("name, depth", [
    ("deep.json", MAX_DEPTH + 1), ("deep.yaml", MAX_DEPTH + 1),
    ("deeper.json", 100_000), ("deeper.yaml", 100_000)])
def test_deep_nesting_is_refused(tmp_path, name, depth):
    path = tmp_path / name
    path.write_text("[" * depth + "]" * depth)
    message = refused(path)
    assert "nest" in message
    path.write_text("[" * MAX_DEPTH + "]" * MAX_DEPTH)
    assert load(path)


@pytest.mark.parametrize("name, text, where", [
    ("dup.yaml", "cells: 1\nname: a\ncells: 2\n",
     "line 3, column 1: key 'cells' appears twice (first at line 1"),
    ("dup.json", '{"cells": 1, "cells": 2}',
     "key 'cells' appears twice in one object"),
])
def test_repeated_keys_are_refused(tmp_path, name, text, where):
    path = tmp_path / name
    path.write_text(text)
    assert where in refused(path)


def test_yaml_merge_keys_may_override(tmp_path):
    path = tmp_path / "merge.yaml"
    path.write_text("base: &b {x: 1, y: 2}\nnode: {<<: *b, x: 3}\n")
    assert load(path)["node"] == {"x": 3, "y": 2}


def test_syntax_errors_are_one_line_with_the_position(tmp_path):
    path = tmp_path / "broken.yaml"
    path.write_text("cells: [\n")
    message = refused(path)
    assert "not valid YAML: line 2, column 1:" in message


def test_an_empty_description_says_so(tmp_path):
    path = tmp_path / "empty.yaml"
    path.write_text("")
    with pytest.raises(FakeHostError, match="not nothing .an empty document"):
        load_spec(str(path))


def test_loaders_raise_their_own_error_types(tmp_path):
    path = tmp_path / "x.yaml"
    path.write_bytes(b"\xff")
    with pytest.raises(FakeHostError, match="not UTF-8"):
        load_spec(str(path))
    with pytest.raises(InventoryError, match="not UTF-8"):
        load_inventory(path)


def test_unknown_fields_of_a_wrong_file_are_quoted_only_in_part(tmp_path):
    """A wrong path may point at a secret: the error quotes little of it."""
    secret = "root:$6$saltsalt$" + "h" * 80 + ":19000:0:99999:7:::"
    path = tmp_path / "shadow"
    path.write_text(secret + "\n" + "\n".join(
        f"user{i}:*:19000:0:99999:7:::" for i in range(9)) + "\n")
    with pytest.raises(FakeHostError) as info:
        load_spec(str(path))
    message = str(info.value)
    assert "h" * 20 not in message
    assert "(10 in all)" in message


def test_json_values_are_counted_keys_included(tmp_path, monkeypatch):
    monkeypatch.setattr(data_files, "MAX_VALUES", 8)
    path = tmp_path / "nodes.json"
    # 9 values: the object, its 2 keys, the list and its 2 items, the
    # inner object, its key and its value.
    path.write_text('{"a": [1, 2], "b": {"c": 3}}')
    assert "more than 8 values" in refused(path)
    monkeypatch.setattr(data_files, "MAX_VALUES", 9)
    assert load(path) == {"a": [1, 2], "b": {"c": 3}}


def test_a_json_scalar_below_the_deepest_level_is_refused(tmp_path):
    path = tmp_path / "deep.json"
    path.write_text("[" * (MAX_DEPTH - 1) + "1" + "]" * (MAX_DEPTH - 1))
    assert load(path)                  # the 1 is at depth MAX_DEPTH
    path.write_text("[" * MAX_DEPTH + "1" + "]" * MAX_DEPTH)
    assert "nest" in refused(path)     # the 1 is one level deeper


def test_a_json_key_repeated_later_in_an_object_is_refused(tmp_path):
    path = tmp_path / "dup.json"
    path.write_text('{"nodes": [{"a": 1, "b": 2, "c": 3, "b": 4}]}')
    assert "key 'b' appears twice in one object" in refused(path)
