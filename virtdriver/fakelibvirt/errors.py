"""``libvirtError`` and the errors fakelibvirt raises, worded as libvirt's.

libvirt reports an error as a 9-tuple ``(code, domain, message, level,
str1, str2, str3, int1, int2)``; libvirt-python's ``libvirtError`` keeps it
in ``.err`` and reads it through ``get_error_code()`` and friends.  The
messages below are libvirt's own formats (``src/util/virerror.c``), so
code that shows or matches them sees what a real host would give.
"""

from __future__ import annotations

import errno
import os
import threading
from collections.abc import Callable
from typing import Any

from virtdriver.fakelibvirt.constants import (
    VIR_ERR_ERROR,
    VIR_ERR_INVALID_CONN,
    VIR_ERR_NO_CONNECT,
    VIR_ERR_NO_NODE_DEVICE,
    VIR_ERR_NO_SUPPORT,
    VIR_ERR_SYSTEM_ERROR,
    VIR_FROM_NODEDEV,
    VIR_FROM_NONE,
    VIR_FROM_RPC,
)

ErrorTuple = tuple[int, int, str, int, str | None, str | None, str | None,
                   int, int]


class libvirtError(Exception):  # noqa: N801 - libvirt's own name
    """An error libvirt reported; the same interface as libvirt-python's.

    ``libvirtError("message")`` alone has ``err`` ``None`` (as the real
    one has when libvirt recorded no error); fakelibvirt passes ``err``.
    """

    def __init__(self, defmsg: str, err: ErrorTuple | None = None) -> None:
        super().__init__(err[2] if err is not None else defmsg)
        self.err = err

    def _field(self, index: int) -> Any:
        return None if self.err is None else self.err[index]

    def get_error_code(self) -> int | None:
        return self._field(0)

    def get_error_domain(self) -> int | None:
        return self._field(1)

    def get_error_message(self) -> str | None:
        return self._field(2)

    def get_error_level(self) -> int | None:
        return self._field(3)

    def get_str1(self) -> str | None:
        return self._field(4)

    def get_str2(self) -> str | None:
        return self._field(5)

    def get_str3(self) -> str | None:
        return self._field(6)

    def get_int1(self) -> int | None:
        return self._field(7)

    def get_int2(self) -> int | None:
        return self._field(8)


_handler_lock = threading.Lock()
#: The last error of each thread (``virGetLastError``).
_last = threading.local()
_handler: tuple[Callable[[Any, ErrorTuple], None], Any] | None = None


def registerErrorHandler(f: Callable[[Any, ErrorTuple], None] | None,
                         ctx: Any) -> int:  # noqa: N802 - libvirt's name
    """Call ``f(ctx, err)`` for every error fakelibvirt raises (``None``
    removes it).  Returns 1, as libvirt-python does.

    Real libvirt prints errors to stderr when no handler is set; the fake
    stays quiet (the error reaches the caller as :class:`libvirtError`).
    """
    global _handler
    with _handler_lock:
        _handler = (f, ctx) if f is not None else None
    return 1


def make_error(code: int, domain: int, message: str, *,
               str1: str | None = None, str2: str | None = None,
               int1: int = -1, int2: int = -1) -> libvirtError:
    """A :class:`libvirtError` with a full ``err`` tuple, after telling the
    registered error handler (as libvirt does when it reports)."""
    err: ErrorTuple = (code, domain, message, VIR_ERR_ERROR, str1, str2,
                       None, int1, int2)
    _last.err = err
    with _handler_lock:
        handler = _handler
    if handler is not None:
        handler[0](handler[1], err)
    return libvirtError(message, err)


def no_support(function: str, domain: int, detail: str = "") -> libvirtError:
    """``VIR_ERR_NO_SUPPORT``: the driver does not do ``function``."""
    fmt = "this function is not supported by the connection driver: %s"
    suffix = f" ({detail})" if detail else ""
    return make_error(VIR_ERR_NO_SUPPORT, domain,
                      fmt % function + suffix, str1=fmt, str2=function)


def invalid_conn(function: str, domain: int = VIR_FROM_NONE) -> libvirtError:
    """``VIR_ERR_INVALID_CONN``: a call on a closed connection."""
    fmt = "invalid connection pointer in %s"
    return make_error(VIR_ERR_INVALID_CONN, domain, fmt % function,
                      str1=fmt, str2=function)


def no_connect(uri: str) -> libvirtError:
    """``VIR_ERR_NO_CONNECT``: no driver answers ``uri``."""
    fmt = "no connection driver available for %s"
    return make_error(VIR_ERR_NO_CONNECT, VIR_FROM_NONE, fmt % uri,
                      str1=fmt, str2=uri)


def end_of_file() -> libvirtError:
    """``VIR_ERR_SYSTEM_ERROR`` from ``VIR_FROM_RPC``: the daemon went away.

    The remote driver's words when the socket reads EOF; it keeps this
    error and raises it again for every later call on the connection.
    """
    message = f"End of file while reading data: {os.strerror(errno.EIO)}"
    return make_error(VIR_ERR_SYSTEM_ERROR, VIR_FROM_RPC, message,
                      str1="%s", str2=message, int1=errno.EIO)


def no_node_device(name: str) -> libvirtError:
    """``VIR_ERR_NO_NODE_DEVICE``, as ``nodeDeviceLookupByName`` raises it."""
    fmt = "Node device not found: %s"
    detail = f"no node device with matching name '{name}'"
    return make_error(VIR_ERR_NO_NODE_DEVICE, VIR_FROM_NODEDEV,
                      fmt % detail, str1=fmt, str2=detail)
