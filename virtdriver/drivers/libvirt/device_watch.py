"""Re-read node devices only when libvirt says one changed.

Reading a host's node devices is one ``XMLDesc`` per device (hundreds on
a GPU or SR-IOV host), and a steady update would repeat it for nothing.
:class:`DeviceWatch` registers for libvirt's node-device events
(``VIR_NODE_DEVICE_EVENT_ID_LIFECYCLE`` — a device plugged, unplugged, an
mdev created or removed — and ``VIR_NODE_DEVICE_EVENT_ID_UPDATE``) on the
driver's connection, and says an update may keep the devices it read
last only while all of these hold:

* the callbacks are registered on the connection now in use (a new
  connection after a reconnect registers again and reads);
* the devices were read from that connection (not from a node-device
  daemon the driver fell back to, whose events it does not hear), and
  were known (an unknown reading is tried again every update);
* no event arrived since the last reading began (an event during a
  reading makes the next update read again);
* the last reading is younger than ``max_age`` seconds — the safety net
  for an event libvirt does not send.

Anything else — a connection without node-device events (fakelibvirt
before them, an old libvirt), a registration that fails — reads every
update, as before.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

import libvirt

LOG = logging.getLogger(__name__)

#: Seconds a reading may be kept without a new one, events or not.
MAX_AGE = 300.0
#: The node-device event ids watched: lifecycle, then update (libvirt's
#: values, used when the binding lacks a name).
_EVENTS = (("VIR_NODE_DEVICE_EVENT_ID_LIFECYCLE", 0),
           ("VIR_NODE_DEVICE_EVENT_ID_UPDATE", 1))


class DeviceWatch:
    """Whether the next update must read node devices again (module doc).

    Args:
        max_age: seconds after which a reading is never kept.
        clock: monotonic seconds (tests pass their own).
    """

    def __init__(self, *, max_age: float = MAX_AGE,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._max_age = max_age
        self._clock = clock
        self._lock = threading.Lock()
        self._conn: Any = None
        self._ids: list[int] = []
        self._watching = False
        self._changed = True
        self._read_at: float | None = None

    def needs_read(self, conn: Any, uri: str, devices: Any) -> bool:
        """Whether devices must be read again, given the connection in
        use (``conn``, opened at ``uri``) and the last reading
        (``devices``: a ``HostDevices``/``DevicesUnknown``, or ``None``)."""
        if conn is not self._conn:
            self._register(conn)
        with self._lock:
            fresh = (self._read_at is not None
                     and self._clock() - self._read_at < self._max_age)
            return not (self._watching and fresh and not self._changed
                        and devices is not None and devices.known
                        and devices.source == uri)

    @property
    def watching(self) -> bool:
        """Whether libvirt's node-device events are heard now."""
        return self._watching

    def reading(self) -> None:
        """A reading begins now: events from now on count against it."""
        with self._lock:
            self._changed = False
            self._read_at = self._clock()

    def close(self) -> None:
        """Deregister from the connection (when it is still open)."""
        conn, ids = self._conn, self._ids
        self._conn, self._ids, self._watching = None, [], False
        for callback in ids:
            try:
                conn.nodeDeviceEventDeregisterAny(callback)
            except (libvirt.libvirtError, AttributeError):
                pass  # closed or gone: nothing left to deregister

    def _changed_now(self, *_args: Any) -> None:
        with self._lock:
            self._changed = True

    def _register(self, conn: Any) -> None:
        self.close()
        self._conn = conn
        with self._lock:
            self._changed = True
        try:
            for name, value in _EVENTS:
                self._ids.append(conn.nodeDeviceEventRegisterAny(
                    None, getattr(libvirt, name, value), self._changed_now,
                    None))
        except (libvirt.libvirtError, AttributeError) as exc:
            LOG.debug("no node-device events on this connection (%s): "
                      "devices are read every update", exc)
            self.close()
            self._conn = conn  # do not try again on this connection
            return
        self._watching = True
