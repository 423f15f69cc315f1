"""``virtdriver image-traits`` and ``image-check`` through ``cli.main``:
corpus-backed checks replaying a snapshot, provider trees, bad input, and
``rebuild-check`` with implied traits and a disk format."""

from __future__ import annotations

import json

import os_traits
import pytest

from tests.corpus import CORPUS
from virtdriver import cli

HOST = CORPUS / "hostcaps" / "caps-qemu-real-full.xml"
Q35 = CORPUS / "domcaps" / "qemu_8.2.0-q35.x86_64.xml"
#: The domain capabilities document the q35 evidence names.
Q35_DOCUMENT = "domain capabilities (x86_64, pc-q35-8.2, kvm)"
IDE = os_traits.COMPUTE_STORAGE_BUS_IDE
VIRTIO_VIDEO = os_traits.COMPUTE_GRAPHICS_MODEL_VIRTIO
ROOT = "00000000-0000-4000-8000-000000000001"
CHILD = "00000000-0000-4000-8000-000000000002"
OTHER = "00000000-0000-4000-8000-000000000003"
FAKE = ["--driver", "fake", "--host-spec", "numa2-ht"]


@pytest.fixture
def snapshot(corpus_dir, tmp_path):
    """A hand-written snapshot: a corpus host with q35 domain
    capabilities (no IDE bus; virtio video)."""
    root = tmp_path / "snapshot"
    root.mkdir()
    (root / "capabilities.xml").write_text(HOST.read_text())
    (root / "domcaps.xml").write_text(Q35.read_text())
    return root


def write(tmp_path, name, document) -> str:
    path = tmp_path / name
    path.write_text(document if isinstance(document, str)
                    else json.dumps(document))
    return str(path)


def image(tmp_path, properties, **fields) -> str:
    return write(tmp_path, "image.json", {"properties": properties,
                                          **fields})


def run(capsys, *argv):
    status = cli.main(list(argv))
    captured = capsys.readouterr()
    return status, captured.out, captured.err


# -- image-check against a replayed host (explain's evidence) ----------------

def test_an_ide_image_on_a_q35_only_host_fails_naming_the_document(
        tmp_path, capsys, snapshot):
    path = image(tmp_path, {"hw_disk_bus": "ide"})
    status, out, err = run(capsys, "image-check", "--image", path,
                           "--snapshot", str(snapshot))
    assert status == 1, err
    lines = out.splitlines()
    assert lines[0].split() == ["TRAIT", "WANTS", "HOST", "ASKED", "BY"]
    assert lines[1].split() == [IDE, "required", "no", "hw_disk_bus='ide'"]
    assert lines[2].strip().startswith(f"unasserted — {Q35_DOCUMENT} list "
                                       "disk buses")
    assert "but not 'ide'" in lines[2]
    assert lines[-1].startswith(f"no: an instance of {path} cannot boot on "
                                "this host (fake:///snapshot")
    assert f"{IDE} (hw_disk_bus='ide') missing" in lines[-1]


def test_a_virtio_video_image_passes_where_the_document_lists_it(
        tmp_path, capsys, snapshot):
    path = image(tmp_path, {"hw_video_model": "VirtIO",
                            "hw_disk_bus": "virtio"}, disk_format="qcow2")
    status, out, err = run(capsys, "image-check", "--image", path,
                           "--snapshot", str(snapshot), "--format", "json")
    assert status == 0, err
    answer = json.loads(out)
    assert answer["fits"] is True
    rows = {row["trait"]: row for row in answer["traits"]}
    assert set(rows) == {VIRTIO_VIDEO, os_traits.COMPUTE_STORAGE_BUS_VIRTIO,
                         os_traits.COMPUTE_IMAGE_TYPE_QCOW2}
    video = rows[VIRTIO_VIDEO]
    assert video["host_has"] and video["ok"]
    assert video["status"] == "asserted"
    assert video["implied_by"] == "hw_video_model='VirtIO'"
    assert video["evidence"] == f"{Q35_DOCUMENT} list video model 'virtio'"
    assert answer["query"].startswith("required=")


