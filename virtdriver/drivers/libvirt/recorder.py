"""Record everything the libvirt driver reads from a host, as documents.

The recording runs the driver's own reading code (:func:`.host.read_host`)
through a connection wrapper that keeps every answer — and every refusal —
so a snapshot holds exactly what the driver asked for, no more.
"""

from __future__ import annotations

from collections.abc import Callable
from types import MappingProxyType
from typing import Any

import libvirt

from virtdriver.capabilities.traits.config import TraitConfig
from virtdriver.drivers.libvirt.devices import read_devices
from virtdriver.drivers.libvirt.driver import host_disk_gb
from virtdriver.drivers.libvirt.host import read_host
from virtdriver.fakelibvirt.documents import (
    DomainCapsKey, HostDocuments, RecordedError)


class RecordingConnection:
    """Passes the reading calls to ``conn`` and keeps what they returned."""

    def __init__(self, conn: Any) -> None:
        self._conn = conn
        self.capabilities: str | None = None
        self.domain_capabilities: dict[DomainCapsKey, str] = {}
        self.errors: dict[DomainCapsKey, RecordedError] = {}

    def getCapabilities(self) -> str:  # noqa: N802 - libvirt's name
        self.capabilities = self._conn.getCapabilities()
        return self.capabilities

    def getDomainCapabilities(self, emulatorbin, arch, machine,  # noqa: N802
                              virttype, flags=0) -> str:
        key = DomainCapsKey(arch, virttype, machine, emulatorbin)
        try:
            xml = self._conn.getDomainCapabilities(emulatorbin, arch,
                                                   machine, virttype, flags)
        except libvirt.libvirtError as exc:
            self.errors[key] = RecordedError(
                exc.get_error_code() or 0, exc.get_error_domain() or 0,
                exc.get_error_message() or str(exc))
            raise
        self.domain_capabilities[key] = xml
        return xml

    def getLibVersion(self) -> int:  # noqa: N802
        return self._conn.getLibVersion()

    def getVersion(self) -> int:  # noqa: N802
        return self._conn.getVersion()


def record_host(conn: Any, uri: str,
                config: TraitConfig | None = None, *,
                progress: Callable[[int, int], None] | None = None,
                host: str | None = None,
                nodedev_uri: str | None = None) -> HostDocuments:
    """Read the host through ``conn`` as the driver does; return it all.

    Also records ``getCPUMap``, ``getHostname`` and the node devices the
    driver reads (:func:`.devices.read_devices`, from ``nodedev_uri``
    where ``uri`` has no node-device API; ``progress(done, total)`` after
    each, for a host with many); a call libvirt refuses there is left out
    (replayed as refused too), and devices whose reading is unknown are
    left out whole, never recorded half-way.  Beside
    libvirt's answers: ``host``, the node name the driver would use
    (``[DEFAULT] host``), and the disk size it would report as
    ``DISK_GB`` (:func:`~virtdriver.drivers.libvirt.driver.host_disk_gb`).

    Raises:
        libvirt.libvirtError: ``getCapabilities`` failed.
        CapabilityXMLError: libvirt's host capabilities did not parse.
    """
    recorder = RecordingConnection(conn)
    documents: dict[str, str] = {}

    def keep(name: str, xml: str, done: int, total: int) -> None:
        documents[name] = xml
        if progress is not None:
            progress(done, total)

    reading = read_host(recorder, uri, config, devices=lambda _c, _u: (
        read_devices(conn, uri, nodedev_uri=nodedev_uri, on_document=keep)))
    return HostDocuments(
        capabilities=recorder.capabilities,
        domain_capabilities=MappingProxyType(recorder.domain_capabilities),
        domain_capabilities_errors=MappingProxyType(recorder.errors),
        cpu_map=_answer(lambda: _cpu_map(conn.getCPUMap())),
        lib_version=reading.libvirt_version or 0,
        version=reading.hypervisor_version or 0,
        hostname=_answer(conn.getHostname) or "",
        node_devices=MappingProxyType(
            documents if reading.devices.known else {}),
        node_devices_error=(None if reading.devices.known else RecordedError(
            libvirt.VIR_ERR_OPERATION_FAILED, libvirt.VIR_FROM_NODEDEV,
            reading.devices.reason)),
        compute_host=host, disk_gb=host_disk_gb())


def _cpu_map(answer: Any) -> tuple[int, tuple[bool, ...], int]:
    count, flags, online = answer
    return count, tuple(bool(f) for f in flags), online


def _answer(call):
    try:
        return call()
    except libvirt.libvirtError:
        return None
