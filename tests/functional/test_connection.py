"""URI-choice helpers of the libvirt connection module (no libvirt calls)."""

from __future__ import annotations

import contextlib
import fcntl
import os
import pathlib
import pwd
import subprocess
import sys
import threading
import time

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


def test_embed_root_reads_the_uri(tmp_path):
    assert connection.embed_root(connection.embed_uri(tmp_path)) == tmp_path
    assert connection.embed_root("qemu:///embed?root=/a%20b&x=1") == \
        pathlib.Path("/a b")
    assert connection.embed_root("qemu:///system") is None
    assert connection.embed_root("test:///default") is None
    assert connection.embed_root("qemu:///embed") is None


def test_the_embed_lock_is_beside_the_root(tmp_path):
    assert connection.embed_lock_path(tmp_path / "embed") == \
        tmp_path / "embed.lock"


# Opening an embed root from here: libvirt is never called (its open is
# replaced by a recorder) and the choice is forced to qemu:///embed.

class FakeOpen:
    """Stands in for libvirt.open: records URIs, returns or raises."""

    def __init__(self, result=None):
        self.uris: list[str] = []
        self.result = result

    def __call__(self, uri):
        self.uris.append(uri)
        if isinstance(self.result, Exception):
            raise self.result
        return self.result


@pytest.fixture
def libvirt_open(monkeypatch):
    fake = FakeOpen(result=object())
    monkeypatch.setattr(connection.libvirt, "open", fake)
    monkeypatch.setattr(connection, "ensure_event_loop", lambda: None)
    # Holds taken here end with the test instead of with the process.
    monkeypatch.setattr(connection, "_embed_held", {})
    return fake


@pytest.fixture
def embed_chosen(monkeypatch, tmp_path):
    monkeypatch.setattr(connection, "is_socket", lambda _path: False)
    monkeypatch.setattr(connection, "find_qemu_driver",
                        lambda: "/fake/libvirt_driver_qemu.so")
    monkeypatch.setattr(connection, "find_qemu_binary",
                        lambda: "/fake/qemu-system-x86_64")
    monkeypatch.setenv("VIRTDRIVER_STATE_DIR", str(tmp_path / "state"))
    return tmp_path / "state" / "embed"


@contextlib.contextmanager
def held_by_other(lock_path, holder="pid 4242 (virtdriver report)"):
    """flock ``lock_path`` on a descriptor of our own, as another process
    would (flock locks conflict between open file descriptions)."""
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(lock_path, os.O_RDWR | os.O_CREAT)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        os.write(fd, f"{holder} since 2026-01-01T00:00:00\n".encode())
        yield
    finally:
        os.close(fd)


