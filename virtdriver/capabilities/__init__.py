"""Capability model: libvirt XML in, frozen dataclasses out.

Pure functions with no I/O.  The entry points are
:func:`parse_host_capabilities` and :func:`parse_domain_capabilities`; both
raise :class:`CapabilityXMLError` and nothing else for bad input.
"""

from virtdriver.capabilities.domain import DomainCapabilities
from virtdriver.capabilities.domain_xml import parse_domain_capabilities
from virtdriver.capabilities.errors import CapabilityXMLError
from virtdriver.capabilities.host import HostCapabilities
from virtdriver.capabilities.host_xml import parse_host_capabilities
from virtdriver.capabilities.xmlsafe import DEFAULT_MAX_BYTES

__all__ = [
    "CapabilityXMLError",
    "DEFAULT_MAX_BYTES",
    "DomainCapabilities",
    "HostCapabilities",
    "parse_domain_capabilities",
    "parse_host_capabilities",
]
