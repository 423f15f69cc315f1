import json

import pytest

from virtdriver.drivers.ironic_inventory import (
    InventoryError, load_inventory, parse_inventory)

UUID = "1be26c0b-03f2-4d2e-ae87-c02d7f33c123"


def node(**fields):
    return {"uuid": UUID, "resource_class": "baremetal.gold", **fields}


def test_a_node_with_a_full_trait_list():
    (parsed,) = parse_inventory({"nodes": [node(
        name="rack1-u07", traits=["CUSTOM_RAID5", "HW_CPU_X86_AVX2"],
        properties={"cpus": 64})]}, "inv.yaml")
    assert parsed.name == "rack1-u07"
    assert parsed.placement_resource_class == "CUSTOM_BAREMETAL_GOLD"
    assert parsed.asserted_traits == {"CUSTOM_RAID5", "HW_CPU_X86_AVX2"}
    assert parsed.managed_traits == parsed.asserted_traits
    assert parsed.available and parsed.properties["cpus"] == 64


def test_trait_changes_manage_added_and_removed_names():
    (parsed,) = parse_inventory([node(trait_changes={
        "add": ["CUSTOM_GPU"], "remove": ["CUSTOM_RAID5"]})], "inv")
    assert parsed.asserted_traits == {"CUSTOM_GPU"}
    assert parsed.removed_traits == {"CUSTOM_RAID5"}
    assert parsed.managed_traits == {"CUSTOM_GPU", "CUSTOM_RAID5"}


@pytest.mark.parametrize("fields, available", [
    ({}, True), ({"provision_state": "active"}, True),
    ({"provision_state": "manageable"}, False),
    ({"maintenance": True}, False)])
def test_availability(fields, available):
    (parsed,) = parse_inventory([node(**fields)], "inv")
    assert parsed.available is available


def test_custom_resource_class_is_not_doubled():
    (parsed,) = parse_inventory([node(resource_class="CUSTOM_GOLD")], "inv")
    assert parsed.placement_resource_class == "CUSTOM_GOLD"


@pytest.mark.parametrize("nodes, message", [
    ("x", "expected a list of nodes"),
    ([node(uuid="nope")], "node 0: uuid 'nope' is not a UUID"),
    ([node(resource_class="")], f"node 0 ({UUID}): resource_class is"),
    ([node(traits=["bad"])], "traits: 'bad' is not a valid trait name"),
    ([node(traits=[], trait_changes={})], "either traits"),
    ([node(trait_changes={"add": ["CUSTOM_A"], "remove": ["CUSTOM_A"]})],
     "both adds and removes CUSTOM_A"),
    ([node(maintenance="yes")], "maintenance must be true or false"),
    ([node(colour="red")], "unknown field(s) colour"),
    ([node(), node()], f"node 1 repeats uuid '{UUID}' of node 0"),
])
def test_errors_name_file_node_and_field(nodes, message):
    with pytest.raises(InventoryError) as info:
        parse_inventory(nodes, "inv.yaml")
    assert str(info.value).startswith("inv.yaml: ")
    assert message in str(info.value)


def test_files(tmp_path):
    path = tmp_path / "nodes.json"
    path.write_text(json.dumps({"nodes": [node()]}))
    assert load_inventory(path)[0].uuid == UUID
    with pytest.raises(InventoryError, match="cannot read"):
        load_inventory(tmp_path / "missing.yaml")
    broken = tmp_path / "nodes.yaml"
    broken.write_text("nodes: [\n")
    with pytest.raises(InventoryError, match="not valid YAML"):
        load_inventory(broken)
