"""libvirt's default event loop, as fakelibvirt delivers events through it.

Code written for libvirt calls ``virEventRegisterDefaultImpl()`` before
opening a connection and runs ``virEventRunDefaultImpl()`` forever in a
thread of its own; libvirt-python then calls every event callback on
that thread, never on the thread whose call caused the event.  The fake
does the same: a call that causes an event :func:`dispatch`\\ es the
callback, and the next iteration of the loop runs it.  Without a
registered loop there is nothing to run callbacks, so registering one is
refused as libvirt refuses it (:func:`require`).

The API for other parts of fakelibvirt (domain and node-device events):

* :func:`require` — before accepting an event callback: raises libvirt's
  error when no default implementation is registered.
* :func:`running` — register the loop and run it in a thread for a block
  (what a libvirt-python program does at start; the pytest fixture
  ``fakelibvirt_event_loop``).
* :func:`dispatch(function, *args)` — run ``function(*args)`` on the loop
  thread, in the order dispatched.
* :func:`wake` — end the current iteration early.
* :func:`drain` — wait until what was dispatched so far has run (tests).

Timers (``virEventAddTimeout`` and friends) run on the loop too.  File
handles are not served: fakelibvirt has no file descriptors.
"""

from __future__ import annotations

import threading
import time
import traceback
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from virtdriver.fakelibvirt.constants import (
    VIR_ERR_INTERNAL_ERROR, VIR_FROM_NONE)
from virtdriver.fakelibvirt.errors import make_error

#: Longest one ``virEventRunDefaultImpl()`` iteration waits, in seconds.
ITERATION_SECONDS = 0.5

_cond = threading.Condition()
_queue: deque[tuple[Callable[..., Any], tuple[Any, ...]]] = deque()
_registered = False
_woken = False


@dataclass
class _Timer:
    interval_ms: int
    callback: Callable[[int, Any], Any]
    opaque: Any
    due: float


_timers: dict[int, _Timer] = {}
_next_timer = 1


def virEventRegisterDefaultImpl() -> int:  # noqa: N802 - libvirt's name
    """Register the default event loop; returns 0."""
    global _registered
    with _cond:
        _registered = True
    return 0


def registered() -> bool:
    """Whether :func:`virEventRegisterDefaultImpl` was called."""
    with _cond:
        return _registered


def require() -> None:
    """Refuse an event registration when no loop is registered, in
    libvirt's words (it cannot add the timer that delivers events; the
    message names domain events for every kind, as libvirt's does).

    Raises:
        libvirtError: ``VIR_ERR_INTERNAL_ERROR`` / ``VIR_FROM_NONE``.
    """
    if not registered():
        detail = "could not initialize domain event timer"
        raise make_error(VIR_ERR_INTERNAL_ERROR, VIR_FROM_NONE,
                         f"internal error: {detail}",
                         str1="internal error: %s", str2=detail)


def dispatch(function: Callable[..., Any], *args: Any) -> None:
    """Run ``function(*args)`` on the loop thread (the next iteration)."""
    with _cond:
        _queue.append((function, args))
        _cond.notify_all()


def drain(timeout: float = 60.0) -> bool:
    """Wait until every callback dispatched before this call has run on
    the loop thread (callbacks run in order: a marker dispatched now runs
    after them); ``False`` if that took longer than ``timeout`` seconds
    (no loop thread running?).  For tests that assert what was
    delivered."""
    done = threading.Event()
    dispatch(done.set)
    return done.wait(timeout)


def wake() -> None:
    """End the current iteration early (as an event would in libvirt)."""
    global _woken
    with _cond:
        _woken = True
        _cond.notify_all()


def virEventRunDefaultImpl() -> int:  # noqa: N802 - libvirt's name
    """Run one iteration: wait until a callback is dispatched, a timer is
    due, :func:`wake` is called or :data:`ITERATION_SECONDS` pass; then
    run what is due, on this thread.  Returns 0."""
    global _woken
    deadline = time.monotonic() + ITERATION_SECONDS
    with _cond:
        while not _queue and not _woken:
            now = time.monotonic()
            wait = min([deadline] + [t.due for t in _timers.values()
                                     if t.interval_ms >= 0]) - now
            if wait <= 0:
                break
            _cond.wait(wait)
        _woken = False
        ready = list(_queue)
        _queue.clear()
        now = time.monotonic()
        due = [(timer_id, t) for timer_id, t in _timers.items()
               if t.interval_ms >= 0 and t.due <= now]
        for _, timer in due:
            timer.due = now + timer.interval_ms / 1000
    for function, args in ready:
        _run(function, *args)
    for timer_id, timer in due:
        _run(timer.callback, timer_id, timer.opaque)
    return 0


@contextmanager
def running(name: str = "fakelibvirt-event-loop") -> Iterator[threading.Thread]:
    """Register the default loop and run it in a thread named ``name``
    until the block ends, as a libvirt-python program runs it; yields the
    thread.  Only one such thread should run at a time: callbacks go to
    whichever thread runs the next iteration."""
    virEventRegisterDefaultImpl()
    stop = threading.Event()

    def loop() -> None:
        while not stop.is_set():
            virEventRunDefaultImpl()

    thread = threading.Thread(target=loop, name=name, daemon=True)
    thread.start()
    try:
        yield thread
    finally:
        stop.set()
        wake()
        thread.join(timeout=60)


def _run(function: Callable[..., Any], *args: Any) -> None:
    # libvirt-python prints a callback's exception and goes on looping.
    try:
        function(*args)
    except Exception:  # noqa: BLE001 - a callback's error is its own
        traceback.print_exc()


def virEventAddTimeout(timeout: int, cb: Callable[[int, Any], Any],  # noqa: N802
                       opaque: Any) -> int:
    """Call ``cb(timer, opaque)`` every ``timeout`` ms on the loop (0:
    every iteration, -1: disabled); returns the timer id."""
    global _next_timer
    with _cond:
        timer_id = _next_timer
        _next_timer += 1
        _timers[timer_id] = _Timer(timeout, cb, opaque,
                                   time.monotonic() + max(timeout, 0) / 1000)
        _cond.notify_all()
    return timer_id


def virEventUpdateTimeout(timer: int, timeout: int) -> None:  # noqa: N802
    """Change a timer's interval (-1 disables it)."""
    with _cond:
        found = _timers.get(timer)
        if found is not None:
            found.interval_ms = timeout
            found.due = time.monotonic() + max(timeout, 0) / 1000
            _cond.notify_all()


def virEventRemoveTimeout(timer: int) -> int:  # noqa: N802
    """Remove a timer; 0, or -1 (libvirt's answer) for an unknown one."""
    with _cond:
        return 0 if _timers.pop(timer, None) is not None else -1


def virEventInvokeFreeCallback(opaque: Any) -> None:  # noqa: N802
    """libvirt-python's helper for custom loops: nothing to free here."""


def reset() -> None:
    """Forget queued callbacks and timers (test teardown); the loop stays
    registered, as libvirt's does for the process's life."""
    with _cond:
        _queue.clear()
        _timers.clear()
