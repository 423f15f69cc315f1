"""libvirt's default event loop, as far as a fake needs one.

Code written for libvirt registers the default event implementation
before opening a connection and runs ``virEventRunDefaultImpl()`` forever
in a thread.  fakelibvirt has no file descriptors or timers to serve: its
close callbacks run on the thread that drops the connection.  So
registering does nothing and one iteration just waits (without spinning)
until :func:`wake` or a short timeout, then returns 0 as libvirt does.
"""

from __future__ import annotations

import threading

#: Longest one ``virEventRunDefaultImpl()`` iteration waits, in seconds.
ITERATION_SECONDS = 0.5

_wakeup = threading.Event()


def virEventRegisterDefaultImpl() -> int:  # noqa: N802 - libvirt's name
    """Register the default event loop: nothing to do here; returns 0."""
    return 0


def virEventRunDefaultImpl() -> int:  # noqa: N802 - libvirt's name
    """Run one iteration: wait until woken or :data:`ITERATION_SECONDS`
    pass; returns 0."""
    _wakeup.wait(ITERATION_SECONDS)
    _wakeup.clear()
    return 0


def wake() -> None:
    """End the current iteration early (as an event would in libvirt)."""
    _wakeup.set()