def test_a_forbidden_trait_the_host_has_fails(tmp_path, capsys, snapshot):
    path = image(tmp_path, {f"trait:{VIRTIO_VIDEO}": "forbidden"})
    status, out, _ = run(capsys, "image-check", "--image", path,
                         "--snapshot", str(snapshot))
    assert status == 1
    assert f"{VIRTIO_VIDEO} (trait:{VIRTIO_VIDEO}='forbidden') present" in \
        out.splitlines()[-1]


def test_an_image_asking_no_trait_fits(tmp_path, capsys, snapshot):
    path = image(tmp_path, {"os_distro": "fedora"})
    status, out, _ = run(capsys, "image-check", "--image", path,
                         "--snapshot", str(snapshot))
    assert status == 0
    assert out.startswith("the image asks for no traits: it fits")


# -- image-check against a provider tree -------------------------------------

def tree(tmp_path, *roots) -> str:
    providers = [{"uuid": ROOT, "name": "cn1",
                  "traits": [os_traits.COMPUTE_STORAGE_BUS_SCSI]},
                 {"uuid": CHILD, "name": "cn1_NUMA0",
                  "parent_provider_uuid": ROOT, "traits": [IDE]}]
    providers += [{"uuid": u, "name": "cn2", "traits": []} for u in roots]
    return write(tmp_path, "tree.json", {"providers": providers})


def test_image_check_reads_the_root_of_a_provider_tree(tmp_path, capsys):
    path = image(tmp_path, {"hw_disk_bus": "scsi", "hw_cdrom_bus": "ide"})
    status, out, err = run(capsys, "image-check", "--image", path,
                           "--providers", tree(tmp_path), "--format", "json")
    assert status == 1, err
    answer = json.loads(out)
    rows = {row["trait"]: row for row in answer["traits"]}
    assert rows[os_traits.COMPUTE_STORAGE_BUS_SCSI]["ok"] is True
    # IDE is on a child only: the prefilter asks the root.
    assert rows[IDE]["host_has"] is False
    assert rows[IDE]["evidence"].startswith("not among the 1 traits of "
                                            f"provider 'cn1' ({ROOT})")
    # --provider naming the child still checks its root.
    status, out, _ = run(capsys, "image-check", "--image", path,
                         "--providers", tree(tmp_path), "--provider", CHILD)
    assert status == 1 and f"provider 'cn1' ({ROOT})" in out


def test_several_roots_need_provider(tmp_path, capsys):
    path = image(tmp_path, {"hw_disk_bus": "scsi"})
    status, _, err = run(capsys, "image-check", "--image", path,
                         "--providers", tree(tmp_path, OTHER))
    assert status == 2
    assert "has 2 root providers" in err and "--provider" in err
    status, out, _ = run(capsys, "image-check", "--image", path,
                         "--providers", tree(tmp_path, OTHER), "--provider",
                         OTHER)
    assert status == 1 and f"provider 'cn2' ({OTHER})" in out


# -- image-traits ------------------------------------------------------------

def test_image_traits_prints_the_sets_and_the_placement_query(tmp_path,
                                                              capsys):
    path = image(tmp_path, {"hw_vif_model": "e1000e",
                            "trait:CUSTOM_GOLD": "forbidden"},
                 disk_format="raw")
    status, out, _ = run(capsys, "image-traits", "--image", path)
    assert status == 0
    vif, raw = (os_traits.COMPUTE_NET_VIF_MODEL_E1000E,
                os_traits.COMPUTE_IMAGE_TYPE_RAW)
    assert out.splitlines()[-1] == (
        f"Placement query: required={raw},{vif},!CUSTOM_GOLD")
    assert [line.split()[:2] for line in out.splitlines()[:3]] == [
        ["required", raw], ["required", vif], ["forbidden", "CUSTOM_GOLD"]]
    status, out, _ = run(capsys, "image-traits", "--image", path,
                         "--format", "json")
    data = json.loads(out)
    assert data["required"] == [raw, vif]
    assert data["forbidden"] == ["CUSTOM_GOLD"]
    assert data["query"] == f"required={raw},{vif},!CUSTOM_GOLD"


