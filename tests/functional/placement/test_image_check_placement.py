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
