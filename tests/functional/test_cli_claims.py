"""``virtdriver claims | claim | release | rebuild-check`` through
``cli.main``, with the fake driver and a real state directory."""

from __future__ import annotations

import json
import uuid as uuidlib

import os_traits
import pytest

from virtdriver import cli

UUID = "11111111-2222-3333-4444-555555555555"


@pytest.fixture
def host(tmp_path, monkeypatch):
    """The fake numa2-ht host, every CPU dedicated; state in tmp_path."""
    monkeypatch.setenv("VIRTDRIVER_STATE_DIR", str(tmp_path / "state"))
    conf = tmp_path / "virtdriver.conf"
    conf.write_text("[compute]\ncpu_dedicated_set = 0-31\n")
    return ["--driver", "fake", "--host-spec", "numa2-ht",
            "--config-file", str(conf)]


def write(tmp_path, name, document) -> str:
    path = tmp_path / name
    path.write_text(document if isinstance(document, str)
                    else json.dumps(document))
    return str(path)


def instance_doc(vcpus=8, image=None, allocations=None, uuid=UUID,
                 specs=None) -> dict:
    return {"uuid": uuid,
            "flavor": {"vcpus": vcpus, "memory_mb": 4096,
                       "extra_specs": specs if specs is not None
                       else {"hw:cpu_policy": "dedicated"}},
            "image": {"properties": image or {}},
            "allocations": allocations or {}}


def test_claim_list_and_release(tmp_path, host, capsys):
    path = write(tmp_path, "i.json", instance_doc())
    assert cli.main(["claim", "--instance", path, *host]) == 0
    assert f"claimed instance {UUID}" in capsys.readouterr().out
    assert cli.main(["claims", "--format", "json", *host]) == 0
    listing = json.loads(capsys.readouterr().out)
    fit = listing["nodes"]["fake-numa2-ht"][UUID]
    assert len(fit["cells"][0]["pinning"]) == 8
    assert sum(row.get("PCPU", 0) for row in listing["usages"].values()) == 8
    assert cli.main(["claims", *host]) == 0
    assert "(used 8)" in capsys.readouterr().out
    assert cli.main(["release", "--instance", UUID, *host]) == 0
    assert cli.main(["release", "--instance", UUID, *host]) == 1
    assert "refused: instance" in capsys.readouterr().err


def test_a_claim_that_does_not_fit_exits_1_naming_the_cells(tmp_path, host,
                                                            capsys):
    for index in range(4):
        doc = instance_doc(uuid=str(uuidlib.uuid4()))
        assert cli.main(["claim", "--instance",
                         write(tmp_path, f"{index}.json", doc), *host]) == 0
    capsys.readouterr()
    assert cli.main(["claim", "--instance", write(
        tmp_path, "x.json", instance_doc(vcpus=1)), *host]) == 1
    err = capsys.readouterr().err
    assert "cell 0" in err and "cell 1" in err and "Traceback" not in err


@pytest.mark.parametrize("document, field", [
    ("{not json", "not valid JSON"),
    ({"uuid": "nope", "flavor": {"vcpus": 1, "memory_mb": 1}}, "uuid"),
    ({"uuid": UUID, "flavor": {"vcpus": "4", "memory_mb": 1}}, "vcpus"),
    ({"uuid": UUID, "flavor": {"vcpus": 1, "memory_mb": 1,
                               "extra_specs": {"hw:numa_nodes": 2}}},
     "extra_specs"),
    ({"uuid": UUID, "flavor": {"vcpus": 1, "memory_mb": 1}, "x": 1},
     "unknown field"),
    ({"uuid": UUID, "flavor": {"vcpus": 1, "memory_mb": 1},
      "allocations": {"rp": {"resources": {"VCPU": -1}}}}, "allocations"),
])
def test_unusable_instance_files_exit_2(tmp_path, host, capsys, document,
                                        field):
    path = write(tmp_path, "bad.json", document)
    assert cli.main(["claim", "--instance", path, *host]) == 2
    err = capsys.readouterr().err
    assert field in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1


def test_rebuild_check_answers_allowed_or_every_conflict(tmp_path, host,
                                                         capsys):
    assert cli.main(["report", "--format", "json", *host]) == 0
    tree = write(tmp_path, "tree.json", capsys.readouterr().out)
    cell = json.loads(open(tree).read())["providers"][1]["uuid"]
    inst = write(tmp_path, "i.json", instance_doc(
        allocations={cell: {"resources": {"PCPU": 8}}}))
    same = write(tmp_path, "same.json", {"properties": {}})
    assert cli.main(["rebuild-check", "--instance", inst, "--image", same,
                     "--providers", tree, *host]) == 0
    assert json.loads(capsys.readouterr().out)["allowed"] is True
    changed = write(tmp_path, "new.json", {"properties": {
        "hw_numa_nodes": "2", "trait:CUSTOM_NOT_HERE": "required"}})
    assert cli.main(["rebuild-check", "--instance", inst, "--image", changed,
                     "--providers", tree, *host]) == 1
    answer = json.loads(capsys.readouterr().out)
    assert answer["allowed"] is False
    assert {c["kind"] for c in answer["conflicts"]} == {"numa", "traits"}
    assert cli.main(["rebuild-check", "--instance", inst, "--image", changed,
                     "--format", "text", *host]) == 1    # this host's tree
    out = capsys.readouterr().out
    assert "rebuild refused, 2 reason(s)" in out and "[numa]" in out


def test_rebuild_check_with_an_invalid_image_is_refused_as_invalid(
        tmp_path, host, capsys):
    inst = write(tmp_path, "i.json", instance_doc())
    bad = write(tmp_path, "bad.json", {"properties": {
        "hw_cpu_thread_policy": "sometimes"}})
    assert cli.main(["rebuild-check", "--instance", inst, "--image", bad,
                     *host]) == 1
    answer = json.loads(capsys.readouterr().out)
    assert [c["kind"] for c in answer["conflicts"]] == ["invalid"]
    broken = write(tmp_path, "tree.json", {"providers": "no"})
    assert cli.main(["rebuild-check", "--instance", inst, "--image", bad,
                     "--providers", broken, *host]) == 2


def test_an_edited_claims_file_is_a_clear_error(tmp_path, host, capsys):
    path = write(tmp_path, "i.json", instance_doc())
    assert cli.main(["claim", "--instance", path, *host]) == 0
    claims = tmp_path / "state" / "claims-fake.json"
    document = json.loads(claims.read_text())
    cells = document["nodes"]["fake-numa2-ht"]["instances"][UUID]["cells"]
    cells[0]["pinning"]["0"] = 4000
    claims.write_text(json.dumps(document))
    capsys.readouterr()
    assert cli.main(["claims", *host]) == 2
    err = capsys.readouterr().err
    assert str(claims) in err and "pinning" in err


def test_rebuild_check_without_allocations_refuses_a_forbidden_host_trait(
        tmp_path, host, capsys):
    """The host has COMPUTE_NODE; an instance document without allocations
    (as `claim` takes it) must not let an image forbidding it pass."""
    inst = write(tmp_path, "i.json", instance_doc())
    image = write(tmp_path, "new.json", {"properties": {
        f"trait:{os_traits.COMPUTE_NODE}": "forbidden"}})

    assert cli.main(["rebuild-check", "--instance", inst, "--image", image,
                     *host]) == 1

    [conflict] = json.loads(capsys.readouterr().out)["conflicts"]
    assert conflict["kind"] == "traits"
    assert conflict["unverified"]["forbidden"] == [os_traits.COMPUTE_NODE]
    assert "the instance holds no allocations" in conflict["message"]