def is_locked(lock_path) -> bool:
    fd = os.open(lock_path, os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    return False


def test_a_held_embed_root_times_out_naming_the_holder(libvirt_open,
                                                       embed_chosen):
    root = embed_chosen
    with held_by_other(connection.embed_lock_path(root)):
        started = time.monotonic()
        with pytest.raises(connection.LibvirtConnectionError) as caught:
            connection.open_connection(lock_timeout=0.3)
        waited = time.monotonic() - started

    message = str(caught.value)
    assert message.startswith(
        f"cannot open libvirt at qemu:///embed?root={root}: the libvirt "
        f"embed root {root} is locked ({root}.lock, held by pid 4242 "
        "(virtdriver report) since 2026-01-01T00:00:00); waited 0.3 s. "
        "Wait for that process to finish or stop it, then run again")
    assert "own embed root" in message
    assert "install" not in message
    assert waited >= 0.3
    assert libvirt_open.uris == []
    assert not root.exists(), "the root was left alone"


def test_an_explicit_embed_uri_takes_the_lock_too(libvirt_open, tmp_path):
    root = tmp_path / "given"
    with held_by_other(connection.embed_lock_path(root)):
        with pytest.raises(connection.LibvirtConnectionError) as caught:
            connection.open_connection(connection.embed_uri(root),
                                       lock_timeout=0.1)

    assert f"the libvirt embed root {root} is locked" in str(caught.value)
    assert libvirt_open.uris == []


def test_other_uris_take_no_lock(libvirt_open, tmp_path, monkeypatch):
    monkeypatch.setattr(connection, "embed_lock_path",
                        lambda _root: pytest.fail("locked a non-embed URI"))

    connection.open_connection("test:///default")

    assert libvirt_open.uris == ["test:///default"]


def test_the_embed_root_is_held_once_released_and_then_kept(libvirt_open,
                                                            embed_chosen):
    root = embed_chosen
    lock = connection.embed_lock_path(root)
    release = threading.Event()

    def other_process():
        with held_by_other(lock):
            release.wait(60)

    other = threading.Thread(target=other_process)
    other.start()
    while not (lock.exists() and is_locked(lock)):
        time.sleep(0.01)
    threading.Timer(0.3, release.set).start()

    conn, choice = connection.open_connection(lock_timeout=60)
    other.join()

    assert conn is libvirt_open.result
    assert choice.uri == connection.embed_uri(root)
    assert libvirt_open.uris == [choice.uri]
    # libvirt keeps the root's pid file until this process exits, so the
    # lock stays held after the open; a second open does not wait for it.
    assert is_locked(lock)
    assert f"pid {os.getpid()} " in lock.read_text()
    connection.open_connection(lock_timeout=0)
    assert libvirt_open.uris == [choice.uri] * 2


PID_FILE_HOLDER = """\
import fcntl, os, sys
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT)
fcntl.lockf(fd, fcntl.LOCK_EX, 1, 0)
os.write(fd, b"%d\\n" % os.getpid())
print("ready", flush=True)
sys.stdin.read()
"""


@pytest.fixture
def foreign_holder(embed_chosen):
    """A process that is not virtdriver holding libvirt's pid file in the
    root, the way libvirt's embedded QEMU driver does."""
    pid_file = embed_chosen / connection.EMBED_PID_FILE
    pid_file.parent.mkdir(parents=True)
    holder = subprocess.Popen(
        [sys.executable, "-c", PID_FILE_HOLDER, str(pid_file), "holder"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline() == "ready\n"
        yield holder, pid_file
    finally:
        holder.stdin.close()
        holder.wait(10)


def test_a_foreign_pid_file_holder_is_named_and_libvirt_not_called(
        libvirt_open, embed_chosen, foreign_holder):
    holder, pid_file = foreign_holder

    with pytest.raises(connection.LibvirtConnectionError) as caught:
        connection.open_connection(lock_timeout=0.3)

    message = str(caught.value)
    assert (f"another process holds the embed root {embed_chosen}: "
            f"libvirt's pid file {pid_file} is locked by pid {holder.pid} "
            f"({sys.executable} -c ") in message
    assert "\n  wait for that process to finish or stop it" in message
    assert "install" not in message
    assert libvirt_open.uris == []
    # Nothing was opened, so the process may try again: the lock is free.
    assert not is_locked(connection.embed_lock_path(embed_chosen))


def test_libvirts_pid_file_error_says_who_not_reinstall(libvirt_open,
                                                        tmp_path):
    root = tmp_path / "embed"
    pid_file = root / "run" / "qemu" / "driver.pid"
    libvirt_open.result = connection.libvirt.libvirtError(
        f"Failed to acquire pid file '{pid_file}': Resource temporarily "
        "unavailable")

    with pytest.raises(connection.LibvirtConnectionError) as caught:
        connection.open_connection(connection.embed_uri(root))

    message = str(caught.value)
    assert (f"another process holds the embed root {root}: libvirt's pid "
            f"file {pid_file} is locked") in message
    assert "install" not in message
    assert libvirt_open.uris == [connection.embed_uri(root)]


def test_an_unusable_state_dir_is_a_connection_error(libvirt_open,
                                                     embed_chosen, tmp_path,
                                                     monkeypatch):
    plain = tmp_path / "plain"
    plain.write_text("")
    monkeypatch.setenv("VIRTDRIVER_STATE_DIR", str(plain))

    with pytest.raises(connection.LibvirtConnectionError) as caught:
        connection.open_connection()

    assert str(caught.value) == (
        f"cannot open libvirt at qemu:///embed: the state directory {plain} "
        "(from $VIRTDRIVER_STATE_DIR) exists and is not a directory\n"
        f"  point $VIRTDRIVER_STATE_DIR at a directory you may write, or "
        "unset it")
    assert libvirt_open.uris == []

