"""Read the host's node devices through libvirt's node-device API.

One reading is ``listAllDevices(0)`` and ``XMLDesc(0)`` of each device,
parsed by :mod:`virtdriver.capabilities.devices` into a
:class:`~virtdriver.capabilities.devices.HostDevices`, or — whenever the
answer is not complete — a
:class:`~virtdriver.capabilities.devices.DevicesUnknown` saying why.  Never
"no device" for "could not ask":

* The connection has no node-device API (``qemu:///embed`` answers
  ``VIR_ERR_NO_SUPPORT``): the devices are read from a node-device daemon
  instead, ``[libvirt] nodedev_uri`` or else ``nodedev:///system`` (root)
  / ``nodedev:///session``; if none answers, unknown.
* Any other libvirt error, on the listing or on one device's XML, and any
  document that does not parse: unknown.
* A device listed and gone before its XML is read
  (``VIR_ERR_NO_NODE_DEVICE``, twice: once on the listed handle, once
  looked up again by name) was hot-unplugged during the reading: it is
  left out and named in :attr:`HostDevices.vanished`; the rest of the
  listing stands.  That is what a listing a moment later would say.

Parsed documents are kept by name with their XML
(:class:`DeviceParseCache`), so the steady cycle re-parses only devices
whose XML changed.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from typing import Any

import libvirt

from virtdriver.capabilities.devices import DevicesReading, DevicesUnknown
from virtdriver.capabilities.devices.parser import (
    NodeDevice, collect_node_devices, parse_node_device)
from virtdriver.capabilities.errors import CapabilityXMLError

#: The node-device daemon's URIs (virtnodedevd, or libvirtd).
NODEDEV_SYSTEM = "nodedev:///system"
NODEDEV_SESSION = "nodedev:///session"
#: Seconds to wait for a node-device daemon to answer an open.
OPEN_TIMEOUT = 10.0

#: ``on_document(name, xml, done, total)``: told of each document read.
DocumentHook = Callable[[str, str, int, int], None]
Opener = Callable[[str], Any]


class DeviceParseCache:
    """Parsed node devices by name, with the XML they were parsed from.

    Each reading replaces the contents with what it listed, so the cache
    holds at most one host's devices.  Not shared between threads (the
    session reads under its lock).
    """

    def __init__(self) -> None:
        self._entries: dict[str, tuple[str, NodeDevice]] = {}

    def parse(self, name: str, xml: str, source: str) -> NodeDevice:
        """``xml`` parsed (or the cached result for the same XML)."""
        entry = self._entries.get(name)
        if entry is not None and entry[0] == xml:
            return entry[1]
        return parse_node_device(xml, source)

    def replace(self, parsed: dict[str, tuple[str, NodeDevice]]) -> None:
        """Keep exactly ``parsed`` (name to ``(xml, device)``)."""
        self._entries = parsed

    def __len__(self) -> int:
        return len(self._entries)


def default_nodedev_uri() -> str:
    """``nodedev:///system`` for root, else ``nodedev:///session``."""
    return NODEDEV_SYSTEM if os.geteuid() == 0 else NODEDEV_SESSION


def read_devices(conn: Any, uri: str, *, nodedev_uri: str | None = None,
                 opener: Opener | None = None,
                 on_document: DocumentHook | None = None,
                 cache: DeviceParseCache | None = None) -> DevicesReading:
    """The host's devices as ``conn`` (or a node-device daemon) lists them.

    Args:
        conn: the driver's libvirt connection, opened at ``uri``.
        nodedev_uri: where to read devices when ``conn`` has no
            node-device API; ``None``: :func:`default_nodedev_uri`.
        opener: opens that URI read-only (tests pass fakes).
        on_document: told of each document read (the snapshot recorder).
        cache: parsed documents kept between readings.

    Never raises for libvirt's or the documents' faults: those give
    :class:`DevicesUnknown`, with the URI, the call and libvirt's words.
    """
    if not hasattr(conn, "listAllDevices"):  # a stand-in, not virConnect
        return DevicesUnknown(f"{uri}: the connection object has no "
                              "node-device API (listAllDevices)")
    try:
        return _read_listing(conn, uri, on_document, cache)
    except _Refused as refused:
        if refused.code != libvirt.VIR_ERR_NO_SUPPORT or not refused.listing:
            return DevicesUnknown(refused.reason)
        no_api = refused.reason
    target = nodedev_uri or default_nodedev_uri()
    missing = _missing_session_socket(target) if nodedev_uri is None else None
    if missing is not None:
        return DevicesUnknown(
            f"{no_api}; and no node-device daemon answers at {target} "
            f"({missing}); start virtnodedevd (or libvirtd) or set "
            "[libvirt] nodedev_uri")
    try:
        other = (opener or open_read_only)(target)
    except libvirt.libvirtError as exc:
        return DevicesUnknown(
            f"{no_api}; and {target} did not answer: {_words(exc)}; start "
            "virtnodedevd (or libvirtd) or set [libvirt] nodedev_uri")
    try:
        return _read_listing(other, target, on_document, cache)
    except _Refused as refused:
        return DevicesUnknown(refused.reason)
    finally:
        try:
            other.close()
        except libvirt.libvirtError:
            pass  # already gone; nothing left to release


