"""Replaying snapshots that have no CPU map: hand-written ones, and
recorded ones whose manifest says ``"cpu_map": null``.

libvirt did not report online CPUs there, so the driver counts every CPU
the host capabilities list, and says so (facts, evidence, a warning).
"""

from __future__ import annotations

import json
import logging
import pathlib
import shutil

import os_resource_classes as orc
import os_traits
import pytest

from tests.corpus import CORPUS
from virtdriver import cli
from virtdriver.render.host import render_online_cpus
from virtdriver.capabilities import parse_host_capabilities
from virtdriver.drivers.libvirt.driver import NOT_REPORTED
from virtdriver.drivers.libvirt.host import (
    ONLINE_FROM_CAPABILITIES, ONLINE_FROM_CPU_MAP)
from virtdriver.fakelibvirt.snapshot import read_snapshot

HOST = CORPUS / "hostcaps" / "caps-qemu-real-full.xml"
Q35 = CORPUS / "domcaps" / "qemu_8.2.0-q35.x86_64.xml"
DRIVER_LOG = "virtdriver.drivers.libvirt.driver"


@pytest.fixture
def hand_written(corpus_dir, tmp_path):
    """capabilities.xml + domcaps.xml, as docs/snapshots.md describes."""
    root = tmp_path / "by-hand"
    root.mkdir()
    (root / "capabilities.xml").write_text(HOST.read_text())
    (root / "domcaps.xml").write_text(Q35.read_text())
    return root


@pytest.fixture(scope="module")
def recorded_once(tmp_path_factory):
    """test:///default recorded with ``virtdriver snapshot`` (module scope:
    set up before any function fixture swaps fakelibvirt in)."""
    root = tmp_path_factory.mktemp("recorded") / "snapshot"
    assert cli.main(["snapshot", "--uri", "test:///default",
                     "-o", str(root)]) == 0
    return root


@pytest.fixture
def recorded(recorded_once, tmp_path):
    """A copy of the recorded snapshot, for this test to change."""
    return pathlib.Path(shutil.copytree(recorded_once, tmp_path / "recorded"))


def without_cpu_map(root):
    manifest = root / "manifest.json"
    document = json.loads(manifest.read_text())
    document["cpu_map"] = None
    manifest.write_text(json.dumps(document))
    return root


def report(capsys, snapshot, *options):
    status = cli.main(["report", "--snapshot", str(snapshot), *options])
    captured = capsys.readouterr()
    assert status == 0, captured.err
    assert "Traceback" not in captured.err
    return captured.out


def vcpus_per_cell(out):
    """NUMA cell id -> VCPU total, from the report's JSON tree."""
    cells = {}
    for provider in json.loads(out)["providers"]:
        name = provider["name"]
        if "_NUMA" in name:
            vcpu = provider["inventories"].get(orc.VCPU)
            cells[int(name.rsplit("_NUMA", 1)[1])] = (
                vcpu["total"] if vcpu else 0)
    return cells


def capabilities_cpus(root):
    """NUMA cell id -> how many CPUs the snapshot's capabilities list."""
    caps = parse_host_capabilities((root / "capabilities.xml").read_text(),
                                   "capabilities.xml")
    return {cell.id: len(cell.cpu_ids) for cell in caps.cells}


def not_reported_warnings(caplog):
    return [r for r in caplog.records if r.name == DRIVER_LOG
            and r.levelno == logging.WARNING
            and "does not report online CPUs" in r.getMessage()]


def test_hand_written_snapshot_reports_the_capabilities_cpus(
        hand_written, capsys, caplog):
    out = report(capsys, hand_written, "--format", "json")
    expected = capabilities_cpus(hand_written)
    assert sum(expected.values()) > 0, "the comparison is not vacuous"
    assert vcpus_per_cell(out) == expected
    (warning,) = not_reported_warnings(caplog)  # once, not every update
    message = warning.getMessage()
    assert "getCPUMap" in message and "[VIR_ERR_NO_SUPPORT]" in message
    assert "every CPU its host capabilities list" in message


def test_hand_written_snapshot_text_report(hand_written, capsys, caplog):
    out = report(capsys, hand_written)
    assert "_NUMA0" in out and "VCPU" in out
    assert "online CPUs: not reported by libvirt" in out
    assert f"why: replaying snapshot {hand_written}" in out
    assert not_reported_warnings(caplog)


def test_recorded_snapshot_with_a_null_cpu_map(recorded, capsys, caplog):
    manifest = json.loads((recorded / "manifest.json").read_text())
    count, flags, _online = manifest["cpu_map"]
    caps = parse_host_capabilities(
        (recorded / "capabilities.xml").read_text(), "capabilities.xml")
    online = {cpu for cpu in range(count) if flags[cpu]}
    with_map = vcpus_per_cell(report(capsys, recorded, "--format", "json"))
    assert with_map == {c.id: len(c.cpu_ids & online) for c in caps.cells}
    assert not not_reported_warnings(caplog)

    without = vcpus_per_cell(report(capsys, without_cpu_map(recorded),
                                    "--format", "json"))
    assert without == capabilities_cpus(recorded)
    assert without != with_map, "test:///default has offline CPUs"
    assert len(not_reported_warnings(caplog)) == 1


def run_driver(fake_libvirt_host, documents):
    from virtdriver.drivers.libvirt.driver import LibvirtDriver

    driver = LibvirtDriver(uri=fake_libvirt_host(documents, name="replay"))
    driver.init_host("cmp1")
    return driver.node_capabilities("cmp1")


def smt_evidence(node):
    result = node.traits.results[os_traits.HW_CPU_HYPERTHREADING]
    return result.evidence[0].detail


def test_facts_and_evidence_say_where_online_cpus_came_from(
        fakelibvirt, fake_libvirt_host, hand_written):
    node = run_driver(fake_libvirt_host, read_snapshot(hand_written))
    facts = node.facts
    assert facts["online_cpus_source"] == ONLINE_FROM_CAPABILITIES
    assert facts["online_cpus_unknown_reason"] == (
        "this function is not supported by the connection driver: "
        "virNodeGetCPUMap [VIR_ERR_NO_SUPPORT]")
    assert len(facts["online_cpus"]) == sum(
        capabilities_cpus(hand_written).values())
    assert f"({NOT_REPORTED})" in smt_evidence(node)
    line = render_online_cpus(facts)
    assert "online CPUs: not reported by libvirt" in line
    assert "VIR_ERR_NO_SUPPORT" in line
    assert "every CPU the host capabilities list" in line


def test_with_a_cpu_map_the_source_is_libvirt(fakelibvirt, fake_libvirt_host,
                                              recorded):
    node = run_driver(fake_libvirt_host, read_snapshot(recorded))
    assert node.facts["online_cpus_source"] == ONLINE_FROM_CPU_MAP
    assert node.facts["online_cpus_unknown_reason"] is None
    assert "usable CPUs" in smt_evidence(node)
    assert NOT_REPORTED not in smt_evidence(node)
    assert render_online_cpus(node.facts) == ""


def test_other_cpu_map_failures_are_an_error_not_a_traceback(
        fakelibvirt, recorded, capsys):
    fakelibvirt.fail("getCPUMap", error_code=fakelibvirt.VIR_ERR_INTERNAL_ERROR,
                     message="internal error: cannot read the CPU map",
                     repeat=True)
    status = cli.main(["report", "--snapshot", str(recorded)])
    err = capsys.readouterr().err
    assert status == 2
    assert err.startswith("virtdriver: reading the online CPUs from fake:///")
    assert "(getCPUMap) failed: internal error: cannot read the CPU map" in err
    assert "Traceback" not in err
