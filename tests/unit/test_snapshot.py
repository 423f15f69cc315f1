"""Snapshot directories: written, read back, written by hand, refused."""

from __future__ import annotations

import json
from types import MappingProxyType

import pytest

from virtdriver.fakelibvirt.documents import (
    DomainCapsKey, HostDocuments, RecordedError)
from virtdriver.fakelibvirt.snapshot import (
    SnapshotError, read_snapshot, write_snapshot)

HOST = "hostcaps/caps-qemu-real-full.xml"
Q35 = "domcaps/qemu_8.2.0-q35.x86_64.xml"
I440FX = "domcaps/qemu_4.2.0.x86_64.xml"


@pytest.fixture
def documents(corpus_dir):
    return HostDocuments(
        capabilities=(corpus_dir / HOST).read_text(),
        domain_capabilities=MappingProxyType({
            DomainCapsKey("x86_64", "kvm"): (corpus_dir / I440FX).read_text(),
            DomainCapsKey("x86_64", "kvm", "q35"):
                (corpus_dir / Q35).read_text()}),
        domain_capabilities_errors=MappingProxyType({
            DomainCapsKey("aarch64", "kvm"): RecordedError(
                3, 20, "this function is not supported")}),
        cpu_map=(4, (True, False, True, True), 3), lib_version=9000000,
        version=7002000, hostname="cmp1",
        node_devices=MappingProxyType({"pci_0000_00_02_0": "<device/>"}))


def test_round_trip(documents, tmp_path):
    manifest = write_snapshot(tmp_path / "snap", documents, "qemu:///x")
    assert json.loads(manifest.read_text())["uri"] == "qemu:///x"
    assert read_snapshot(tmp_path / "snap") == documents


def test_hand_written_snapshot(corpus_dir, tmp_path):
    (tmp_path / "capabilities.xml").write_text((corpus_dir / HOST).read_text())
    (tmp_path / "domcaps-q35.xml").write_text((corpus_dir / Q35).read_text())
    documents = read_snapshot(tmp_path)
    assert set(documents.domain_capabilities) == {
        DomainCapsKey("x86_64", "kvm"),
        DomainCapsKey("x86_64", "kvm", "pc-q35-8.2")}
    assert documents.cpu_map is None  # missing: unknown, not absent
    assert documents.domain_capabilities_errors == {}


@pytest.mark.parametrize("manifest, message", [
    ("{", "not readable JSON"),
    ('{"format": "other"}', "not a virtdriver-snapshot manifest"),
    ('{"format": "virtdriver-snapshot", "version": 7}',
     "version 7 is not supported"),
    ('{"format": "virtdriver-snapshot", "version": 1, '
     '"domain_capabilities": [{"arch": "x86_64"}]}',
     "domain_capabilities[0]: needs arch and virt_type"),
    ('{"format": "virtdriver-snapshot", "version": 1, '
     '"capabilities": "../../etc/passwd"}', "outside the snapshot directory"),
    ('{"format": "virtdriver-snapshot", "version": 1, '
     '"capabilities": "missing.xml"}', "cannot read"),
    ('{"format": "virtdriver-snapshot", "version": 1, '
     '"cpu_map": [3, [true], 1]}', "cpu_map must be"),
])
def test_broken_manifests_name_the_file(manifest, message, tmp_path):
    (tmp_path / "manifest.json").write_text(manifest)
    with pytest.raises(SnapshotError) as info:
        read_snapshot(tmp_path)
    assert str(info.value).startswith(str(tmp_path / "manifest.json"))
    assert message in str(info.value)


def test_hostile_xml_in_a_snapshot_is_refused(tmp_path):
    (tmp_path / "capabilities.xml").write_text(
        '<!DOCTYPE x [<!ENTITY e SYSTEM "file:///etc/passwd">]>'
        "<capabilities>&e;</capabilities>")
    with pytest.raises(SnapshotError) as info:
        read_snapshot(tmp_path)
    assert "capabilities.xml" in str(info.value)
    assert "DTD" in str(info.value)


def test_missing_directory_and_empty_directory(tmp_path):
    with pytest.raises(SnapshotError, match="not a snapshot directory"):
        read_snapshot(tmp_path / "nope")
    with pytest.raises(SnapshotError, match="needs at least "
                                            "capabilities.xml"):
        read_snapshot(tmp_path)
