"""A libvirt connection that survives drops, and a cache of what it read.

:class:`LibvirtSession` opens the URI on first use, re-opens it with a
bounded backoff when libvirt reports the connection gone, and caches the
host reading until it is invalidated: on reconnect, when libvirt's or the
hypervisor's version changes, or on request.  Nothing is cached for the
life of the process.  Node devices change more often (hot-plug, mdevs):
``reading(fresh_devices=True)`` re-reads them, once per update.
"""

from __future__ import annotations

import logging
import dataclasses
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import libvirt

from virtdriver.capabilities.traits.config import TraitConfig
from virtdriver.drivers.libvirt.connection import (
    LibvirtConnectionError, URIChoice, open_connection)
from virtdriver.drivers.libvirt.devices import DeviceParseCache, read_devices
from virtdriver.drivers.libvirt.host import (
    HostReading, Unknown, read_host, unknown_from)

LOG = logging.getLogger(__name__)
T = TypeVar("T")

#: libvirt errors that mean "the connection is gone", not "the call failed".
CONNECTION_LOST = frozenset({
    libvirt.VIR_ERR_SYSTEM_ERROR, libvirt.VIR_ERR_RPC,
    libvirt.VIR_ERR_NO_CONNECT, libvirt.VIR_ERR_INVALID_CONN,
})
#: Seconds to wait before each re-open attempt; its length bounds them.
DEFAULT_BACKOFF = (0.5, 1.0, 2.0, 4.0)

Opener = Callable[[str | None], tuple[Any, URIChoice]]


def is_connection_lost(exc: libvirt.libvirtError) -> bool:
    """Whether ``exc`` says the connection dropped (so re-opening helps)."""
    return exc.get_error_code() in CONNECTION_LOST


class LibvirtSession:
    """One host's libvirt connection and its cached reading.

    Args:
        uri: the URI to open; ``None`` chooses one (see
            :func:`~virtdriver.drivers.libvirt.connection.open_connection`).
        config: the configuration readings are taken with.
        opener: opens a URI (tests pass fakes).
        backoff: waits before each re-open attempt after a drop.
        sleep: how to wait (tests pass a recorder).
        nodedev_uri: where to read node devices when the URI has no
            node-device API (``None``: the default daemon's, see
            :func:`~virtdriver.drivers.libvirt.devices.read_devices`).
    """

    def __init__(self, uri: str | None = None, *,
                 config: TraitConfig | None = None,
                 opener: Opener = open_connection,
                 backoff: Sequence[float] = DEFAULT_BACKOFF,
                 sleep: Callable[[float], None] = time.sleep,
                 nodedev_uri: str | None = None) -> None:
        self._uri = uri
        self._config = config or TraitConfig()
        self._opener = opener
        self._backoff = tuple(backoff)
        self._sleep = sleep
        self._lock = threading.RLock()
        self._conn: Any = None
        self._choice: URIChoice | None = None
        self._reading: HostReading | None = None
        self._versions: tuple[int | None, int | None] | None = None
        self._nodedev_uri = nodedev_uri or None
        self._device_cache = DeviceParseCache()
        self._devices_fresh = False  # the reading's devices not yet used
        self.reconnects = 0

    @property
    def choice(self) -> URIChoice:
        """The URI in use and why it was chosen (opens if needed)."""
        with self._lock:
            self._connection()
            assert self._choice is not None
            return self._choice

    def invalidate(self) -> None:
        """Forget the cached reading; the next read asks libvirt again."""
        with self._lock:
            self._reading = None

    def reading(self, *, fresh_devices: bool = False) -> HostReading:
        """The host reading: cached until invalidated or versions change.

        ``fresh_devices``: node devices as they are now (an update asks
        for it once): read again unless the reading was just taken.
        """
        with self._lock:
            versions = self.call(lambda c: (c.getLibVersion(), c.getVersion()))
            if self._reading is not None and versions != self._versions:
                LOG.info("libvirt/hypervisor version changed from %s to %s; "
                         "re-reading the host", self._versions, versions)
                self._reading = None
            if self._reading is None:
                self._reading = self.call(
                    lambda c: read_host(c, self.choice.uri, self._config,
                                        devices=self._read_devices))
                self._versions = versions
                self._devices_fresh = True
            elif fresh_devices and not self._devices_fresh:
                self._reading = dataclasses.replace(
                    self._reading, devices=self.call(
                        lambda c: self._read_devices(c, self.choice.uri)))
            if fresh_devices:
                self._devices_fresh = False
            return self._reading

    def _read_devices(self, conn: Any, uri: str):
        return read_devices(conn, uri, nodedev_uri=self._nodedev_uri,
                            cache=self._device_cache)

    def online_cpus(self) -> frozenset[int] | Unknown:
        """Online host CPUs, from ``getCPUMap`` (never cached).

        :class:`Unknown` when libvirt does not report them: its driver for
        the URI has no ``getCPUMap`` (``VIR_ERR_NO_SUPPORT``, as a replayed
        snapshot without a CPU map answers too).

        Raises:
            libvirt.libvirtError: ``getCPUMap`` failed otherwise.
        """
        try:
            _count, cpumap, _online = self.call(lambda c: c.getCPUMap())
        except libvirt.libvirtError as exc:
            if exc.get_error_code() != libvirt.VIR_ERR_NO_SUPPORT:
                raise
            return unknown_from(exc)
        return frozenset(i for i, online in enumerate(cpumap) if online)

    def call(self, fn: Callable[[Any], T]) -> T:
        """Run ``fn(connection)``; on a dropped connection re-open (with
        backoff) and run it once more."""
        with self._lock:
            conn = self._connection()
            try:
                return fn(conn)
            except libvirt.libvirtError as exc:
                if not is_connection_lost(exc):
                    raise
                LOG.warning("libvirt connection to %s lost (%s); re-opening",
                            self._choice.uri if self._choice else self._uri,
                            exc.get_error_message())
            self._drop()
            return fn(self._reopen())

    def close(self) -> None:
        """Close the connection (the next call opens it again)."""
        with self._lock:
            self._drop()

    def _connection(self) -> Any:
        if self._conn is None:
            self._conn, self._choice = self._opener(self._uri)
        return self._conn

    def _drop(self) -> None:
        conn, self._conn = self._conn, None
        self._reading = None
        if conn is not None:
            try:
                conn.close()
            except libvirt.libvirtError:
                pass  # already gone; nothing left to release

    def _reopen(self) -> Any:
        uri = self._choice.uri if self._choice else self._uri
        last: Exception | None = None
        for attempt, wait in enumerate(self._backoff, start=1):
            self._sleep(wait)
            try:
                self._conn, self._choice = self._opener(uri)
            except LibvirtConnectionError as exc:
                last = exc
                LOG.warning("re-opening %s, attempt %d of %d: %s", uri,
                            attempt, len(self._backoff), exc.detail)
                continue
            self.reconnects += 1
            return self._conn
        raise LibvirtConnectionError(
            uri or "libvirt", f"connection lost and {len(self._backoff)} "
            f"attempts to re-open it failed (last: "
            f"{getattr(last, 'detail', last)})",
            "check that libvirt is running; the next update tries again")
