"""``virtdriver rebuild-check --placement-url``: allocations and traits
read from a real Placement, and Placement's own answer beside the rule's."""

from __future__ import annotations

import json
import uuid as uuidlib

from virtdriver import cli

FAKE = ["--driver", "fake", "--host-spec", "numa2-ht"]


def test_rebuild_check_reads_allocations_and_traits_from_placement(
        tmp_path, monkeypatch, placement, api, capsys):
    monkeypatch.setenv("VIRTDRIVER_STATE_DIR", str(tmp_path / "state"))
    url = placement.url
    root, nic_a, nic_b = (str(uuidlib.uuid4()) for _ in range(3))
    api.client.request("POST", "/resource_providers",
                       body={"name": "cn1", "uuid": root})
    for name, uuid in (("nic-a", nic_a), ("nic-b", nic_b)):
        api.client.request("POST", "/resource_providers", body={
            "name": name, "uuid": uuid, "parent_provider_uuid": root})
    api.add_traits(nic_b, "CUSTOM_PHYSNET_FAST")
    api.client.request("PUT", "/resource_classes/CUSTOM_VF")
    for uuid in (nic_a, nic_b):
        generation = api.client.get_part(uuid, "inventories")[0]
        api.client.put_part(uuid, "inventories", generation,
                            {"CUSTOM_VF": {"total": 4}})
    consumer = api.allocate(nic_a, {"CUSTOM_VF": 1})
    instance = tmp_path / "instance.json"
    instance.write_text(json.dumps({
        "uuid": consumer, "flavor": {"vcpus": 1, "memory_mb": 512}}))
    image = tmp_path / "image.json"
    image.write_text(json.dumps({"properties": {
        "trait:CUSTOM_PHYSNET_FAST": "required"}}))

    status = cli.main(["rebuild-check", "--instance", str(instance),
                       "--image", str(image), "--placement-url", url, *FAKE])
    answer = json.loads(capsys.readouterr().out)
    assert status == 1 and answer["allowed"] is False
    assert "CUSTOM_PHYSNET_FAST" in answer["conflicts"][0]["message"]
    assert answer["placement"]["agrees"] is True

    api.free(consumer)
    moved = api.allocate(nic_b, {"CUSTOM_VF": 1})
    instance.write_text(json.dumps({
        "uuid": moved, "flavor": {"vcpus": 1, "memory_mb": 512}}))
    assert cli.main(["rebuild-check", "--instance", str(instance),
                     "--image", str(image), "--placement-url", url,
                     "--format", "text", *FAKE]) == 0
    out = capsys.readouterr().out
    assert "rebuild allowed" in out and "answer agrees" in out


def test_rebuild_check_with_placement_unreachable_exits_3(tmp_path, capsys):
    instance = tmp_path / "instance.json"
    instance.write_text(json.dumps({
        "uuid": str(uuidlib.uuid4()), "flavor": {"vcpus": 1,
                                                 "memory_mb": 512}}))
    image = tmp_path / "image.json"
    image.write_text(json.dumps({"properties": {
        "trait:CUSTOM_X": "required"}}))
    status = cli.main(["rebuild-check", "--instance", str(instance),
                       "--image", str(image), "--placement-url",
                       "http://127.0.0.1:9", *FAKE])
    err = capsys.readouterr().err
    assert status == 3 and "Traceback" not in err


def test_placement_not_asked_is_not_said_to_agree(
        tmp_path, monkeypatch, placement, capsys):
    # The new image asks no trait the current one did not: nothing is
    # sent, so nothing can agree.
    monkeypatch.setenv("VIRTDRIVER_STATE_DIR", str(tmp_path / "state"))
    instance = tmp_path / "instance.json"
    instance.write_text(json.dumps({
        "uuid": str(uuidlib.uuid4()),
        "flavor": {"vcpus": 1, "memory_mb": 512},
        "image": {"properties": {"hw_disk_bus": "virtio"}}}))
    image = tmp_path / "image.json"
    image.write_text(json.dumps({"properties": {}}))
    args = ["rebuild-check", "--instance", str(instance), "--image",
            str(image), "--placement-url", placement.url, *FAKE]
    assert cli.main([*args, "--format", "text"]) == 0
    out = capsys.readouterr().out
    assert "Placement was not asked" in out and "agrees" not in out
    assert cli.main(args) == 0
    shown = json.loads(capsys.readouterr().out)["placement"]
    assert shown["asked"] is False


def test_an_instance_claim_would_refuse_is_bad_input_here_too(
        tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("VIRTDRIVER_STATE_DIR", str(tmp_path / "state"))
    instance = tmp_path / "instance.json"
    instance.write_text(json.dumps({
        "uuid": str(uuidlib.uuid4()),
        "flavor": {"vcpus": 2, "memory_mb": 1024,
                   "extra_specs": {"hw:numa_nodes": "1000000"}}}))
    image = tmp_path / "image.json"
    image.write_text(json.dumps({"properties": {}}))
    for command in ("rebuild-check", "claim"):
        extra = ["--image", str(image)] if command == "rebuild-check" else []
        assert cli.main([command, "--instance", str(instance), *extra,
                         *FAKE]) == 2
        err = capsys.readouterr().err
        assert "hw:numa_nodes='1000000'" in err and "Traceback" not in err
