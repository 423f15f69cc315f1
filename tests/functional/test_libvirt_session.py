"""LibvirtSession: caching with invalidation, and re-opening dropped
connections with bounded backoff, against a scripted fake connection."""

from __future__ import annotations

import libvirt
import pytest

from virtdriver.drivers.libvirt.connection import (
    LibvirtConnectionError, URIChoice)
from virtdriver.drivers.libvirt.session import LibvirtSession
from tests.corpus import CORPUS

HOST = (CORPUS / "hostcaps" / "caps-qemu-kvm.xml")
DOMAIN = (CORPUS / "domcaps" / "qemu_8.2.0-q35.x86_64.xml")


def libvirt_error(code, message="boom"):
    # libvirtError takes libvirt's last error of this thread, if any, over
    # ``message``: one an earlier test left (a refused connection) must not
    # become this one's.
    libvirt.virResetLastError()
    exc = libvirt.libvirtError(message)
    exc.err = (code, libvirt.VIR_FROM_RPC, message, 2, None, None, None,
               0, 0)
    return exc


class Conn:
    """Counts calls; ``fail`` maps a method name to errors to raise."""

    def __init__(self, world):
        self.world = world
        self.closed = False

    def _maybe_fail(self, name):
        self.world.calls[name] = self.world.calls.get(name, 0) + 1
        queue = self.world.fail.get(name)
        if queue:
            raise queue.pop(0)

    def getCapabilities(self):
        self._maybe_fail("getCapabilities")
        return HOST.read_text()

    def getDomainCapabilities(self, *args):
        self._maybe_fail("getDomainCapabilities")
        return DOMAIN.read_text()

    def getLibVersion(self):
        self._maybe_fail("getLibVersion")
        return self.world.versions[0]

    def getVersion(self):
        return self.world.versions[1]

    def getCPUMap(self):
        return (4, [True, False, True, True], 3)

    def close(self):
        self.closed = True


class World:
    def __init__(self):
        self.calls = {}
        self.fail = {}
        self.opens = 0
        self.open_failures = 0
        self.versions = (9000000, 7002000)
        self.sleeps = []

    def opener(self, uri):
        self.opens += 1
        if self.open_failures:
            self.open_failures -= 1
            raise LibvirtConnectionError(uri or "fake:///", "refused", "wait")
        return Conn(self), URIChoice(uri or "fake:///", "test")

    def session(self, **kwargs):
        return LibvirtSession("fake:///", opener=self.opener,
                              sleep=self.sleeps.append, **kwargs)


@pytest.fixture
def world(corpus_dir):
    return World()


def test_reading_is_cached_until_invalidated(world):
    session = world.session()
    first = session.reading()
    assert session.reading() is first
    assert world.calls["getCapabilities"] == 1
    session.invalidate()
    assert session.reading() is not first
    assert world.calls["getCapabilities"] == 2


def test_version_change_invalidates(world):
    session = world.session()
    first = session.reading()
    world.versions = (9001000, 7002000)
    second = session.reading()
    assert second is not first and second.libvirt_version == 9001000
    assert world.calls["getCapabilities"] == 2


def test_dropped_connection_is_reopened_with_backoff(world):
    session = world.session(backoff=(0.1, 0.2))
    first = session.reading()
    world.fail["getLibVersion"] = [libvirt_error(libvirt.VIR_ERR_SYSTEM_ERROR,
                                                 "End of file")]
    world.open_failures = 1
    second = session.reading()
    assert world.sleeps == [0.1, 0.2]   # one failed re-open, then success
    assert session.reconnects == 1 and world.opens == 3
    assert second is not first           # reconnect dropped the cache


def test_reopen_gives_up_after_the_backoff_runs_out(world):
    session = world.session(backoff=(0.1, 0.2, 0.4))
    session.reading()
    world.fail["getLibVersion"] = [libvirt_error(libvirt.VIR_ERR_RPC)]
    world.open_failures = 10
    with pytest.raises(LibvirtConnectionError) as info:
        session.reading()
    assert world.sleeps == [0.1, 0.2, 0.4]
    assert "3 attempts to re-open it failed (last: refused)" in str(info.value)
    world.open_failures = 0
    assert session.reading().host.cpu.arch == "x86_64"  # next try recovers


def test_other_errors_are_not_retried(world):
    session = world.session()
    world.fail["getCapabilities"] = [
        libvirt_error(libvirt.VIR_ERR_OPERATION_FAILED, "nope")]
    with pytest.raises(libvirt.libvirtError, match="nope"):
        session.reading()
    assert world.opens == 1 and world.sleeps == []


def test_online_cpus_from_the_cpu_map(world):
    assert world.session().online_cpus() == {0, 2, 3}
