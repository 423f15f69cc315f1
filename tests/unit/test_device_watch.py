"""When an update may keep the node devices it read last: only while
libvirt's node-device events say nothing changed, on the connection the
devices were read from, and not for longer than max_age."""

from __future__ import annotations

import libvirt
import pytest

from virtdriver.capabilities.devices.model import DevicesUnknown, HostDevices
from virtdriver.drivers.libvirt.device_watch import DeviceWatch

URI = "qemu:///system"


class Conn:
    """A connection that takes node-device callbacks (or refuses)."""

    def __init__(self, refuse: bool = False) -> None:
        self.refuse = refuse
        self.callbacks: dict[int, object] = {}

    def nodeDeviceEventRegisterAny(self, dev, event, cb, opaque):  # noqa: N802
        if self.refuse:
            raise libvirt.libvirtError("this function is not supported")
        self.callbacks[len(self.callbacks)] = (event, cb)
        return len(self.callbacks) - 1

    def nodeDeviceEventDeregisterAny(self, callback):  # noqa: N802
        del self.callbacks[callback]

    def fire(self):
        for _event, cb in list(self.callbacks.values()):
            cb(self, None, 0, 0, None)


class Clock:
    now = 100.0

    def __call__(self):
        return self.now


@pytest.fixture
def clock():
    return Clock()


def read(watch, conn, clock, devices):
    """One update: ask, and read when told to; the devices it holds."""
    if watch.needs_read(conn, URI, devices):
        watch.reading()
        return HostDevices.build(source=URI), True
    return devices, False


def test_keeps_the_reading_until_an_event(clock):
    watch, conn = DeviceWatch(clock=clock), Conn()
    devices, did = read(watch, conn, clock, None)
    assert did and len(conn.callbacks) == 2  # lifecycle and update
    devices, did = read(watch, conn, clock, devices)
    assert not did
    conn.fire()
    devices, did = read(watch, conn, clock, devices)
    assert did
    assert not read(watch, conn, clock, devices)[1]


def test_an_event_during_a_reading_counts_against_it(clock):
    watch, conn = DeviceWatch(clock=clock), Conn()
    assert watch.needs_read(conn, URI, None)
    watch.reading()
    conn.fire()  # while the devices are being read
    assert watch.needs_read(conn, URI, HostDevices.build(source=URI))


def test_max_age_reads_anyway(clock):
    watch, conn = DeviceWatch(clock=clock, max_age=60), Conn()
    devices, _ = read(watch, conn, clock, None)
    clock.now += 59
    assert not read(watch, conn, clock, devices)[1]
    clock.now += 2
    assert read(watch, conn, clock, devices)[1]


@pytest.mark.parametrize("devices", [
    None, DevicesUnknown("listing failed"),
    HostDevices.build(source="nodedev:///system")])
def test_unknown_missing_or_read_elsewhere_is_read(clock, devices):
    watch, conn = DeviceWatch(clock=clock), Conn()
    read(watch, conn, clock, None)
    assert watch.needs_read(conn, URI, devices)


def test_a_new_connection_registers_and_reads(clock):
    watch, first = DeviceWatch(clock=clock), Conn()
    devices, _ = read(watch, first, clock, None)
    second = Conn()
    assert read(watch, second, clock, devices)[1]
    assert not first.callbacks and len(second.callbacks) == 2


def test_without_events_every_update_reads(clock):
    watch, conn = DeviceWatch(clock=clock), Conn(refuse=True)
    devices, _ = read(watch, conn, clock, None)
    for _ in range(3):
        devices, did = read(watch, conn, clock, devices)
        assert did
