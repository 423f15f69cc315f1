import json

import pytest

from virtdriver.drivers.ironic_inventory import (
    PROVISION_STATES, USABLE_STATES, InventoryError, load_inventory,
    parse_inventory)

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


def test_every_ironic_provision_state_is_accepted():
    assert USABLE_STATES <= PROVISION_STATES
    for state in sorted(PROVISION_STATES):
        (parsed,) = parse_inventory([node(provision_state=state)], "inv")
        assert parsed.provision_state == state
        assert parsed.available is (state in USABLE_STATES)


def test_a_name_may_be_left_out_or_null():
    for fields in ({}, {"name": None}):
        (parsed,) = parse_inventory([node(**fields)], "inv")
        assert parsed.name == UUID


# Issue 9: each bad value is refused, naming the field and the value.
@pytest.mark.parametrize("fields, message", [
    # traits: {CUSTOM_A: 1} was taken for a list of its keys.
    ({"traits": {"CUSTOM_A": 1}},
     "traits must be a list of trait names, not {'CUSTOM_A': 1} (dict); "
     "for changes give trait_changes"),
    ({"traits": "CUSTOM_A"},
     "traits must be a list of trait names, not 'CUSTOM_A' (str)"),
    # traits: [[a]] raised a TypeError (unhashable list).
    ({"traits": [["a"]]},
     "traits[0] must be a trait name (a string), not ['a'] (list)"),
    ({"trait_changes": {"add": [["a"]]}},
     "trait_changes.add[0] must be a trait name (a string), not ['a']"),
    ({"trait_changes": {"remove": {"CUSTOM_A": True}}},
     "trait_changes.remove must be a list of trait names, not"),
    ({"trait_changes": ["CUSTOM_A"]},
     "trait_changes must be a mapping with 'add' and/or 'remove' lists, "
     "not ['CUSTOM_A'] (list)"),
    # resource_class: "!!!" became CUSTOM__.
    ({"resource_class": "!!!"},
     "resource_class '!!!' has no letters or digits (it would become "
     "CUSTOM__)"),
    ({"resource_class": "CUSTOM_"}, "resource_class 'CUSTOM_' has no letters"),
    ({"resource_class": 7}, "resource_class is required, a non-empty "
     "string, not 7 (int)"),
    ({"resource_class": "a" * 300}, "longer than Placement's 255"),
    # provision_state and name were stringified.
    ({"provision_state": 5},
     "provision_state 5 (int) is not an ironic provision state"),
    ({"provision_state": ["active"]},
     "provision_state ['active'] (list) is not an ironic provision state"),
    ({"provision_state": "availble"},
     "provision_state 'availble' (str) is not an ironic provision state; "
     "did you mean 'available'?"),
    ({"provision_state": "ready"}, "use one such as 'available'"),
    ({"name": 42}, "name must be printable text of 1 to 255 characters, not "
     "42 (int)"),
    ({"name": ["a", "b"]}, "name must be printable text"),
    ({"name": ""}, "not '' (str); quote it in YAML, or leave it out"),
    ({"uuid": 12345678123456781234567812345678},
     "node 0: uuid must be a string, not 12345678123456781234567812345678 "
     "(int)"),
    ({"uuid": None}, "node 0: uuid is required"),
    ({"maintenance": "false"},
     "maintenance must be true or false, not 'false' (str)"),
    ({"properties": [1]}, "properties must be a mapping, not [1] (list)"),
])
def test_bad_values_name_node_field_and_value(fields, message):
    with pytest.raises(InventoryError) as info:
        parse_inventory([node(**fields)], "inv.yaml")
    text = str(info.value)
    assert text.startswith("inv.yaml: node 0")
    assert message in text
    assert "\n" not in text


def test_unknown_top_level_fields_are_refused():
    with pytest.raises(InventoryError, match=r"unknown field\(s\) node;"):
        parse_inventory({"nodes": [node()], "node": {}}, "inv.yaml")


def test_a_directory_is_refused_as_one(tmp_path):
    with pytest.raises(InventoryError, match="is a directory, not a node "
                       "inventory file"):
        load_inventory(tmp_path)
