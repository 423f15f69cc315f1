"""``virtdriver image-check --placement-url URL --provider UUID``: the
compute node's traits read from a real Placement."""

from __future__ import annotations

import json
import uuid as uuidlib

import os_traits

from virtdriver import cli


def test_image_check_reads_the_root_provider_from_placement(
        tmp_path, placement, api, capsys):
    root, child = str(uuidlib.uuid4()), str(uuidlib.uuid4())
    api.client.request("POST", "/resource_providers",
                       body={"name": "cn1", "uuid": root})
    api.client.request("POST", "/resource_providers", body={
        "name": "cn1_NUMA0", "uuid": child, "parent_provider_uuid": root})
    api.add_traits(root, os_traits.COMPUTE_GRAPHICS_MODEL_VIRTIO)
    api.add_traits(child, os_traits.COMPUTE_STORAGE_BUS_IDE)
    image = tmp_path / "image.json"
    image.write_text(json.dumps({"properties": {"hw_video_model": "virtio"}}))

    # The child named: its root is what the prefilter asks.
    status = cli.main(["image-check", "--image", str(image),
                       "--placement-url", placement.url, "--provider", child,
                       "--format", "json"])
    answer = json.loads(capsys.readouterr().out)
    assert status == 0 and answer["fits"] is True
    assert answer["host"] == (f"provider 'cn1' ({root}) in Placement at "
                              f"{placement.url.rstrip('/')}")
    (row,) = answer["traits"]
    assert row["status"] == "listed" and row["host_has"] is True

    image.write_text(json.dumps({"properties": {"hw_disk_bus": "ide"}}))
    status = cli.main(["image-check", "--image", str(image),
                       "--placement-url", placement.url, "--provider", root])
    out = capsys.readouterr().out
    assert status == 1
    assert f"{os_traits.COMPUTE_STORAGE_BUS_IDE} (hw_disk_bus='ide') " \
        "missing" in out


def test_a_provider_placement_does_not_have_exits_2(tmp_path, placement,
                                                    capsys):
    image = tmp_path / "image.json"
    image.write_text(json.dumps({"properties": {"hw_disk_bus": "ide"}}))
    missing = str(uuidlib.uuid4())
    status = cli.main(["image-check", "--image", str(image),
                       "--placement-url", placement.url,
                       "--provider", missing])
    err = capsys.readouterr().err
    assert status == 2 and f"--provider {missing}" in err
    assert "has no such provider" in err


def test_rebuild_check_asks_placement_the_implied_traits_too(
        tmp_path, monkeypatch, placement, api, capsys):
    monkeypatch.setenv("VIRTDRIVER_STATE_DIR", str(tmp_path / "state"))
    root = str(uuidlib.uuid4())
    api.client.request("POST", "/resource_providers",
                       body={"name": "cn1", "uuid": root})
    api.add_traits(root, os_traits.COMPUTE_STORAGE_BUS_VIRTIO)
    generation = api.client.get_part(root, "inventories")[0]
    api.client.put_part(root, "inventories", generation,
                        {"VCPU": {"total": 4}})
    consumer = api.allocate(root, {"VCPU": 1})
    instance = tmp_path / "instance.json"
    instance.write_text(json.dumps({
        "uuid": consumer, "flavor": {"vcpus": 1, "memory_mb": 512}}))
    image = tmp_path / "image.json"
    fake = ["--driver", "fake", "--host-spec", "numa2-ht"]
    for bus, allowed in (("ide", False), ("virtio", True)):
        image.write_text(json.dumps({"properties": {"hw_disk_bus": bus}}))
        status = cli.main(["rebuild-check", "--instance", str(instance),
                           "--image", str(image), "--placement-url",
                           placement.url, *fake])
        answer = json.loads(capsys.readouterr().out)
        assert (status == 0) is allowed and answer["allowed"] is allowed
        placement_answer = answer["placement"]
        # Placement was asked the implied trait, and agrees with the rule.
        assert placement_answer["agrees"] is True
        assert f"STORAGE_BUS_{bus.upper()}" in json.dumps(placement_answer)
        if not allowed:
            assert "(hw_disk_bus='ide')" in answer["conflicts"][0]["message"]
