"""Fault injection: make the Nth call of a method fail.

A :class:`FaultPlan` counts calls by method name and raises the planned
:class:`~virtdriver.fakelibvirt.errors.libvirtError` when a planned call
comes.  Each fake connection has one (``conn.fail(...)``, counting that
connection's calls) and there is one for the whole module
(``fakelibvirt.fail(...)``, counting calls on every connection, useful
when the code under test opens its own).  A fault may instead *drop* the
connection, as a daemon restart would (see
:meth:`~virtdriver.fakelibvirt.connection.virConnect.drop`).
"""

from __future__ import annotations

import threading
from collections import Counter
from dataclasses import dataclass

from virtdriver.fakelibvirt.constants import (
    VIR_ERR_INTERNAL_ERROR, VIR_ERR_NO_SUPPORT, VIR_FROM_NONE)
from virtdriver.fakelibvirt.errors import make_error, no_support


@dataclass(frozen=True)
class Fault:
    """One planned failure.

    Attributes:
        method: the ``virConnect`` method name, e.g. ``getCapabilities``.
        on_call: the 1-based call that fails.
        repeat: every call from ``on_call`` on fails, not only that one.
        error_code, error_domain, message: the error raised.
        drop: drop the connection instead (the call and all later ones
            fail with libvirt's end-of-file error; the close callback runs).
    """

    method: str
    on_call: int = 1
    repeat: bool = False
    error_code: int = VIR_ERR_INTERNAL_ERROR
    error_domain: int = VIR_FROM_NONE
    message: str | None = None
    drop: bool = False

    def fires(self, call: int) -> bool:
        """Whether call number ``call`` of :attr:`method` fails."""
        return call >= self.on_call if self.repeat else call == self.on_call


class FaultPlan:
    """Planned faults and the call counts they are matched against."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._faults: list[Fault] = []
        self._calls: Counter[str] = Counter()

    def fail(self, method: str, *, error_code: int = VIR_ERR_INTERNAL_ERROR,
             error_domain: int = VIR_FROM_NONE, message: str | None = None,
             on_call: int = 1, repeat: bool = False,
             drop: bool = False) -> Fault:
        """Plan that call ``on_call`` of ``method`` (counted from now on,
        1-based) fails; with ``repeat`` every call from then on.

        Raises:
            ValueError: ``on_call`` is below 1.
        """
        if on_call < 1:
            raise ValueError(f"on_call must be 1 or more, not {on_call}")
        fault = Fault(method, on_call + self.calls(method), repeat,
                      error_code, error_domain, message, drop)
        with self._lock:
            self._faults.append(fault)
        return fault

    def clear(self) -> None:
        """Forget every planned fault (the counts stay)."""
        with self._lock:
            self._faults.clear()

    def calls(self, method: str) -> int:
        """How many calls of ``method`` were made (failed ones included)."""
        with self._lock:
            return self._calls[method]

    def check(self, method: str) -> Fault | None:
        """Count one call of ``method``; the fault it triggers, if any."""
        with self._lock:
            self._calls[method] += 1
            call = self._calls[method]
            for fault in self._faults:
                if fault.method == method and fault.fires(call):
                    return fault
        return None


def raise_for(fault: Fault, function: str) -> None:
    """Raise the error ``fault`` plans (not for dropping faults).

    Without a message, ``VIR_ERR_NO_SUPPORT`` gets libvirt's wording for
    ``function`` (libvirt's C name of the call) and other codes say the
    fault was injected (prefixed ``internal error:`` as libvirt prefixes
    ``VIR_ERR_INTERNAL_ERROR`` messages).
    """
    if fault.message is None and fault.error_code == VIR_ERR_NO_SUPPORT:
        raise no_support(function, fault.error_domain)
    message = fault.message or f"injected fault in {function}"
    if fault.message is None and fault.error_code == VIR_ERR_INTERNAL_ERROR:
        message = f"internal error: {message}"
    raise make_error(fault.error_code, fault.error_domain, message)
