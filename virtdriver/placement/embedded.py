"""A real Placement for one machine: in-process, or a loopback service.

The ``openstack-placement`` WSGI application, configured for one
database (a SQLite file by default) with ``auth_strategy = noauth2`` and
its schema created on start (``[placement_database] sync_on_startup``,
what ``placement-manage db sync`` does):

* :func:`build_app` — the configured WSGI application.  Placement keeps
  one database engine per process, so one process serves one database.
* :func:`in_process_client` — a :class:`~.client.PlacementClient` whose
  requests call that application directly (:class:`WSGITransport`, no
  socket): the embedded default for ``virtdriver sync`` with no URL.
* :class:`PlacementServer` — the application as an HTTP service on
  127.0.0.1 in a child process (``python -m
  virtdriver.placement.embedded --db PATH``), for tests and for several
  processes sharing one Placement; ``workers=N`` serves it with N
  gunicorn worker processes (:mod:`~.workers`), as a cloud runs it.
  Loopback only: the service has no authentication.
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import io
import os
import pathlib
import select
import signal
import subprocess
import sys
import threading
import time
import urllib.parse
import warnings
from collections.abc import Callable, Iterable
from typing import Any

from virtdriver.stop_request import StopRequest

#: The only address the service listens on: it has no authentication.
HOST = "127.0.0.1"
#: Threads of each gunicorn worker with ``--workers N --threads``.
THREADS_PER_WORKER = 4
#: The in-process service's made-up URL (never resolved: no socket).
IN_PROCESS_URL = "http://placement.in-process.invalid"
_configured: str | None = None


class EmbeddedError(RuntimeError):
    """The embedded Placement cannot start."""


def database_url(db: str | os.PathLike[str]) -> str:
    """A SQLAlchemy URL: a path becomes ``sqlite:////abs/path``; a URL
    (``postgresql+psycopg2://…``) is kept."""
    text = os.fspath(db)
    if "://" in text:
        return text
    return "sqlite:///" + str(pathlib.Path(text).resolve())


def placement_config(db: str | os.PathLike[str]) -> Any:
    """Placement's ``ConfigOpts`` for database ``db``: ``noauth2``, schema
    synced on start, no config file or directory read."""
    from oslo_config import cfg
    from placement import conf as placement_conf

    config = cfg.ConfigOpts()
    placement_conf.register_opts(config)
    config.set_override("connection", database_url(db),
                        group="placement_database")
    config.set_override("sync_on_startup", True, group="placement_database")
    config.set_override("auth_strategy", "noauth2", group="api")
    config([], project="placement", default_config_files=[],
           default_config_dirs=[])
    return config


def build_app(db: str | os.PathLike[str]) -> Callable:
    """Placement's WSGI application on database ``db`` (created and
    migrated if need be).

    Raises:
        EmbeddedError: this process already serves another database
            (Placement configures its engine once per process), or the
            database cannot be opened or migrated.
    """
    global _configured
    url = database_url(db)
    if _configured is not None and _configured != url:
        raise EmbeddedError(
            f"this process already runs Placement on {_configured}; one "
            f"process serves one database — use a PlacementServer (a child "
            f"process) for {url}")
    if url.startswith("sqlite:///"):
        private_database(pathlib.Path(url.removeprefix("sqlite:///")))
    with warnings.catch_warnings():
        # webob (Placement's) imports cgi, deprecated in Python 3.11.
        warnings.simplefilter("ignore", DeprecationWarning)
        from placement import db_api, deploy
    from virtdriver.placement.schema_checks import check_schemas_once

    check_schemas_once()  # half a GET's CPU, the same answers
    config = placement_config(db)
    try:
        db_api.configure(config)
        app = deploy.loadapp(config)
    except Exception as exc:   # oslo.db / alembic: many kinds
        raise EmbeddedError(
            f"cannot start Placement on {url}: {type(exc).__name__}: {exc}; "
            "check that the database is writable and not another "
            "program's") from exc
    _configured = url
    return app


def private_database(path: pathlib.Path) -> None:
    """Make the SQLite file ``path`` (and its journals) ``0600``: created
    empty with that mode if missing (SQLite gives its ``-journal``,
    ``-wal`` and ``-shm`` files the database's mode), tightened if older.

    Raises:
        EmbeddedError: ``path`` is a symbolic link, not a regular file, or
            another user could write it; or it cannot be created.
    """
    from virtdriver.state_dir import make_dirs

    try:
        make_dirs(path.parent)
    except OSError as exc:
        raise EmbeddedError(f"cannot create {path.parent}: "
                            f"{exc.strerror or exc}") from None
    _private_file(path, os.O_CREAT)
    for suffix in ("-journal", "-wal", "-shm"):
        _private_file(pathlib.Path(f"{path}{suffix}"), 0)


def _private_file(path: pathlib.Path, create: int) -> None:
    """Open ``path`` without following a link (creating it ``0600`` if
    ``create``), check it is private and make it ``0600``; a missing
    file that is not created is left missing."""
    from virtdriver.state_dir import (
        UnsafeStateError, check_regular, not_followed)

    what = "the Placement database"
    try:
        fd = os.open(path, os.O_RDWR | os.O_NOFOLLOW | os.O_NONBLOCK
                     | os.O_CLOEXEC | create, 0o600)
    except FileNotFoundError:
        if create:
            raise EmbeddedError(f"cannot create {what} {path}: no such "
                                "directory") from None
        return
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise EmbeddedError(str(not_followed(path, what))) from None
        raise EmbeddedError(
            f"cannot open {what} {path}: {exc.strerror or exc}; make the "
            "state directory writable or use another one") from None
    try:
        check_regular(path, os.fstat(fd), what)
        os.fchmod(fd, 0o600)
    except UnsafeStateError as exc:
        raise EmbeddedError(str(exc)) from None
    finally:
        os.close(fd)


class WSGITransport:
    """A ``requests`` transport adapter that calls a WSGI app in-process.

    Mount it on a ``requests.Session`` (:func:`in_process_client` does);
    keystoneauth1 then works unchanged, with no socket.
    """

    def __init__(self, app: Callable) -> None:
        self.app = app

    def send(self, request: Any, **kwargs: Any) -> Any:
        import requests
        from requests.structures import CaseInsensitiveDict

        url = urllib.parse.urlsplit(request.url)
        body = request.body or b""
        if isinstance(body, str):
            body = body.encode("utf-8")
        environ = {
            "REQUEST_METHOD": request.method, "SCRIPT_NAME": "",
            "PATH_INFO": urllib.parse.unquote(url.path) or "/",
            "QUERY_STRING": url.query, "SERVER_NAME": url.hostname or "",
            "SERVER_PORT": str(url.port or 80), "SERVER_PROTOCOL":
            "HTTP/1.1", "wsgi.version": (1, 0), "wsgi.url_scheme":
            url.scheme, "wsgi.input": io.BytesIO(body),
            "wsgi.errors": sys.stderr, "wsgi.multithread": True,
            "wsgi.multiprocess": False, "wsgi.run_once": False,
            "CONTENT_LENGTH": str(len(body)), "REMOTE_ADDR": HOST,
        }
        for name, value in request.headers.items():
            key = name.upper().replace("-", "_")
            if key == "CONTENT_TYPE":
                environ[key] = value
            elif key != "CONTENT_LENGTH":
                environ[f"HTTP_{key}"] = value
        started: dict[str, Any] = {}

        def start_response(status, headers, exc_info=None):
            started["status"], started["headers"] = status, headers

        chunks = self.app(environ, start_response)
        try:
            content = b"".join(chunks)
        finally:
            if hasattr(chunks, "close"):
                chunks.close()
        response = requests.Response()
        code, _, reason = started["status"].partition(" ")
        response.status_code, response.reason = int(code), reason
        response.headers = CaseInsensitiveDict(started["headers"])
        response._content = content
        response.raw = io.BytesIO(content)
        response.url, response.request = request.url, request
        response.encoding = "utf-8"
        return response

    def close(self) -> None:
        """Nothing to release."""


def in_process_client(db: str | os.PathLike[str], **client_options: Any):
    """A :class:`~.client.PlacementClient` on an in-process Placement on
    ``db`` (see :func:`build_app` for the one-database-per-process rule)."""
    import requests

    from virtdriver.placement.client import PlacementClient

    session = requests.Session()
    session.trust_env = False
    session.mount(IN_PROCESS_URL, WSGITransport(build_app(db)))
    return PlacementClient.from_url(
        IN_PROCESS_URL, requests_session=session,
        endpoint_id=in_process_endpoint(db), **client_options)


def in_process_endpoint(db: str | os.PathLike[str]) -> str:
    """How the sync state names the in-process Placement on ``db``."""
    return f"in-process:{database_url(db)}"


# -- the loopback service ---------------------------------------------------


def serve(db: str | os.PathLike[str], *, port: int = 0,
          threads: bool = False, announce: Callable[[int], None] = print
          ) -> None:
    """Serve Placement on ``HOST:port`` (``0``: any free port) until
    SIGTERM/SIGINT; ``announce(port)`` once it answers."""
    import socketserver
    from wsgiref import simple_server

    class QuietHandler(simple_server.WSGIRequestHandler):
        """No access log on stderr (Placement logs requests itself)."""

        def log_message(self, format: str, *args: Any) -> None:
            pass

    class ThreadingServer(socketserver.ThreadingMixIn,
                          simple_server.WSGIServer):
        daemon_threads = True

    app = build_app(db)
    server_class = ThreadingServer if threads else simple_server.WSGIServer
    server = simple_server.make_server(HOST, port, app,
                                       server_class=server_class,
                                       handler_class=QuietHandler)

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
        command = [sys.executable, "-m", "virtdriver.placement.embedded",
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
    """``python -m virtdriver.placement.embedded --db PATH [--port N]``."""
    parser = argparse.ArgumentParser(
        prog="python -m virtdriver.placement.embedded",
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
