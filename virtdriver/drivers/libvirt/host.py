"""Read what a libvirt host is: host capabilities, domain capabilities, versions.

The I/O half of the capability model: ask libvirt for XML, hand it to the
pure parsers in :mod:`virtdriver.capabilities`.  A domain capabilities call
that libvirt refuses is recorded as *unknown* with libvirt's reason; it is
not the same fact as "the host offers nothing".
"""

from __future__ import annotations

import platform
from dataclasses import dataclass
from collections.abc import Callable
from typing import Any, Protocol

import libvirt

from virtdriver.capabilities import (
    CapabilityXMLError,
    DomainCapabilities,
    HostCapabilities,
    parse_domain_capabilities,
    parse_host_capabilities,
)
from virtdriver.capabilities.devices import DevicesReading, DevicesUnknown
from virtdriver.capabilities.traits.config import TraitConfig
from virtdriver.capabilities.traits.domain_selection import domain_keys
from virtdriver.capabilities.traits.model import DomainKey, DomainReading
from virtdriver.drivers.libvirt.devices import read_devices

#: Where the driver's online CPUs came from (``facts["online_cpus_source"]``):
#: libvirt's ``getCPUMap``, or — libvirt did not report it — every CPU the
#: host capabilities list.
ONLINE_FROM_CPU_MAP = "getCPUMap"
ONLINE_FROM_CAPABILITIES = "capabilities"


class CapabilitySource(Protocol):
    """The calls of ``libvirt.virConnect`` this module uses."""

    def getCapabilities(self) -> str: ...

    def getDomainCapabilities(
        self, emulatorbin: str | None, arch: str | None,
        machine: str | None, virttype: str | None, flags: int = 0) -> str: ...

    def getLibVersion(self) -> int: ...

    def getVersion(self) -> int: ...


@dataclass(frozen=True)
class Unknown:
    """A question libvirt did not answer, and why."""

    reason: str
    error_code: int | None = None
    error_name: str | None = None

    def describe(self) -> str:
        """``reason [VIR_ERR_NAME]``."""
        code = f" [{self.error_name}]" if self.error_name else ""
        return f"{self.reason}{code}"


def unknown_from(exc: libvirt.libvirtError) -> Unknown:
    """The question ``exc`` refused, as :class:`Unknown` with libvirt's
    message, code and code name."""
    code = exc.get_error_code()
    return Unknown(reason=exc.get_error_message() or str(exc),
                   error_code=code, error_name=_error_name(code))


@dataclass(frozen=True)
class HostReading:
    """One read of a host: what was asked, and what libvirt answered.

    Attributes:
        uri: the libvirt URI read.
        host: the host capabilities.
        arch: the host arch (domain capabilities were asked for it).
        config: the configuration the reading was taken with, its virt
            type resolved; it chose which domain capabilities were read.
        domain: the host arch's default-machine document, or why not.
        domains: every document that counts for traits (see
            :mod:`virtdriver.capabilities.traits.domain_selection`), read
            or failed, the default-machine one first.
        libvirt_version: ``getLibVersion()``, ``None`` if it failed.
        hypervisor_version: ``getVersion()``, ``None`` if it failed.
        devices: the node devices (:mod:`.devices`), or why they are
            unknown; re-read once per update (see
            :meth:`.session.LibvirtSession.reading`).
    """

    uri: str
    host: HostCapabilities
    arch: str
    config: TraitConfig
    domain: DomainCapabilities | Unknown
    domains: tuple[DomainReading, ...] = ()
    libvirt_version: int | None = None
    hypervisor_version: int | None = None
    devices: DevicesReading = DevicesUnknown("not read")

    @property
    def virt_type(self) -> str:
        """The virt type domain capabilities were asked for."""
        return self.config.virt_type or ""


def read_host(conn: CapabilitySource, uri: str,
              config: TraitConfig | None = None, *,
              devices: Callable[[Any, str], DevicesReading] | None = None
              ) -> HostReading:
    """Read host capabilities, the domain capabilities that count, versions
    and node devices.

    ``devices(conn, uri)`` reads the node devices; by default
    :func:`.devices.read_devices` with its defaults.

    An unset virt type (the default config) is ``kvm`` when libvirt lists a
    kvm domain for the host arch and ``qemu`` otherwise.

    A domain capabilities document libvirt refuses or that does not parse
    becomes :class:`Unknown` with the reason; the rest is still read.

    Raises:
        libvirt.libvirtError: getCapabilities failed.
        CapabilityXMLError: the host capabilities could not be parsed.
    """
    host = parse_host_capabilities(conn.getCapabilities(),
                                   f"{uri} getCapabilities()")
    arch = host.cpu.arch or platform.machine()
    config = (config or TraitConfig()).resolved(host)
    keys = domain_keys(host, config) or (
        DomainKey(arch, config.virt_type or "qemu"),)
    answers = [_read_domain(conn, uri, key) for key in keys]
    return HostReading(
        uri=uri, host=host, arch=arch, config=config,
        domain=answers[0], domains=tuple(
            DomainReading(key, caps=answer) if not isinstance(answer, Unknown)
            else DomainReading(key, error=answer.describe())
            for key, answer in zip(keys, answers, strict=True)),
        libvirt_version=_version(conn.getLibVersion),
        hypervisor_version=_version(conn.getVersion),
        devices=(devices or read_devices)(conn, uri))


def _read_domain(conn: CapabilitySource, uri: str,
                 key: DomainKey) -> DomainCapabilities | Unknown:
    call = (f"{uri} getDomainCapabilities(arch={key.arch!r}, "
            f"machine={key.machine!r}, virttype={key.virt_type!r})")
    try:
        xml = conn.getDomainCapabilities(None, key.arch, key.machine,
                                         key.virt_type, 0)
    except libvirt.libvirtError as exc:
        return unknown_from(exc)
    try:
        return parse_domain_capabilities(xml, call)
    except CapabilityXMLError as exc:
        # One unusable document makes its own traits unknown; it must not
        # take the host's other facts down with it.
        return Unknown(reason=str(exc))


def _version(call) -> int | None:
    try:
        return call()
    except libvirt.libvirtError:
        return None


#: VIR_ERR_* names that are error *levels*, not codes; their values clash.
_ERROR_LEVELS = {"VIR_ERR_NONE", "VIR_ERR_WARNING", "VIR_ERR_ERROR"}


def _error_name(code: int | None) -> str | None:
    """libvirt's name for an error code, e.g. 3 -> ``VIR_ERR_NO_SUPPORT``."""
    for name in dir(libvirt):
        if (name.startswith("VIR_ERR_") and name not in _ERROR_LEVELS
                and getattr(libvirt, name) == code):
            return name
    return None
