"""Real libvirt and real QEMU, in process: ``qemu:///embed``.

Skipped when libvirt's QEMU driver or a qemu-system binary is missing,
except under CI, where the bootstrap installs both and a skip would hide
a broken install.
"""

from __future__ import annotations

import fcntl
import json
import os
import pathlib
import subprocess
import sys

import pytest

from virtdriver import cli
from virtdriver.cpuset import parse_cpuset
from virtdriver.drivers.libvirt import connection
from virtdriver.drivers.libvirt.host import Unknown

pytestmark = pytest.mark.real


def test_domain_caps_list_what_qemu_offers(reading):
    domain = reading.domain

    assert not isinstance(domain, Unknown), domain
    assert domain.arch == reading.arch
    assert domain.virt_type == reading.virt_type
    assert domain.machine, "libvirt names the default machine type"
    assert domain.path and os.path.basename(domain.path).startswith(
        "qemu-system-")
    assert "virtio" in domain.disk_buses
    assert "virtio" in domain.video_models
    if reading.arch == "x86_64":
        assert {"ide", "sata", "scsi", "usb"} <= set(domain.disk_buses)


def test_host_cpus_are_the_online_cpus(reading):
    online = pathlib.Path("/sys/devices/system/cpu/online")
    if not online.exists():
        pytest.skip(f"{online} not present")

    assert reading.host.cpu_ids == parse_cpuset(online.read_text())
    assert reading.host.cells, "libvirt reports at least one NUMA cell"


def test_virt_type_is_kvm_exactly_when_kvm_is_usable(reading):
    usable = os.access("/dev/kvm", os.R_OK | os.W_OK)

    assert reading.virt_type == ("kvm" if usable else "qemu")


def test_default_uri_without_daemon_is_embed(embed_uri, capsys):
    if any(connection.is_socket(s) for s in connection.DAEMON_SOCKETS):
        pytest.skip("a libvirt daemon socket exists; it would be chosen")

    status = cli.main(["host", "--format", "json"])

    data = json.loads(capsys.readouterr().out)
    assert status == 0
    assert data["uri"] == embed_uri
    assert data["uri_reason"].startswith(
        "no libvirt daemon socket; QEMU driver installed")
    assert "virtio" in data["domain"]["summary"]["disk_buses"]


PID_FILE_PROBE = """\
import fcntl, os, sys
fd = os.open(sys.argv[1], os.O_RDWR)
try:
    fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, 0)
except OSError:
    print("locked")
else:
    print("free")
"""


def test_the_embed_root_stays_held_after_its_connection_closes(reading,
                                                               embed_uri):
    # ``reading`` opened the root and closed its connection.  libvirt keeps
    # the root's pid file until this process exits, which is why virtdriver
    # keeps <root>.lock as long; if libvirt ever lets go on close, this
    # fails and the lock may then end with the connection.
    root = connection.embed_root(embed_uri)
    probe = subprocess.run(
        [sys.executable, "-c", PID_FILE_PROBE,
         str(root / connection.EMBED_PID_FILE)],
        capture_output=True, text=True, check=True)
    lock = os.open(connection.embed_lock_path(root), os.O_RDWR)
    try:
        with pytest.raises(BlockingIOError):
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    finally:
        os.close(lock)

    assert probe.stdout == "locked\n"
    assert f"pid {os.getpid()} " in connection.embed_lock_path(root).read_text()
