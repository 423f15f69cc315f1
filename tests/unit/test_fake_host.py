import json

import pytest

from virtdriver.drivers.fake_host import (
    MAX_CELLS, MAX_HOST_CPUS, PRESETS, FakeHostError, load_spec,
    spec_from_dict)


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
    ({"cells": 1, "traits": "CUSTOM_X"}, "traits must be a list of trait names"),
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


def test_json_can_describe_huge_pages(tmp_path):
    path = tmp_path / "host.json"
    path.write_text(json.dumps({"cells": 1, "memory_mb_per_cell": 4096,
                                "pages_per_cell": {"2048": 512,
                                                   "1048576": 1}}))
    spec = load_spec(str(path))
    assert spec.pages_per_cell == {2048: 512, 1048576: 1}
    (cell,) = spec.host_capabilities().cells
    assert {p.size_kib: p.count for p in cell.pages}[2048] == 512


def test_yaml_digit_string_page_sizes_too():
    spec = spec_from_dict({"cells": 1, "pages_per_cell": {"2048": 8}})
    assert spec.pages_per_cell == {2048: 8}


def test_the_cpu_cap_is_the_cpuset_id_range():
    from virtdriver.cpuset import MAX_CPU_ID
    assert MAX_HOST_CPUS == MAX_CPU_ID + 1
    spec = spec_from_dict({"cells": 64, "cores_per_cell": 512,
                           "threads_per_core": 2, "memory_mb_per_cell": 1024})
    assert spec.cells * spec.cores_per_cell * spec.threads_per_core \
        == MAX_HOST_CPUS


def test_valid_details_are_kept():
    spec = spec_from_dict({"cells": 1, "name": "rack1-host",
                           "arch": "aarch64",
                           "cpu": {"model": None, "vendor": "ARM"},
                           "traits": ["CUSTOM_RACK_7"],
                           "capabilities": {"supports_trusted_certs": False}})
    assert (spec.name, spec.arch, spec.cpu_model) == ("rack1-host",
                                                      "aarch64", None)
    assert spec.capabilities == {"supports_trusted_certs": False}


# Issue 9: each bad value is refused, naming the field and the value.
@pytest.mark.parametrize("fields, message", [
    # JSON keys are strings; only digits make a page size.
    ({"pages_per_cell": {"2M": 4}},
     "pages_per_cell key '2M' (str) is not a huge page size"),
    ({"pages_per_cell": {3: 4}},
     "pages_per_cell key 3 (int) is not a huge page size"),
    ({"pages_per_cell": {2048: 1, "2048": 2}}, "page size 2048 twice"),
    ({"pages_per_cell": {"2048": "many"}},
     "pages_per_cell[2048] must be an integer >= 0, not 'many' (str)"),
    # Invalid extra traits were dropped silently.
    ({"traits": ["rack7"]},
     "traits: 'rack7' is not a valid trait name (neither an os-traits "
     "standard trait nor a CUSTOM_ name"),
    ({"traits": ["CUSTOM_rack"]},
     "'CUSTOM_rack' is not a valid trait name (custom names must match"),
    ({"traits": {"CUSTOM_A": 1}},
     "traits must be a list of trait names, not {'CUSTOM_A': 1} (dict)"),
    ({"traits": [7]}, "traits[0] must be a trait name (a string), not 7 (int)"),
    # "false" turned the capability on.
    ({"capabilities": {"supports_trusted_certs": "false"}},
     "capabilities.supports_trusted_certs must be true or false, not "
     "'false' (str)"),
    ({"capabilities": {"supports_multiatach": True}},
     "'supports_multiatach' is not a driver capability; did you mean "
     "'supports_multiattach'?"),
    # cpu: {model: 123} failed with an AttributeError.
    ({"cpu": {"model": 123}}, "cpu.model must be a string (or null for "
     "none), not 123 (int)"),
    ({"cpu": {"vendor": ["Intel"]}}, "cpu.vendor must be a string"),
    ({"cpu": {"modle": "Haswell"}}, "cpu: unknown field(s) modle"),
    ({"cpu": "Haswell"}, "cpu is a mapping of fields, not str"),
    ({"cpu": {"features": "avx2"}},
     "cpu.features must be a list of strings, not 'avx2' (str)"),
    # name: [a, b] became a provider named "['a', 'b']".
    ({"name": ["a", "b"]}, "name must be a string, not ['a', 'b'] (list)"),
    ({"name": False}, "name must be a string, not False (bool)"),
    ({"name": ""}, "name '' is not a usable node name"),
    ({"name": "a\nb"}, "name 'a\\nb' is not a usable node name"),
    ({"name": "x" * 200}, "name is 200 characters, more than 194"),
    ({"arch": 64}, "arch must be a string, not 64 (int)"),
    ({"arch": "x86"}, "arch 'x86' is not an architecture os-traits names"),
    # No upper bound: 1000 x 1000 x 2 ran for minutes.
    ({"cells": 1000}, f"cells is 1000, more than the limit of {MAX_CELLS}"),
    ({"cells": 2, "cores_per_cell": 1000, "threads_per_core": 1000},
     "cells × cores_per_cell × threads_per_core = 2 × 1000 × 1000 = 2000000 "
     f"CPUs, more than the {MAX_HOST_CPUS} a host may have"),
    ({"cores_per_cell": 10**30}, f"more than the {MAX_HOST_CPUS}"),
    ({"memory_mb_per_cell": 2**31}, "memory_mb_per_cell is 2147483648, "
     "more than the limit of 2147483647"),
])
def test_bad_values_name_field_and_value(fields, message):
    with pytest.raises(FakeHostError) as info:
        spec_from_dict({"cells": 1, **fields}, "host.yaml")
    text = str(info.value)
    assert text.startswith("host.yaml: ")
    assert message in text
    assert "\n" not in text
    assert "; " in text  # and then what to do


