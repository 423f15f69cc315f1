"""Real libvirt and real QEMU, in process: ``qemu:///embed``.

Skipped when libvirt's QEMU driver or a qemu-system binary is missing,
except under CI, where the bootstrap installs both and a skip would hide
a broken install.
"""

from __future__ import annotations

import json
import os
import pathlib

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