@pytest.mark.parametrize("command", ["image-traits", "image-check"])
def test_a_value_no_trait_expresses_exits_2_in_one_line(tmp_path, capsys,
                                                        command):
    path = image(tmp_path, {"hw_disk_bus": "scsii"})
    status, out, err = run(capsys, command, "--image", path,
                           "--providers", tree(tmp_path)) \
        if command == "image-check" else run(capsys, command, "--image",
                                             path)
    assert status == 2 and out == ""
    assert len(err.strip().splitlines()) == 1
    assert f"{path}: image hw_disk_bus='scsii'" in err
    assert "use one of fdc, ide, lxc, sata, scsi" in err
    assert "Traceback" not in err


@pytest.mark.parametrize("document, says", [
    ("{not json", "not valid JSON"),
    ({"properties": {}, "disk_format": 3}, "disk_format: 3 is not a string"),
    ({"properties": {}, "name": "x"},
     "unknown field(s) name; known: disk_format, properties"),
    ({"properties": {}, "disk_format": None}, "disk_format: None is not"),
    ({"properties": []}, "properties must be an object"),
])
def test_unusable_image_documents_exit_2(tmp_path, capsys, document, says):
    path = write(tmp_path, "bad.json", document)
    status, _, err = run(capsys, "image-traits", "--image", path)
    assert status == 2
    assert says in err and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("options, says", [
    (["--snapshot", "SNAP", "--providers", "TREE"], "give one of them"),
    (["--placement-url", "http://127.0.0.1:9"], "needs --provider"),
    (["--provider", ROOT], "--provider picks a provider"),
])
def test_conflicting_host_options_exit_2(tmp_path, capsys, snapshot, options,
                                         says):
    options = [str(snapshot) if o == "SNAP" else tree(tmp_path)
               if o == "TREE" else o for o in options]
    path = image(tmp_path, {"hw_disk_bus": "scsi"})
    status, _, err = run(capsys, "image-check", "--image", path, *options)
    assert status == 2 and says in err


# -- rebuild-check: implied traits and disk_format --------------------------

def test_rebuild_check_refuses_an_implied_trait_naming_its_property(
        tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("VIRTDRIVER_STATE_DIR", str(tmp_path / "state"))
    assert cli.main(["report", "--format", "json", *FAKE]) == 0
    providers = write(tmp_path, "tree.json", capsys.readouterr().out)
    cell = json.loads(open(providers).read())["providers"][1]["uuid"]
    inst = write(tmp_path, "i.json", {
        "uuid": "11111111-2222-3333-4444-555555555555",
        "flavor": {"vcpus": 2, "memory_mb": 1024},
        "allocations": {cell: {"resources": {"VCPU": 2}}}})
    new = image(tmp_path, {"hw_disk_bus": "ide"}, disk_format="qcow2")
    status, out, _ = run(capsys, "rebuild-check", "--instance", inst,
                         "--image", new, "--providers", providers, *FAKE)
    assert status == 1
    (conflict,) = json.loads(out)["conflicts"]
    assert conflict["missing"] == [IDE]
    assert conflict["implied_by"] == {IDE: "hw_disk_bus='ide'"}
    # The fake host has qcow2 but not vmdk images.
    fine = image(tmp_path, {}, disk_format="qcow2")
    assert cli.main(["rebuild-check", "--instance", inst, "--image", fine,
                     "--providers", providers, *FAKE]) == 0
    capsys.readouterr()
    vmdk = image(tmp_path, {}, disk_format="vmdk")
    status, out, _ = run(capsys, "rebuild-check", "--instance", inst,
                         "--image", vmdk, "--providers", providers, *FAKE)
    assert status == 1 and "disk_format='vmdk'" in out
    # Against Placement: tests/functional/placement/test_rebuild_disk_format.py
