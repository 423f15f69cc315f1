"""Placement as an HTTP service on loopback: :func:`serve` in this
process, :class:`PlacementServer` in a child one (``python -m
virtdriver.placement.loopback --db PATH``), for tests and for several
processes sharing one Placement; ``workers=N`` serves it with N gunicorn
worker processes (:mod:`~.workers`), as a cloud runs it.  Loopback only:
the service has no authentication of its own (``noauth2``), so what other
users must not reach is served behind :mod:`~.serve_token`'s gate
(``virtdriver placement serve``).  The application is
:func:`~.embedded.build_app`'s.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import pathlib
import select
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

from virtdriver.placement.embedded import (
    HOST, EmbeddedError, build_app, database_url)
from virtdriver.stop_request import StopRequest

#: Threads of each gunicorn worker with ``--workers N --threads``.
THREADS_PER_WORKER = 4



def serve(db: str | os.PathLike[str], *, port: int = 0,
          threads: bool = False, announce: Callable[[int], None] = print,
          initialising: Callable[[], contextlib.AbstractContextManager]
          = contextlib.nullcontext,
          wrap: Callable[[Callable, int], Callable] | None = None) -> None:
    """Serve Placement on ``HOST:port`` (``0``: any free port) until
    SIGTERM/SIGINT; ``announce(port)`` once it answers.

    ``initialising()`` is held while Placement starts (its schema created
    or migrated), and only then (``placement serve``: the state
    directory's lock).  ``wrap(app, port)``, once the port is bound,
    returns the application actually served (``placement serve``: the
    token gate).
    """
    import socketserver
    from wsgiref import simple_server

    class QuietHandler(simple_server.WSGIRequestHandler):
        """No access log on stderr (Placement logs requests itself)."""

        def log_message(self, format: str, *args: Any) -> None:
            pass

    class ThreadingServer(socketserver.ThreadingMixIn,
                          simple_server.WSGIServer):
        daemon_threads = True

    with initialising():
        app = build_app(db)
    server_class = ThreadingServer if threads else simple_server.WSGIServer
    server = simple_server.make_server(HOST, port, app,
                                       server_class=server_class,
                                       handler_class=QuietHandler)
    if wrap is not None:
        try:
            server.set_app(wrap(app, server.server_address[1]))
        except BaseException:
            server.server_close()
            raise

    # Not sys.exit: wsgiref's handler swallows it mid-request.  The loop
    # ends after the request in hand; shutdown() must come from another
    # thread than serve_forever's, started now: a thread started in the
    # handler could wait for a lock the interrupted loop holds (it starts
    # a thread per request with --threads).
    stopping = StopRequest()

    def shut_down_when_asked() -> None:
        while not stopping.wait(3600):
            pass
        server.shutdown()

    threading.Thread(target=shut_down_when_asked, daemon=True).start()
    signal.signal(signal.SIGTERM, lambda *_: stopping.set())
    signal.signal(signal.SIGINT, lambda *_: stopping.set())
    announce(server.server_address[1])
    try:
        server.serve_forever(poll_interval=0.05)
    finally:
        server.server_close()


class PlacementServer:
    """Placement as an HTTP service on 127.0.0.1, in a child process.

    Args:
        db: the database (a SQLite path, or a SQLAlchemy URL).
        port: the port; ``0`` lets the first start pick a free one, and
            restarts reuse it (so clients keep their URL).
        log: the child's stderr goes here (default ``<db>.log`` beside a
            SQLite file, else discarded).
        threads: one thread per request (for databases that take
            concurrent writers; SQLite serialises them anyway).
        workers: serve with this many gunicorn worker processes
            (:mod:`~.workers`: every request timed in the log), each
            with :data:`THREADS_PER_WORKER` threads if ``threads``;
            ``0``: one process (wsgiref).

    Use :meth:`start` then :meth:`wait_ready` (or :meth:`run`, or ``with``).
    """

    def __init__(self, db: str | os.PathLike[str], *, port: int = 0,
                 log: pathlib.Path | None = None, threads: bool = False,
                 workers: int = 0) -> None:
        self.db = db
        self.port = port
        url = database_url(db)
        if log is None and url.startswith("sqlite:///"):
            log = pathlib.Path(url.removeprefix("sqlite:///") + ".log")
        self.log = log
        self.threads = threads
        self.workers = workers
        self._process: subprocess.Popen | None = None
        self._stopping: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        """``http://127.0.0.1:<port>`` (known once started)."""
        if not self.port:
            raise EmbeddedError("the Placement server was not started yet")
        return f"http://{HOST}:{self.port}"

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def start(self) -> PlacementServer:
        """Spawn the child (returns at once; :meth:`wait_ready` waits)."""
        if self.running:
            return self
        if self._stopping is not None:
            self.stop()   # reap the old child: it holds the port
        command = [sys.executable, "-m", "virtdriver.placement.loopback",
                   "--db", os.fspath(self.db), "--port", str(self.port)]
        if self.threads:
            command.append("--threads")
        if self.workers:
            command += ["--workers", str(self.workers)]
        stderr = (open(self.log, "ab") if self.log is not None
                  else subprocess.DEVNULL)
        try:
            self._process = subprocess.Popen(
                command, stdout=subprocess.PIPE, stderr=stderr,
                stdin=subprocess.DEVNULL, env=_child_env())
        finally:
            if stderr is not subprocess.DEVNULL:
                stderr.close()
        self._announced = False
        return self

    def wait_ready(self, timeout: float = 30.0) -> PlacementServer:
        """Wait until the child listens and ``GET /`` answers.

        Raises:
            EmbeddedError: it exited or did not answer in time (the
                message quotes the end of its log).
        """
        deadline = time.monotonic() + timeout
        process = self._process
        if process is None:
            raise EmbeddedError("start() the Placement server first")
        if not self._announced:
            self.port = self._read_port(process, deadline)
            self._announced = True
        while time.monotonic() < deadline:
            if _answers(self.url):
                return self
            if process.poll() is not None:
                break
            time.sleep(0.02)
        raise EmbeddedError(self._failure("did not answer GET /"))

    def run(self, timeout: float = 30.0) -> PlacementServer:
        """:meth:`start` and :meth:`wait_ready`."""
        return self.start().wait_ready(timeout)

    def stop(self, timeout: float = 10.0, *, wait: bool = True) -> None:
        """Stop the child (SIGTERM, then SIGKILL after ``timeout``); the
        database stays.  ``wait=False`` only sends SIGTERM: a later
        ``stop()`` reaps the child."""
        process = self._process
        if process is None:
            process = self._stopping
        if process is None:
            return
        if not wait:
            if process.poll() is None:
                process.terminate()
            self._process, self._stopping = None, process
            return
        self._process = self._stopping = None
        if process.poll() is None:
            process.terminate()
            try:
                process.wait(timeout)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        if process.stdout is not None:
            process.stdout.close()

    def restart(self, timeout: float = 30.0) -> PlacementServer:
        """Stop and start again on the same database and port."""
        self.stop()
        return self.run(timeout)

    def client(self, cls: type | None = None, **options: Any):
        """A :class:`~.client.PlacementClient` (or subclass ``cls``) for
        this service: ``admin`` token, no proxies from the environment."""
        import requests

        from virtdriver.placement.client import PlacementClient

        session = requests.Session()
        session.trust_env = False
        return (cls or PlacementClient).from_url(
            self.url, requests_session=session, **options)

    def __enter__(self) -> PlacementServer:
        return self.run()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _read_port(self, process: subprocess.Popen, deadline: float) -> int:
        line = b""
        while not line.endswith(b"\n"):
            remaining = deadline - time.monotonic()
            ready, _, _ = select.select([process.stdout], [], [],
                                        max(0.0, remaining))
            if not ready:
                raise EmbeddedError(self._failure("did not start in time"))
            chunk = os.read(process.stdout.fileno(), 64)
            if not chunk:
                process.wait()
                raise EmbeddedError(self._failure(
                    f"exited with status {process.returncode}"))
            line += chunk
        text = line.decode("ascii", "replace").strip()
        if not text.startswith("listening "):
            raise EmbeddedError(self._failure(f"said {text!r}"))
        return int(text.rsplit(":", 1)[1])

    def _failure(self, what: str) -> str:
        tail = ""
        if self.log is not None:
            with contextlib.suppress(OSError):
                tail = self.log.read_text(errors="replace")[-1500:].strip()
        return (f"Placement on {database_url(self.db)} {what}"
                + (f"; its log ({self.log}) ends: {tail}" if tail else "")
                + "; check that openstack-placement is installed "
                "(pip install openstack-placement) and the port is free")


