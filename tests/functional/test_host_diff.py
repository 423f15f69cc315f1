"""``virtdriver diff A B`` between hand-written snapshots built from the
corpus, and against ``live`` (test:///default).

The expected differences are read from the corpus documents here, not
from the driver: QEMU 2.12's q35 domain capabilities have no ``<tpm>`` and
mark ``<sev>`` supported, QEMU 8.2's list TPM models and mark SEV
unsupported; the host capabilities decide the NUMA cells and their CPUs.
"""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys
import xml.etree.ElementTree as ET

import os_resource_classes as orc
import os_traits
import pytest

from tests.corpus import CORPUS
from virtdriver import cli

HOST = CORPUS / "hostcaps" / "caps-qemu-real-full.xml"
FOUR_CELLS = CORPUS / "hostcaps" / "vircaps-x86_64-basic.xml"
QEMU_2_12 = CORPUS / "domcaps" / "qemu_2.12.0-q35.x86_64.xml"
QEMU_8_2 = CORPUS / "domcaps" / "qemu_8.2.0-q35.x86_64.xml"


def snapshot(root: pathlib.Path, host: pathlib.Path,
             domcaps: pathlib.Path) -> pathlib.Path:
    """A hand-written snapshot (docs/snapshots.md): two files."""
    root.mkdir()
    (root / "capabilities.xml").write_text(host.read_text())
    (root / "domcaps.xml").write_text(domcaps.read_text())
    return root


@pytest.fixture
def old(tmp_path):
    return snapshot(tmp_path / "qemu-2.12", HOST, QEMU_2_12)


@pytest.fixture
def new(tmp_path):
    return snapshot(tmp_path / "qemu-8.2", HOST, QEMU_8_2)


def run_diff(capsys, *argv):
    status = cli.main(["diff", *map(str, argv)])
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def diff_json(capsys, *argv):
    status, out, _ = run_diff(capsys, *argv, "--format", "json")
    return status, json.loads(out)


def tpm_models(domcaps: pathlib.Path) -> set[str]:
    root = ET.parse(domcaps).getroot()
    return {v.text for v in root.findall(
        "devices/tpm/enum[@name='model']/value")}


def sev_supported(domcaps: pathlib.Path) -> bool:
    return ET.parse(domcaps).getroot().find(
        "features/sev").get("supported") == "yes"


def cells(host: pathlib.Path) -> list[int]:
    """CPUs per NUMA cell of a host capabilities document."""
    return [len(cell.findall("cpus/cpu")) for cell in ET.parse(host).findall(
        "host/topology/cells/cell")]


def test_corpus_documents_differ_as_the_tests_assume():
    assert tpm_models(QEMU_2_12) == set()
    assert {"tpm-tis", "tpm-crb"} <= tpm_models(QEMU_8_2)
    assert sev_supported(QEMU_2_12) and not sev_supported(QEMU_8_2)
    assert len(cells(HOST)) == 1 and len(cells(FOUR_CELLS)) == 4


def test_qemu_upgrade_adds_tpm_and_drops_sev_with_evidence(capsys, old, new):
    status, document = diff_json(capsys, old, new)
    assert status == 1 and document["differences"] is True
    flips = {f["trait"]: f for f in document["traits"]}
    for trait, model in ((os_traits.COMPUTE_SECURITY_TPM_TIS, "tpm-tis"),
                         (os_traits.COMPUTE_SECURITY_TPM_CRB, "tpm-crb")):
        flip = flips[trait]
        assert flip["direction"] == "added"
        assert flip["a"]["status"] != "asserted"
        assert flip["b"]["status"] == "asserted"
        # The evidence on both sides names its own document.
        assert "pc-q35-2.12" in flip["a"]["summary"]
        assert "<tpm>" in flip["a"]["summary"]
        assert "pc-q35-8.2" in flip["b"]["summary"]
        assert model in flip["b"]["summary"]
        assert flip["a"]["evidence"] and flip["b"]["evidence"]
    sev = flips[os_traits.HW_CPU_X86_AMD_SEV]
    assert sev["direction"] == "dropped"
    assert (sev["a"]["status"], sev["b"]["status"]) == (
        "asserted", "unasserted")
    assert "supported" in sev["a"]["summary"]
    assert "unsupported" in sev["b"]["summary"]
    # Same host capabilities: no provider comes or goes, no inventory moves.
    assert all(not p["added"] and not p["removed"] and not p["inventories"]
               for p in document["providers"])


