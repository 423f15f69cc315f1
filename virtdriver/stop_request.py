"""A stop that a signal handler can ask for safely."""

from __future__ import annotations

import os
import select
import weakref


class StopRequest:
    """A stop a signal handler may ask for: a flag, and a pipe that ends
    :meth:`wait` at once.

    Not a :class:`threading.Event`: its ``set`` takes a lock that the code
    the handler interrupted may hold (returning from its own ``wait``),
    and the process then waits on itself for ever.
    """

    def __init__(self) -> None:
        self._requested = False
        self._read, self._write = os.pipe()
        for fd in (self._read, self._write):
            os.set_blocking(fd, False)
        weakref.finalize(self, _close_all, self._read, self._write)

    def set(self) -> None:
        """Ask to stop (safe in a signal handler, and from any thread)."""
        self._requested = True
        try:
            os.write(self._write, b"\0")
        except BlockingIOError:   # the pipe is full: wait() wakes anyway
            pass

    def is_set(self) -> bool:
        """Whether a stop was asked for."""
        return self._requested

    def wait(self, timeout: float) -> bool:
        """Up to ``timeout`` seconds, less if asked to stop; whether asked."""
        if not self._requested:
            # A signal during select runs its handler, then select goes on
            # with the time left and finds the pipe readable.
            select.select([self._read], [], [], timeout)
        return self._requested


def _close_all(*fds: int) -> None:
    for fd in fds:
        os.close(fd)
