"""A stop a signal handler can ask for (the agent's SIGTERM, Placement's serve).

A ``threading.Event`` set from a signal handler deadlocked the agent: the
handler waited for the Event's lock, which the interrupted main thread
held on its way out of ``Event.wait`` (seen in the SIGHUP test: one
thread, parked on a futex, SIGTERM ignored for good).
"""

from __future__ import annotations

import os
import signal
import threading

from virtdriver.stop_request import StopRequest

#: How long a broken wake-up may take before the watchdog fails the test.
WATCHDOG = 300.0


class WatchdogFired(AssertionError):
    pass


def watched(wait):
    """Run ``wait()`` in this (the main) thread; fail instead of hanging
    if it does not return within :data:`WATCHDOG` seconds."""
    done = threading.Event()

    def fire(signum, frame):
        raise WatchdogFired(f"still waiting after {WATCHDOG:.0f} s")

    previous = signal.signal(signal.SIGUSR1, fire)
    timer = threading.Timer(
        WATCHDOG, lambda: done.is_set() or os.kill(os.getpid(),
                                                   signal.SIGUSR1))
    timer.start()
    try:
        return wait()
    finally:
        done.set()
        timer.cancel()
        signal.signal(signal.SIGUSR1, previous)


def test_a_signal_handler_ends_a_long_wait():
    request = StopRequest()
    previous = signal.signal(signal.SIGALRM, lambda *_: request.set())
    try:
        signal.setitimer(signal.ITIMER_REAL, 0.05)
        assert watched(lambda: request.wait(3600)) is True
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    assert request.is_set()


def test_another_thread_ends_a_long_wait():
    request = StopRequest()
    threading.Timer(0.05, request.set).start()

    assert watched(lambda: request.wait(3600)) is True


def test_a_wait_without_a_request_times_out_unset():
    request = StopRequest()

    assert request.wait(0.01) is False
    assert not request.is_set()


def test_once_set_every_wait_returns_at_once_and_set_again_is_harmless():
    request = StopRequest()
    for _ in range(70_000):   # more than a pipe holds: never blocks
        request.set()

    assert request.wait(3600) is True and request.wait(3600) is True


def test_its_pipe_is_closed_with_it():
    request = StopRequest()
    pipes = {fd: os.fstat(fd).st_ino
             for fd in (request._read, request._write)}
    del request

    for fd, inode in pipes.items():
        try:
            reused = os.fstat(fd).st_ino != inode
        except OSError:
            continue
        assert reused, f"fd {fd} still open on the request's pipe"
