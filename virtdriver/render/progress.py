"""A one-line progress bar for long CLI work (a sync of thousands of
providers).

It draws on stderr only when stderr is a terminal and the user did not ask
for ``--quiet``; otherwise every call is a no-op, so pipes and log files
never see it.  Redraws are rate-limited, and the line is cleared at the end
so the command's own output starts on a clean line.
"""

from __future__ import annotations

import contextlib
import sys
import time
from collections.abc import Callable, Iterator
from typing import TextIO

#: Seconds between redraws (the last step always draws).
MIN_INTERVAL = 0.1
_WIDTH = 30


class Progress:
    """``progress(done, total)`` draws ``label [####----] done/total``.

    Args:
        label: what is progressing, e.g. ``"syncing"``.
        stream: where to draw (default: ``sys.stderr``).
        enabled: draw at all; :func:`progress_bar` decides it from the
            stream and ``--quiet``.
        clock: monotonic seconds (tests pass their own).
    """

    def __init__(self, label: str, *, stream: TextIO | None = None,
                 enabled: bool = True,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.label = label
        self.stream = stream if stream is not None else sys.stderr
        self.enabled = enabled
        self.clock = clock
        self._last: float | None = None
        self._drawn = False

    def __call__(self, done: int, total: int) -> None:
        if not self.enabled:
            return
        now = self.clock()
        if (done < total and self._last is not None
                and now - self._last < MIN_INTERVAL):
            return
        self._last = now
        filled = _WIDTH * done // total if total else _WIDTH
        bar = "#" * filled + "-" * (_WIDTH - filled)
        self.stream.write(f"\r{self.label} [{bar}] {done}/{total}")
        self.stream.flush()
        self._drawn = True

    def clear(self) -> None:
        """Erase the bar's line (nothing when it never drew)."""
        if self._drawn:
            self.stream.write("\r\x1b[K")
            self.stream.flush()
            self._drawn = False


def wanted(stream: TextIO, *, quiet: bool) -> bool:
    """Whether a bar should draw on ``stream``: a terminal, not quiet."""
    if quiet:
        return False
    try:
        return stream.isatty()
    except (AttributeError, ValueError):  # no isatty, or closed
        return False


@contextlib.contextmanager
def progress_bar(label: str, *, quiet: bool = False,
                 stream: TextIO | None = None) -> Iterator[Progress]:
    """A :class:`Progress` on ``stream`` (stderr) for the ``with`` block,
    a no-op off a terminal or when ``quiet``; its line cleared at the end."""
    stream = stream if stream is not None else sys.stderr
    bar = Progress(label, stream=stream,
                   enabled=wanted(stream, quiet=quiet))
    try:
        yield bar
    finally:
        bar.clear()
