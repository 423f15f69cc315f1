"""Read what a libvirt host is: host capabilities and domain capabilities.

The I/O half of the capability model: ask libvirt for XML, hand it to the
pure parsers in :mod:`virtdriver.capabilities`.  A domain capabilities call
that libvirt refuses is recorded as *unknown* with libvirt's reason; it is
not the same fact as "the host offers nothing".
"""

from __future__ import annotations

import platform
from dataclasses import dataclass
from typing import Protocol

import libvirt

from virtdriver.capabilities import (
    DomainCapabilities,
    HostCapabilities,
    parse_domain_capabilities,
    parse_host_capabilities,
)


class CapabilitySource(Protocol):
    """The two calls of ``libvirt.virConnect`` this module uses."""

    def getCapabilities(self) -> str: ...

    def getDomainCapabilities(
        self, emulatorbin: str | None, arch: str | None,
        machine: str | None, virttype: str | None, flags: int = 0) -> str: ...


@dataclass(frozen=True)
class Unknown:
    """A question libvirt did not answer, and why."""

    reason: str
    error_code: int | None = None
    error_name: str | None = None


@dataclass(frozen=True)
class HostReading:
    """One read of a host: what was asked, and what libvirt answered."""

    uri: str
    host: HostCapabilities
    arch: str
    virt_type: str
    domain: DomainCapabilities | Unknown


def read_host(conn: CapabilitySource, uri: str) -> HostReading:
    """Read host capabilities, then domain capabilities for the host arch.

    The domain capabilities are those of the default emulator and machine
    type for the host CPU's arch, with virt type ``kvm`` when libvirt lists
    a kvm domain for that arch and ``qemu`` otherwise.

    Raises:
        libvirt.libvirtError: getCapabilities failed.
        CapabilityXMLError: libvirt's XML could not be parsed.
    """
    host = parse_host_capabilities(conn.getCapabilities(),
                                   f"{uri} getCapabilities()")
    arch = host.cpu.arch or platform.machine()
    virt_type = choose_virt_type(host, arch)
    call = (f"{uri} getDomainCapabilities(arch={arch!r}, "
            f"virttype={virt_type!r})")
    try:
        xml = conn.getDomainCapabilities(None, arch, None, virt_type, 0)
    except libvirt.libvirtError as exc:
        code = exc.get_error_code()
        domain: DomainCapabilities | Unknown = Unknown(
            reason=exc.get_error_message() or str(exc),
            error_code=code, error_name=_error_name(code))
    else:
        domain = parse_domain_capabilities(xml, call)
    return HostReading(uri=uri, host=host, arch=arch, virt_type=virt_type,
                       domain=domain)


def choose_virt_type(host: HostCapabilities, arch: str) -> str:
    """``kvm`` if libvirt offers kvm guests of ``arch``, else ``qemu``."""
    for guest in host.guests:
        if guest.arch == arch and "kvm" in guest.domain_types:
            return "kvm"
    return "qemu"


#: VIR_ERR_* names that are error *levels*, not codes; their values clash.
_ERROR_LEVELS = {"VIR_ERR_NONE", "VIR_ERR_WARNING", "VIR_ERR_ERROR"}


def _error_name(code: int | None) -> str | None:
    """libvirt's name for an error code, e.g. 3 -> ``VIR_ERR_NO_SUPPORT``."""
    for name in dir(libvirt):
        if (name.startswith("VIR_ERR_") and name not in _ERROR_LEVELS
                and getattr(libvirt, name) == code):
            return name
    return None