def test_reverse_diff_swaps_the_directions(capsys, old, new):
    _, forward = diff_json(capsys, old, new)
    _, backward = diff_json(capsys, new, old)
    flip = {"added": "dropped", "dropped": "added", "changed": "changed"}
    assert {(f["trait"], flip[f["direction"]]) for f in forward["traits"]} \
        == {(f["trait"], f["direction"]) for f in backward["traits"]}


def test_text_shows_each_flip_with_both_sides(capsys, old, new):
    status, out, _ = run_diff(capsys, old, new)
    assert status == 1
    lines = out.splitlines()
    assert lines[:2] == [f"A: snapshot {old}", f"B: snapshot {new}"]
    at = next(i for i, line in enumerate(lines)
              if line.strip().startswith(os_traits.COMPUTE_SECURITY_TPM_CRB))
    assert "-> asserted" in lines[at]
    assert lines[at + 1].strip().startswith("A: ")
    assert "pc-q35-2.12" in lines[at + 1]
    assert lines[at + 2].strip().startswith("B: ")
    assert "tpm-crb" in lines[at + 2]
    assert any(line.startswith("traits B drops") for line in lines)


def test_same_snapshot_shows_nothing(capsys, old):
    status, out, _ = run_diff(capsys, old, old)
    assert status == 0
    assert out.splitlines()[-1] == "no differences"
    status, document = diff_json(capsys, old, old)
    assert status == 0
    assert document == {"a": f"snapshot {old}", "b": f"snapshot {old}",
                        "differences": False, "providers": [], "traits": []}


def test_other_host_adds_cells_and_changes_inventories(capsys, tmp_path,
                                                       new):
    other = snapshot(tmp_path / "four-cells", FOUR_CELLS, QEMU_8_2)
    status, document = diff_json(capsys, new, other)
    assert status == 1
    by_name = {p["name"].rsplit("_", 1)[-1]: p for p in document["providers"]}
    added = sorted(name for name, p in by_name.items() if p["added"])
    assert added == [f"NUMA{i}" for i in range(1, len(cells(FOUR_CELLS)))]
    vcpu = by_name["NUMA0"]["inventories"][orc.VCPU]
    assert vcpu["old"]["total"] == cells(HOST)[0]
    assert vcpu["new"]["total"] == cells(FOUR_CELLS)[0]
    assert all(p["inventories"][orc.VCPU]["old"] is None
               for name, p in by_name.items() if name in added)


def test_live_side_reads_libvirt(capsys, old):
    status, document = diff_json(capsys, old, "live", "--uri",
                                 "test:///default")
    assert status == 1
    assert document["b"] == "live (test:///default)"
    # test:///default is an i686 host; the snapshot an x86_64 one.
    flips = {f["trait"]: f["direction"] for f in document["traits"]}
    assert flips[os_traits.HW_ARCH_I686] == "added"
    assert flips[os_traits.HW_ARCH_X86_64] == "dropped"
    status, document = diff_json(capsys, "live", "live", "--uri",
                                 "test:///default")
    assert status == 0 and document["differences"] is False


@pytest.mark.parametrize("argv, words", [
    (["/no/such/dir", "live"], "neither `live` nor a snapshot directory"),
    (["OLD", "OLD", "--uri", "test:///default"], "--uri applies to a `live`"),
])
def test_bad_input_exits_2(capsys, old, argv, words):
    status, out, err = run_diff(capsys, *(str(old) if a == "OLD" else a
                                          for a in argv))
    assert status == 2 and out == ""
    assert words in err and "Traceback" not in err


def test_exit_status_through_a_subprocess(old, new):
    def virtdriver(*argv):
        return subprocess.run(
            [sys.executable, "-m", "virtdriver.cli", "diff", *map(str, argv)],
            capture_output=True, text=True, check=False)
    assert virtdriver(old, old).returncode == 0
    different = virtdriver(old, new)
    assert different.returncode == 1
    assert os_traits.COMPUTE_SECURITY_TPM_TIS in different.stdout