def open_read_only(uri: str, timeout: float = OPEN_TIMEOUT) -> Any:
    """``libvirt.openReadOnly(uri)``, giving up after ``timeout`` seconds.

    Raises:
        libvirt.libvirtError: it did not open (or not in time).
    """
    from virtdriver.drivers.libvirt.connection import ensure_event_loop

    ensure_event_loop()  # also silences libvirt's own stderr printing
    result: dict[str, Any] = {}

    def attempt() -> None:
        try:
            result["conn"] = libvirt.openReadOnly(uri)
        except libvirt.libvirtError as exc:
            result["error"] = exc

    thread = threading.Thread(target=attempt, name=f"open {uri}",
                              daemon=True)
    thread.start()
    thread.join(timeout)
    if "conn" in result:
        return result["conn"]
    if "error" in result:
        raise result["error"]
    raise libvirt.libvirtError(f"no answer from {uri} within {timeout:g} s")


class _Refused(Exception):
    """A reading that cannot be completed, and why (internal)."""

    def __init__(self, reason: str, code: int | None = None,
                 listing: bool = False) -> None:
        super().__init__(reason)
        self.reason = reason
        self.code = code
        self.listing = listing


def _read_listing(conn: Any, uri: str, on_document: DocumentHook | None,
                  cache: DeviceParseCache | None) -> DevicesReading:
    try:
        listed = conn.listAllDevices(0)
    except libvirt.libvirtError as exc:
        raise _Refused(f"{uri} listAllDevices(0) failed: {_words(exc)}",
                       exc.get_error_code(), listing=True) from None
    cache = cache if cache is not None else DeviceParseCache()
    parsed: dict[str, tuple[str, NodeDevice]] = {}
    vanished = []
    total = len(listed)
    for done, device in enumerate(listed, 1):
        try:
            name = device.name()
            xml = _xml(conn, device, name)
        except libvirt.libvirtError as exc:
            raise _Refused(
                f"{uri}: reading node device {_name(device)} failed: "
                f"{_words(exc)} (the listing is incomplete)",
                exc.get_error_code()) from None
        if xml is None:
            vanished.append(name)
            continue
        if on_document is not None:
            on_document(name, xml, done, total)
        try:
            parsed[name] = (xml, cache.parse(name, xml,
                                             f"{uri} node device {name}"))
        except CapabilityXMLError as exc:
            raise _Refused(f"node device XML not usable: {exc}") from None
    try:
        reading = collect_node_devices(
            ((name, device) for name, (_xml_, device) in parsed.items()),
            source=uri, vanished=vanished)
    except CapabilityXMLError as exc:
        raise _Refused(f"node devices of {uri} not usable: {exc}") from None
    cache.replace(parsed)
    return reading


def _xml(conn: Any, device: Any, name: str) -> str | None:
    """The device's XML; ``None`` when it is gone (asked twice)."""
    try:
        return device.XMLDesc(0)
    except libvirt.libvirtError as exc:
        if exc.get_error_code() != libvirt.VIR_ERR_NO_NODE_DEVICE:
            raise
    try:  # a udev remove/add pair can be mid-way; ask once more by name
        return conn.nodeDeviceLookupByName(name).XMLDesc(0)
    except libvirt.libvirtError as exc:
        if exc.get_error_code() != libvirt.VIR_ERR_NO_NODE_DEVICE:
            raise
    return None


def _name(device: Any) -> str:
    try:
        return device.name()
    except libvirt.libvirtError:
        return "(name unreadable)"


def _words(exc: libvirt.libvirtError) -> str:
    """libvirt's message and its code's name: ``message [VIR_ERR_...]``."""
    code = exc.get_error_code()
    names = [name for name in _ERROR_NAMES
             if getattr(libvirt, name, None) == code] if code else []
    return (exc.get_error_message() or str(exc)) + (
        f" [{names[0]}]" if names else "")


#: The error codes a node-device reading meets, by name (for messages).
_ERROR_NAMES = ("VIR_ERR_NO_SUPPORT", "VIR_ERR_NO_NODE_DEVICE",
                "VIR_ERR_SYSTEM_ERROR", "VIR_ERR_RPC", "VIR_ERR_NO_CONNECT",
                "VIR_ERR_INVALID_CONN", "VIR_ERR_INTERNAL_ERROR",
                "VIR_ERR_OPERATION_FAILED", "VIR_ERR_OPERATION_INVALID",
                "VIR_ERR_OPERATION_DENIED", "VIR_ERR_AUTH_FAILED",
                "VIR_ERR_INVALID_ARG", "VIR_ERR_XML_ERROR")


def _missing_session_socket(uri: str) -> str | None:
    """Why a session daemon is surely absent (no socket), or ``None``.

    Opening ``nodedev:///session`` with no daemon would make libvirt
    start one (autostart); reading must not leave a daemon behind.
    """
    if uri != NODEDEV_SESSION:
        return None
    runtime = os.environ.get("XDG_RUNTIME_DIR") or os.path.expanduser(
        "~/.cache")
    sockets = [os.path.join(runtime, "libvirt", name)
               for name in ("virtnodedevd-sock", "libvirt-sock")]
    if any(os.path.exists(path) for path in sockets):
        return None
    return f"no socket at {' or '.join(sockets)}"


def devices_summary(reading: DevicesReading) -> dict[str, Any]:
    """What a node's facts say of its devices (plain JSON values).

    Known: ``source``, counts of ``pci_functions``, ``mdev_parents``
    (PCI and other) and ``mdevs``, the ``vanished`` and ``ignored``
    devices; unknown: the ``reason``.
    """
    if not reading.known:
        return {"known": False, "reason": reading.reason}
    return {"known": True, "source": reading.source,
            "pci_functions": len(reading.pci),
            "mdev_parents": len(reading.mdev_parents),
            "mdevs": len(reading.mdevs),
            "vanished": list(reading.vanished),
            "ignored": [{"name": name, "reason": reason}
                        for name, reason in reading.ignored]}
