"""URI-choice helpers of the libvirt connection module (no libvirt calls)."""

from __future__ import annotations

import os
import pwd

import pytest

from virtdriver.drivers.libvirt import connection


def test_state_dir_honours_the_environment(tmp_path, monkeypatch):
    wanted = tmp_path / "state" / "deeper"
    monkeypatch.setenv("VIRTDRIVER_STATE_DIR", str(wanted))

    assert connection.state_dir() == wanted
    assert wanted.is_dir()


def test_embed_uri_names_its_root(tmp_path):
    assert connection.embed_uri(tmp_path) == f"qemu:///embed?root={tmp_path}"


def test_is_socket_refuses_plain_files(tmp_path):
    plain = tmp_path / "plain"
    plain.write_text("")

    assert not connection.is_socket(str(plain))
    assert not connection.is_socket(str(tmp_path / "absent"))


@pytest.fixture
def qemu_user():
    try:
        return pwd.getpwnam(connection.QEMU_USER)
    except KeyError:
        pytest.skip(f"no {connection.QEMU_USER} user (./run setup as root "
                    "creates it)")


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to chown")
@pytest.mark.parametrize("mode, usable", [
    (0o600, False),  # root only: the sandbox /dev/kvm that made us look
    (0o606, True),   # anyone
])
def test_qemu_user_kvm_access_follows_mode_bits(qemu_user, tmp_path, mode,
                                                usable):
    device = tmp_path / "kvm"
    device.write_text("")
    os.chown(device, 0, 0)
    device.chmod(mode)

    assert connection._qemu_user_can_use_kvm(str(device)) is usable


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to chown")
def test_qemu_user_kvm_access_through_its_group(qemu_user, tmp_path):
    device = tmp_path / "kvm"
    device.write_text("")
    os.chown(device, 0, qemu_user.pw_gid)
    device.chmod(0o660)

    assert connection._qemu_user_can_use_kvm(str(device)) is True
