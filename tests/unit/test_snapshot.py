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


# -- size limit: refused by the file's size, before any read ---------------

GIB2 = 2 * 1024 ** 3


def sparse(path, size):
    """A file of ``size`` bytes that takes no disk space (and no time)."""
    with open(path, "wb") as handle:
        handle.truncate(size)
    return path


@pytest.mark.parametrize("name", ["capabilities.xml", "domcaps-q35.xml"])
def test_a_2_gib_hand_written_file_is_refused_unread(name, corpus_dir,
                                                     tmp_path, opened):
    (tmp_path / "capabilities.xml").write_text((corpus_dir / HOST).read_text())
    big = sparse(tmp_path / name, GIB2)
    opened.clear()
    with pytest.raises(SnapshotError) as info:
        read_snapshot(tmp_path)
    message = str(info.value)
    assert str(big) in message
    assert "2147483648 bytes (2 GiB)" in message
    assert "limit of 16777216 bytes (16 MiB)" in message
    assert "record the host again" in message  # what to do
    assert str(big) not in opened  # refused by its size: never opened
    if name != "capabilities.xml":  # the spy does see what is read
        assert str(tmp_path / "capabilities.xml") in opened


@pytest.mark.parametrize("entry", ["capabilities", "domcaps", "nodedev",
                                   "manifest"])
def test_oversized_files_a_manifest_lists_are_refused_unread(
        entry, documents, tmp_path, opened):
    manifest = write_snapshot(tmp_path, documents, "qemu:///x")
    listed = json.loads(manifest.read_text())
    big = {"capabilities": tmp_path / listed["capabilities"],
           "domcaps": tmp_path / listed["domain_capabilities"][0]["file"],
           "nodedev": tmp_path / listed["node_devices"][0]["file"],
           "manifest": manifest}[entry]
    big.unlink()
    sparse(big, 16 * 1024 ** 2 + 1)  # one byte over
    opened.clear()
    with pytest.raises(SnapshotError) as info:
        read_snapshot(tmp_path)
    assert f"{big}: document is 16777217 bytes" in str(info.value)
    if entry != "manifest":  # and which manifest entry listed it
        assert str(info.value).startswith(f"{manifest}: ")
        assert str(manifest) in opened  # the spy does see what is read
    assert str(big) not in opened


def test_a_file_growing_after_the_size_check_is_read_only_to_the_limit(
        monkeypatch, corpus_dir, tmp_path):
    from virtdriver.fakelibvirt import snapshot

    xml = (corpus_dir / HOST).read_bytes()
    (tmp_path / "capabilities.xml").write_bytes(xml)
    limit = len(xml) - 1
    monkeypatch.setattr(snapshot, "DEFAULT_MAX_BYTES", limit)
    real_stat = type(tmp_path).stat
    monkeypatch.setattr(  # the size stat sees, before the file grew
        type(tmp_path), "stat",
        lambda self, **kw: os_stat_with_size(real_stat(self, **kw), 10))
    with pytest.raises(SnapshotError,
                       match=f"document is {limit + 1} bytes, over the "
                             f"limit of {limit} bytes"):
        read_snapshot(tmp_path)


def os_stat_with_size(result, size):
    import os
    fields = list(result)
    fields[6] = size  # st_size
    return os.stat_result(fields)


def test_a_fifo_is_refused_without_opening_it(corpus_dir, tmp_path, opened):
    import os

    os.mkfifo(tmp_path / "capabilities.xml")  # open() would block forever
    with pytest.raises(SnapshotError, match="is not a regular file"):
        read_snapshot(tmp_path)
    assert str(tmp_path / "capabilities.xml") not in opened


def test_a_manifest_without_a_cpu_map_reads_as_none(documents, tmp_path):
    manifest = write_snapshot(tmp_path, documents, "qemu:///x")
    listed = json.loads(manifest.read_text())
    listed["cpu_map"] = None
    manifest.write_text(json.dumps(listed))
    assert read_snapshot(tmp_path).cpu_map is None


def test_the_recorded_host_and_disk_round_trip(documents, tmp_path):
    import dataclasses
    recorded = dataclasses.replace(documents, compute_host="compute-7",
                                   disk_gb=930)
    write_snapshot(tmp_path / "snap", recorded, "qemu:///x")
    assert read_snapshot(tmp_path / "snap") == recorded


@pytest.mark.parametrize("field, value, message", [
    ("host", 7, "host must be a host name"),
    ("host", "", "host must be a host name"),
    ("disk_gb", -1, "disk_gb must be a whole number of GiB"),
    ("disk_gb", 1.5, "disk_gb must be a whole number of GiB"),
    ("disk_gb", True, "disk_gb must be a whole number of GiB"),
])
def test_a_bad_recorded_host_or_disk_is_refused(documents, tmp_path, field,
                                                value, message):
    manifest = write_snapshot(tmp_path / "snap", documents, "qemu:///x")
    data = json.loads(manifest.read_text())
    data[field] = value
    manifest.write_text(json.dumps(data))
    with pytest.raises(SnapshotError, match=message):
        read_snapshot(tmp_path / "snap")
