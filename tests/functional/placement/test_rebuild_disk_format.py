"""``virtdriver rebuild-check --placement-url`` with an IMAGE.json
``disk_format``: its ``COMPUTE_IMAGE_TYPE_*`` trait checked against the
providers a real Placement holds, and asked of Placement's
``in_tree&required`` filter, like the traits image properties imply."""

from __future__ import annotations

import json
import uuid as uuidlib

import os_traits
import pytest

from virtdriver import cli

FAKE = ["--driver", "fake", "--host-spec", "numa2-ht"]
QCOW2 = os_traits.COMPUTE_IMAGE_TYPE_QCOW2
RAW = os_traits.COMPUTE_IMAGE_TYPE_RAW
VMDK = os_traits.COMPUTE_IMAGE_TYPE_VMDK
VIRTIO = os_traits.COMPUTE_STORAGE_BUS_VIRTIO
HOST_TRAITS = (QCOW2, RAW, VIRTIO)


@pytest.fixture
def compute(api):
    """A compute node ``cn1`` (qcow2 and raw images, virtio disks) with a
    NUMA cell child; both have VCPU.  Returns ``(root, cell)``."""
    root, cell = str(uuidlib.uuid4()), str(uuidlib.uuid4())
    api.client.request("POST", "/resource_providers",
                       body={"name": "cn1", "uuid": root})
    api.client.request("POST", "/resource_providers", body={
        "name": "cn1_NUMA0", "uuid": cell, "parent_provider_uuid": root})
    api.add_traits(root, *HOST_TRAITS)
    for uuid in (root, cell):
        generation = api.client.get_part(uuid, "inventories")[0]
        api.client.put_part(uuid, "inventories", generation,
                            {"VCPU": {"total": 4}})
    return root, cell


@pytest.fixture(autouse=True)
def _state(tmp_path, monkeypatch):
    monkeypatch.setenv("VIRTDRIVER_STATE_DIR", str(tmp_path / "state"))


def write(tmp_path, name, document) -> str:
    path = tmp_path / name
    path.write_text(json.dumps(document))
    return str(path)


def instance_on(tmp_path, consumer, **image) -> str:
    return write(tmp_path, "instance.json", {
        "uuid": consumer, "flavor": {"vcpus": 1, "memory_mb": 512},
        **({"image": image} if image else {})})


def check(capsys, instance, image, url, *more):
    status = cli.main(["rebuild-check", "--instance", instance, "--image",
                       image, "--placement-url", url, *FAKE, *more])
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err
    return status, captured.out


@pytest.mark.parametrize("disk_format, trait, allowed", [
    ("qcow2", QCOW2, True), ("raw", RAW, True), ("QCOW2", QCOW2, True),
    ("vmdk", VMDK, False)])
def test_the_disk_format_trait_is_checked_and_asked_of_placement(
        tmp_path, capsys, placement, api, compute, disk_format, trait,
        allowed):
    root, _ = compute
    instance = instance_on(tmp_path, api.allocate(root, {"VCPU": 1}))
    image = write(tmp_path, "image.json",
                  {"disk_format": disk_format, "properties": {}})

    status, out = check(capsys, instance, image, placement.url)
    answer = json.loads(out)
    assert (status == 0) is allowed and answer["allowed"] is allowed
    asked = answer["placement"]
    assert asked["asked"] is True and asked["allocations_from"] == \
        "placement"
    assert asked["required"] == [trait] and asked["query"] == trait
    assert asked["returned"] == {root: [root] if allowed else []}
    assert asked["placement_allowed"] is allowed and asked["agrees"] is True
    if not allowed:
        (conflict,) = answer["conflicts"]
        assert conflict["missing"] == [VMDK]
        assert conflict["implied_by"] == {VMDK: "disk_format='vmdk'"}
        assert "disk_format='vmdk'" in conflict["message"]


def test_disk_format_and_properties_are_one_question_read_from_placement(
        tmp_path, capsys, placement, api, compute):
    root, _ = compute
    instance = instance_on(tmp_path, api.allocate(root, {"VCPU": 1}))
    image = write(tmp_path, "image.json", {
        "disk_format": "qcow2", "properties": {"hw_disk_bus": "virtio"}})
    status, out = check(capsys, instance, image, placement.url)
    asked = json.loads(out)["placement"]
    assert status == 0 and asked["agrees"] is True
    assert asked["query"] == f"{QCOW2},{VIRTIO}"

    # The answer follows Placement's traits, not the local (fake) host's.
    api.remove_traits(root, QCOW2)
    status, out = check(capsys, instance, image, placement.url)
    answer = json.loads(out)
    assert status == 1 and answer["placement"]["agrees"] is True
    (conflict,) = answer["conflicts"]
    assert conflict["missing"] == [QCOW2]
    assert conflict["implied_by"] == {QCOW2: "disk_format='qcow2'"}
    assert answer["placement"]["returned"] == {root: []}


