"""Everything a fake libvirt host answers, as the documents libvirt returns.

Builders (:mod:`virtdriver.fakelibvirt.builders`) and snapshots
(:mod:`virtdriver.fakelibvirt.snapshot`) both produce a
:class:`HostDocuments`; a fake connection serves it.  Missing documents
are answered the way libvirt answers what it cannot do
(``VIR_ERR_NO_SUPPORT``), so a consumer sees them as *unknown*.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType


@dataclass(frozen=True)
class DomainCapsKey:
    """The arguments of one ``getDomainCapabilities`` call.

    ``machine`` ``None`` is the arch's default machine type; ``emulator``
    ``None`` the default emulator.
    """

    arch: str
    virt_type: str
    machine: str | None = None
    emulator: str | None = None


@dataclass(frozen=True)
class RecordedError:
    """An error libvirt answered a call with, to answer it again alike."""

    code: int
    domain: int
    message: str


@dataclass(frozen=True)
class HostDocuments:
    """One host, as libvirt would describe it.

    Attributes:
        capabilities: ``getCapabilities()`` XML, or ``None`` (refused).
        domain_capabilities: ``getDomainCapabilities`` XML by call; a call
            not listed is refused with ``VIR_ERR_NO_SUPPORT``.  A key with
            ``machine=None`` answers the default-machine call; libvirt also
            names the resolved machine inside the document.
        cpu_map: ``getCPUMap()`` as libvirt returns it, ``(count,
            [online flags], online count)``; ``None`` → refused.
        lib_version: ``getLibVersion()`` (9000000 for 9.0.0).
        version: ``getVersion()`` (hypervisor, 7002000 for QEMU 7.2.0).
        hostname: ``getHostname()``.
        info: ``getInfo()`` list (model, memory MiB, cpus, MHz, nodes,
            sockets, cores, threads), or ``None`` (derived by the
            connection from the capabilities when absent).
        node_devices: node device name → ``XMLDesc()`` XML.
        domain_capabilities_errors: calls libvirt refused, with its error
            (a recorded host that said ``VIR_ERR_NO_SUPPORT``, or failed
            otherwise, says it again).
        compute_host: not libvirt's: the node name the recording used
            (``[DEFAULT] host``, else the machine's name); ``None`` when
            not recorded (a replay then uses the replaying configuration's).
        disk_gb: not libvirt's: the size (GiB) of the disk the recording
            host reports as ``DISK_GB``; ``None`` when not recorded (a
            replay then reports no ``DISK_GB``).
        node_devices_error: the node devices could not be read when the
            host was recorded (why, in the driver's words): every
            ``listAllDevices`` call says it again, so a replay reads them
            as unknown too, never as "no device".
    """

    capabilities: str | None = None
    domain_capabilities: Mapping[DomainCapsKey, str] = field(
        default_factory=lambda: MappingProxyType({}))
    cpu_map: tuple[int, tuple[bool, ...], int] | None = None
    lib_version: int = 9000000
    version: int = 7002000
    hostname: str = "fakehost"
    info: tuple | None = None
    node_devices: Mapping[str, str] = field(
        default_factory=lambda: MappingProxyType({}))
    domain_capabilities_errors: Mapping[DomainCapsKey, RecordedError] = \
        field(default_factory=lambda: MappingProxyType({}))
    compute_host: str | None = None
    disk_gb: int | None = None
    node_devices_error: RecordedError | None = None
