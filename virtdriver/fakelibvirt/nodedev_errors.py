"""The errors libvirt's node device driver raises, in its words.

Each mirrors what a private ``libvirtd`` holding only the node device
driver (libvirt 9.0) answered, error tuple included; the mdev messages
after ``Unable to ...:`` are mdevctl's, which libvirt passes on.
"""

from __future__ import annotations

from virtdriver.fakelibvirt.constants import (
    VIR_ERR_CONFIG_UNSUPPORTED,
    VIR_ERR_INTERNAL_ERROR,
    VIR_ERR_INVALID_ARG,
    VIR_ERR_OPERATION_INVALID,
    VIR_ERR_OPERATION_UNSUPPORTED,
    VIR_ERR_PARSE_FAILED,
    VIR_ERR_XML_DETAIL,
    VIR_FROM_NODEDEV,
    VIR_FROM_NONE,
)
from virtdriver.fakelibvirt.errors import libvirtError, make_error


def check_flags(flags: int, allowed: int, function: str) -> None:
    """Refuse bits of ``flags`` outside ``allowed`` as ``virCheckFlags``
    does: ``VIR_ERR_INVALID_ARG`` naming the driver ``function``."""
    unknown = flags & ~allowed
    if unknown:
        message = f"unsupported flags (0x{unknown:x}) in function {function}"
        raise make_error(VIR_ERR_INVALID_ARG, VIR_FROM_NODEDEV, message,
                         str1=function, str2="flags", int1=0, int2=0)


def _with_prefix(code: int, prefix: str, detail: str,
                 domain: int = VIR_FROM_NODEDEV) -> libvirtError:
    fmt = f"{prefix}: %s"
    return make_error(code, domain, fmt % detail, str1=fmt, str2=detail)


def internal(detail: str) -> libvirtError:
    """``VIR_ERR_INTERNAL_ERROR``: ``internal error: <detail>``."""
    return _with_prefix(VIR_ERR_INTERNAL_ERROR, "internal error", detail)


def operation_invalid(detail: str) -> libvirtError:
    """``VIR_ERR_OPERATION_INVALID`` (device already/not active...)."""
    return _with_prefix(VIR_ERR_OPERATION_INVALID,
                        "Requested operation is not valid", detail)


def config_unsupported(detail: str) -> libvirtError:
    """``VIR_ERR_CONFIG_UNSUPPORTED`` (``Unsupported device type``...)."""
    return _with_prefix(VIR_ERR_CONFIG_UNSUPPORTED,
                        "unsupported configuration", detail)


def parse_failed(detail: str) -> libvirtError:
    """``VIR_ERR_PARSE_FAILED`` (no colon after libvirt's prefix)."""
    fmt = "failed to parse configuration file %s"
    return make_error(VIR_ERR_PARSE_FAILED, VIR_FROM_NODEDEV, fmt % detail,
                      str1=fmt, str2=detail)


def operation_unsupported(detail: str) -> libvirtError:
    """``VIR_ERR_OPERATION_UNSUPPORTED`` (``setAutostart`` of a non-mdev)."""
    return _with_prefix(VIR_ERR_OPERATION_UNSUPPORTED,
                        "Operation not supported", detail)


def invalid_arg(detail: str) -> libvirtError:
    """``VIR_ERR_INVALID_ARG`` from libvirt's public API layer."""
    return _with_prefix(VIR_ERR_INVALID_ARG, "invalid argument", detail,
                        VIR_FROM_NONE)


def xml_detail(line: int, detail: str) -> libvirtError:
    """``VIR_ERR_XML_DETAIL``: a device document that does not parse."""
    message = f"(node_device_definition):{line}: {detail}"
    return make_error(VIR_ERR_XML_DETAIL, VIR_FROM_NODEDEV, message,
                      str1="%s", str2=message)