def test_a_disk_format_is_asked_even_when_the_properties_are_unchanged(
        tmp_path, capsys, placement, api, compute):
    root, _ = compute
    instance = instance_on(tmp_path, api.allocate(root, {"VCPU": 1}),
                           properties={"hw_disk_bus": "virtio"})
    image = write(tmp_path, "image.json", {
        "disk_format": "vmdk", "properties": {"hw_disk_bus": "virtio"}})
    status, out = check(capsys, instance, image, placement.url)
    answer = json.loads(out)
    assert status == 1 and answer["allowed"] is False
    # The current image already required virtio: only the format is new.
    assert answer["placement"]["required"] == [VMDK]
    assert answer["conflicts"][0]["missing"] == [VMDK]


def test_a_host_level_image_type_on_the_root_differs_by_design(
        tmp_path, capsys, placement, api, compute):
    root, cell = compute
    instance = instance_on(tmp_path, api.allocate(cell, {"VCPU": 1}))
    image = write(tmp_path, "image.json",
                  {"disk_format": "qcow2", "properties": {}})
    status, out = check(capsys, instance, image, placement.url,
                        "--format", "json")
    answer = json.loads(out)
    # The rule counts the root's traits; Placement's filter judges the
    # allocated NUMA cell alone.
    assert status == 0 and answer["allowed"] is True
    asked = answer["placement"]
    assert asked["rule_allowed"] is True
    assert asked["placement_allowed"] is False and asked["agrees"] is False
    assert asked["returned"] == {root: [root]}
    (difference,) = asked["differences"]
    assert f"'cn1_NUMA0' ({cell})" in difference
    assert f"lacks {QCOW2}" in difference

    status, out = check(capsys, instance, image, placement.url,
                        "--format", "text")
    assert status == 0 and "Placement's own answer differs:" in out


def test_a_disk_format_naming_no_trait_is_refused_and_nothing_asked(
        tmp_path, capsys, placement, api, compute):
    root, _ = compute
    instance = instance_on(tmp_path, api.allocate(root, {"VCPU": 1}))
    image = write(tmp_path, "image.json",
                  {"disk_format": "docker", "properties": {}})
    status, out = check(capsys, instance, image, placement.url)
    answer = json.loads(out)
    assert status == 1 and answer["placement"]["asked"] is False
    (conflict,) = answer["conflicts"]
    assert conflict["kind"] == "invalid" and "disk_format" in \
        conflict["message"]


def test_placement_and_a_provider_tree_with_the_same_facts_agree(
        tmp_path, capsys, placement, api, compute):
    root, cell = compute
    tree = write(tmp_path, "tree.json", {"providers": [
        {"uuid": root, "name": "cn1", "traits": sorted(HOST_TRAITS)},
        {"uuid": cell, "name": "cn1_NUMA0", "traits": [],
         "parent_provider_uuid": root}]})
    consumer = api.allocate(cell, {"VCPU": 1})
    instance = write(tmp_path, "instance.json", {
        "uuid": consumer, "flavor": {"vcpus": 1, "memory_mb": 512},
        "allocations": {cell: {"resources": {"VCPU": 1}}}})
    for disk_format in ("qcow2", "raw", "vmdk", "iso", "docker"):
        image = write(tmp_path, "image.json",
                      {"disk_format": disk_format, "properties": {}})
        by_placement = check(capsys, instance, image, placement.url)
        assert cli.main(["rebuild-check", "--instance", instance, "--image",
                         image, "--providers", tree, *FAKE]) == \
            by_placement[0]
        by_tree = json.loads(capsys.readouterr().out)
        assert json.loads(by_placement[1])["conflicts"] == \
            by_tree["conflicts"], disk_format


def test_a_disk_format_with_placement_unreachable_exits_3(tmp_path, capsys):
    instance = instance_on(tmp_path, str(uuidlib.uuid4()))
    image = write(tmp_path, "image.json",
                  {"disk_format": "qcow2", "properties": {}})
    status = cli.main(["rebuild-check", "--instance", instance, "--image",
                       image, "--placement-url", "http://127.0.0.1:9",
                       *FAKE])
    err = capsys.readouterr().err
    assert status == 3 and "Traceback" not in err
    assert "not checked against" not in err
