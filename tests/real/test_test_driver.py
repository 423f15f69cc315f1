"""Real libvirt, in process: the built-in ``test:///default`` host."""

from __future__ import annotations

import json

import libvirt
import pytest

from virtdriver import cli
from virtdriver.drivers.libvirt import connection
from virtdriver.drivers.libvirt.connection import TEST_URI, open_connection
from virtdriver.drivers.libvirt.host import Unknown, read_host

pytestmark = pytest.mark.real


def test_json_report_of_test_driver(capsys):
    status = cli.main(["host", "--uri", TEST_URI, "--format", "json"])

    data = json.loads(capsys.readouterr().out)
    assert status == 0
    assert data["uri"] == TEST_URI
    assert data["uri_reason"] == "given with --uri"
    cells = data["host"]["cells"]
    assert len(cells) == 2
    assert sum(len(cell["cpus"]) for cell in cells) == 16
    assert data["domain"]["unknown"] is True
    assert data["domain"]["error_name"] == "VIR_ERR_NO_SUPPORT"
    assert data["domain"]["error_code"] == libvirt.VIR_ERR_NO_SUPPORT


def test_text_report_of_test_driver(capsys):
    status = cli.main(["host", "--uri", TEST_URI])

    out = capsys.readouterr().out
    assert status == 0
    assert "libvirt URI: test:///default\n  why: given with --uri" in out
    assert "cell 0: 2048 MiB, CPUs 0-7" in out
    assert "cell 1: 4096 MiB, CPUs 8-15" in out
    assert "): unknown" in out
    assert "[VIR_ERR_NO_SUPPORT]" in out


def test_read_host_keeps_no_support_apart_from_absent():
    conn, _ = open_connection(TEST_URI)
    try:
        reading = read_host(conn, TEST_URI)
    finally:
        conn.close()

    assert isinstance(reading.domain, Unknown)
    assert "not supported" in reading.domain.reason
    assert reading.host.cpu_ids == frozenset(range(16))
    # The test driver offers only 'test' guests, so no kvm.
    assert reading.virt_type == "qemu"


def test_without_daemon_or_qemu_the_choice_is_the_test_driver(monkeypatch):
    monkeypatch.setattr(connection, "DAEMON_SOCKETS", ("/nonexistent/sock",))
    monkeypatch.setattr(connection, "QEMU_DRIVER_GLOBS", ("/nonexistent/*.so",))

    conn, choice = open_connection()
    try:
        assert conn.getURI() == TEST_URI
    finally:
        conn.close()

    assert choice.uri == TEST_URI
    assert choice.reason.startswith("neither: no libvirt daemon socket")
    assert "no QEMU driver module" in choice.reason


def test_bad_uri_exits_3_naming_it(capsys):
    # libvirt cannot tell an unknown scheme from a daemon that is not there
    # (it tries the daemon's socket), so this is "unreachable": exit 3.
    status = cli.main(["host", "--uri", "nosuchdriver:///x"])

    err = capsys.readouterr().err
    assert status == cli.EXIT_UNREACHABLE
    assert "cannot open libvirt at nosuchdriver:///x" in err
    assert "check the URI" in err


def test_recording_node_devices_reports_progress():
    """`virtdriver snapshot`'s progress bar counts what the recorder
    reads: one call per node device, the last one ``(total, total)``."""
    from virtdriver.drivers.libvirt.recorder import record_host
    conn = libvirt.open("test:///default")
    try:
        seen = []
        documents = record_host(conn, "test:///default",
                                progress=lambda done, total:
                                seen.append((done, total)))
    finally:
        conn.close()
    total = len(documents.node_devices)
    assert total > 1
    assert seen == [(done, total) for done in range(1, total + 1)]