def test_the_cpu_cap_refuses_before_building_anything(monkeypatch):
    from virtdriver.drivers import fake_host

    def never(*args, **kwargs):
        raise AssertionError("a spec was built past the CPU cap")

    monkeypatch.setattr(fake_host, "FakeHostSpec", never)
    with pytest.raises(FakeHostError, match="describe fewer"):
        spec_from_dict({"cells": 64, "cores_per_cell": 1000,
                        "threads_per_core": 2})


def test_a_directory_is_not_mistaken_for_a_missing_preset(tmp_path):
    with pytest.raises(FakeHostError) as info:
        load_spec(str(tmp_path))
    assert "is a directory, not a fake host description file" in str(
        info.value)
    assert "neither a preset" not in str(info.value)


def test_a_described_disk_is_the_roots_disk_gb_with_the_disk_options():
    from virtdriver.conf.options import make_conf
    from virtdriver.drivers.fake import FakeDriver
    from virtdriver.resource_tracker.provider_tree import ProviderTree
    conf = make_conf([])
    conf.set_override("reserved_host_disk_mb", 10 * 1024 + 1,
                      group="compute")
    conf.set_override("disk_allocation_ratio", 2.0, group="compute")
    driver = FakeDriver({"cells": 1, "disk_gb": 400, "name": "d"}, conf=conf)
    driver.init_host("h")
    tree = ProviderTree()
    driver.update_provider_tree(tree, "d")
    disk = tree.data("d").inventory["DISK_GB"]
    assert (disk["total"], disk["reserved"], disk["allocation_ratio"]) == (
        400, 11, 2.0)
    assert driver.node_capabilities("d").facts["disk_gb"] == 400
    plain = FakeDriver("small")
    plain.init_host("h")
    tree = ProviderTree()
    plain.update_provider_tree(tree, "fake-small")
    assert "DISK_GB" not in tree.data("fake-small").inventory


@pytest.mark.parametrize("value", [-1, "400", 2**31, True, 1.5])
def test_a_bad_disk_gb_names_the_field(value):
    with pytest.raises(FakeHostError, match="disk_gb"):
        spec_from_dict({"cells": 1, "disk_gb": value})
