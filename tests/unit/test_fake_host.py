import json

import pytest

from virtdriver.drivers.fake_host import (
    PRESETS, FakeHostError, load_spec, spec_from_dict)


@pytest.mark.parametrize("preset, cells, cpus, threads", [
    ("small", 1, 4, 1), ("numa2-ht", 2, 32, 2), ("numa4-large", 4, 128, 2)])
def test_presets(preset, cells, cpus, threads):
    host = load_spec(preset).host_capabilities()
    assert len(host.cells) == cells
    assert host.cpu_ids == frozenset(range(cpus))
    for cell in host.cells:
        for cpu in cell.cpus:
            assert len(cpu.siblings) == threads
            assert cpu.id in cpu.siblings
            assert cpu.siblings <= cell.cpu_ids
        assert cell.distance_to(cell.id) == 10


def test_memory_and_pages_add_up():
    spec = spec_from_dict({"cells": 1, "memory_mb_per_cell": 4096,
                           "pages_per_cell": {2048: 512}})
    (cell,) = spec.host_capabilities().cells
    assert cell.memory_kib == 4096 * 1024
    pages = {p.size_kib: p.count for p in cell.pages}
    assert pages == {4: (4096 - 1024) * 256, 2048: 512}


def test_file_descriptions(tmp_path):
    path = tmp_path / "host.json"
    path.write_text(json.dumps({"name": "mine", "cells": 3,
                                "traits": ["CUSTOM_RACK_7"]}))
    spec = load_spec(str(path))
    assert spec.name == "mine" and spec.cells == 3
    assert spec.traits == {"CUSTOM_RACK_7"}
    yaml_path = tmp_path / "host.yaml"
    yaml_path.write_text("cells: 2\ncores_per_cell: 2\n")
    assert len(load_spec(str(yaml_path)).host_capabilities().cpu_ids) == 4


@pytest.mark.parametrize("data, message", [
    ({}, "field 'cells' (number of NUMA cells) is required"),
    ({"cells": 0}, "cells must be an integer >= 1, not 0"),
    ({"cells": True}, "cells must be an integer >= 1, not True"),
    ({"cells": 1, "sockets": 2}, "unknown field(s) sockets"),
    ({"cells": 1, "traits": "CUSTOM_X"}, "traits must be a list of strings"),
    ({"cells": 1, "memory_mb_per_cell": 1024,
      "pages_per_cell": {1048576: 2}}, "hold 2048 MiB, more than"),
    ([1, 2], "a fake host is a mapping of fields, not list"),
])
def test_bad_descriptions_name_the_field(data, message):
    with pytest.raises(FakeHostError) as info:
        spec_from_dict(data, "host.yaml")
    assert str(info.value).startswith("host.yaml: ")
    assert message in str(info.value)


def test_unknown_preset_or_file_lists_presets(tmp_path):
    with pytest.raises(FakeHostError) as info:
        load_spec("medium")
    for name in PRESETS:
        assert name in str(info.value)
    bad = tmp_path / "bad.yaml"
    bad.write_text("cells: [\n")
    with pytest.raises(FakeHostError, match="not valid YAML"):
        load_spec(str(bad))
