"""libvirt's module-level calls beyond ``open``: versions, the last
error, ``openAuth``.  Module-level calls the fake lacks come from
:func:`.api_table.module_attribute` (``VIR_ERR_NO_SUPPORT``)."""

from __future__ import annotations

from typing import Any

from virtdriver.fakelibvirt.connection import _open, virConnect
from virtdriver.fakelibvirt.constants import VIR_CONNECT_RO
from virtdriver.fakelibvirt.documents import HostDocuments
from virtdriver.fakelibvirt.errors import ErrorTuple, _last

#: The libvirt library version fakelibvirt presents (a host's documents
#: carry their own ``getLibVersion``).
LIB_VERSION = HostDocuments().lib_version


def getVersion(name: str | None = None) -> int | tuple[int, int]:  # noqa: N802
    """The library version (``(library, type)`` when a type is named, as
    libvirt-python returns it)."""
    return LIB_VERSION if name is None else (LIB_VERSION, LIB_VERSION)


def openAuth(uri: str | None, auth: Any = None,  # noqa: N802
             flags: int = 0) -> virConnect:
    """``open`` (``openReadOnly`` with ``VIR_CONNECT_RO``); no
    credentials are asked for."""
    return _open(uri, read_only=bool(flags & VIR_CONNECT_RO))


def virInitialize() -> int:  # noqa: N802
    return 0


def virGetLastError() -> ErrorTuple | None:  # noqa: N802
    """This thread's last error tuple, or ``None``."""
    return getattr(_last, "err", None)


def virGetLastErrorCode() -> int:  # noqa: N802
    err = virGetLastError()
    return 0 if err is None else err[0]


def virGetLastErrorDomain() -> int:  # noqa: N802
    err = virGetLastError()
    return 0 if err is None else err[1]


def virGetLastErrorMessage() -> str:  # noqa: N802
    err = virGetLastError()
    return "no error" if err is None else err[2]


def virResetLastError() -> None:  # noqa: N802
    _last.err = None