def _answers(url: str) -> bool:
    import urllib.request

    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(url + "/", timeout=2) as response:
            return response.status == 200
    except OSError:
        return False


def _child_env() -> dict[str, str]:
    env = dict(os.environ)
    root = str(pathlib.Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = os.pathsep.join(
        p for p in (root, env.get("PYTHONPATH")) if p)
    return env


def main(argv: Iterable[str] | None = None) -> int:
    """``python -m virtdriver.placement.loopback --db PATH [--port N]``."""
    parser = argparse.ArgumentParser(
        prog="python -m virtdriver.placement.loopback",
        description=f"Serve openstack-placement on {HOST} (noauth2).")
    parser.add_argument("--db", required=True,
                        help="SQLite file, or a SQLAlchemy database URL")
    parser.add_argument("--port", type=int, default=0,
                        help="port (default: any free one)")
    parser.add_argument("--threads", action="store_true",
                        help="one thread per request")
    parser.add_argument("--workers", type=int, default=0,
                        help="gunicorn worker processes (default: none, "
                        "one process)")
    args = parser.parse_args(list(argv) if argv is not None else None)

    def announce(port: int) -> None:
        sys.stdout.write(f"listening {HOST}:{port}\n")
        sys.stdout.flush()

    try:
        if args.workers:
            from virtdriver.placement.workers import serve_workers

            serve_workers(args.db, port=args.port, workers=args.workers,
                          announce=announce,
                          threads=THREADS_PER_WORKER if args.threads else 1)
        else:
            serve(args.db, port=args.port, threads=args.threads,
                  announce=announce)
    except (EmbeddedError, OSError) as exc:
        print(f"placement: {exc}", file=sys.stderr)
        return 3
    return 0


if __name__ == "__main__":
    sys.exit(main())
