"""Placement as a cloud runs it: several WSGI worker processes, one database.

:func:`serve_workers` runs the embedded Placement application
(:func:`~.embedded.build_app`) under gunicorn's pre-fork server: the
application is built once in the master (its schema synced once, its
imports shared by the workers), each worker then opens its own database
connections (the engine's pool is renewed after the fork), and the
kernel hands each new connection to whichever worker accepts it first —
so two requests for one provider may be served by two processes, and a
generation conflict between them is Placement's 409 as in a cloud.

Every request is timed in the worker that serves it (:class:`Timing`):
one ``placement-request`` line on stderr (the service's log) with the
worker's pid, method, path, status, wall and CPU seconds, so tests and
benchmarks can tell workers apart and read Placement's own cost.

Used through :class:`~.loopback.PlacementServer` (``workers=N``) or
``python -m virtdriver.placement.loopback --db URL --workers N``.
gunicorn comes with the ``test`` extra (``pip install gunicorn``).
"""

from __future__ import annotations

import os
import re
import socket
import sys
import time
from collections.abc import Callable, Iterable
from typing import Any

#: A timing line: ``placement-request pid=.. method=.. path=.. status=..
#: wall=.. cpu=..`` (seconds).
TIMING = re.compile(
    r"placement-request pid=(?P<pid>\d+) method=(?P<method>\S+) "
    r"path=(?P<path>\S+) status=(?P<status>\d+) bytes=(?P<bytes>\d+) "
    r"wall=(?P<wall>[\d.]+) cpu=(?P<cpu>[\d.]+)")


class Timing:
    """WSGI middleware: time each request and log one line (module doc).

    The CPU time is the worker process's (``time.process_time``): exact
    for gunicorn's sync workers, which serve one request at a time; an
    upper bound with threaded ones.
    """

    def __init__(self, app: Callable, stream: Any = None) -> None:
        self.app = app
        self.stream = stream

    def __call__(self, environ: dict, start_response: Callable
                 ) -> Iterable[bytes]:
        wall, cpu = time.perf_counter(), time.process_time()
        status: list[str] = []

        def started(code, headers, exc_info=None):
            status.append(code)
            return start_response(code, headers, exc_info)

        body = b"".join(self.app(environ, started))
        path = environ.get("PATH_INFO", "/")
        if environ.get("QUERY_STRING"):
            path += "?" + environ["QUERY_STRING"]
        stream = self.stream or sys.stderr
        stream.write(
            f"placement-request pid={os.getpid()} "
            f"method={environ.get('REQUEST_METHOD')} "
            f"path={path.replace(' ', '%20')} "
            f"status={(status or ['0'])[0].split()[0]} bytes={len(body)} "
            f"wall={time.perf_counter() - wall:.6f} "
            f"cpu={time.process_time() - cpu:.6f}\n")
        stream.flush()
        return [body]


def timings(lines: Iterable[str]) -> list[dict]:
    """The timing lines among ``lines`` (a service's log), parsed."""
    found = []
    for line in lines:
        match = TIMING.search(line)
        if match:
            row = match.groupdict()
            found.append({**row, "pid": int(row["pid"]),
                          "status": int(row["status"]),
                          "bytes": int(row["bytes"]),
                          "wall": float(row["wall"]),
                          "cpu": float(row["cpu"])})
    return found


def serve_workers(db: str, *, port: int, workers: int,
                  announce: Callable[[int], None], threads: int = 1) -> None:
    """Serve Placement on database ``db`` with ``workers`` gunicorn
    workers on ``127.0.0.1:port`` (``0``: any free port) until SIGTERM;
    ``announce(port)`` once the socket listens.  ``threads`` above 1:
    gunicorn's threaded workers, each serving that many requests at once
    (the timing lines' CPU then includes the other threads').

    Raises:
        EmbeddedError: gunicorn is not installed, or Placement cannot
            start on ``db``.
    """
    from virtdriver.placement.embedded import HOST, EmbeddedError, build_app

    try:
        from gunicorn.app.base import BaseApplication
    except ImportError:
        raise EmbeddedError(
            "gunicorn is not installed; `pip install gunicorn` (the test "
            "extra has it) or serve without --workers") from None
    app = Timing(build_app(db))
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind((HOST, port))
    listener.listen(128)
    listener.set_inheritable(True)
    settings = {
        "bind": [f"fd://{listener.fileno()}"], "workers": workers,
        "worker_class": "gthread" if threads > 1 else "sync",
        "threads": threads, "preload_app": True, "timeout": 300,
        "graceful_timeout": 5, "loglevel": "warning", "accesslog": None,
        "post_fork": _renew_pool, "proc_name": "virtdriver-placement"}

    class Server(BaseApplication):
        def load_config(self) -> None:
            for name, value in settings.items():
                self.cfg.set(name, value)

        def load(self) -> Callable:
            return app

    announce(listener.getsockname()[1])
    Server().run()


def _renew_pool(server: Any, worker: Any) -> None:
    """In a new worker: its own connections, never the master's (which
    the fork copied); the master's are left open for it."""
    from placement import db_api

    db_api.get_placement_engine().dispose(close=False)
