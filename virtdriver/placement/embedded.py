"""A real Placement for one machine: its WSGI application, in-process.

The ``openstack-placement`` WSGI application, configured for one
database (a SQLite file by default) with ``auth_strategy = noauth2`` and
its schema created on start (``[placement_database] sync_on_startup``,
what ``placement-manage db sync`` does):

* :func:`build_app` — the configured WSGI application.  Placement keeps
  one database engine per process, so one process serves one database.
* :func:`in_process_client` — a :class:`~.client.PlacementClient` whose
  requests call that application directly (:class:`WSGITransport`, no
  socket): the embedded default for ``virtdriver sync`` with no URL.
* :mod:`~.loopback` — the application as an HTTP service on 127.0.0.1
  (:class:`~.loopback.PlacementServer`, a child process).
"""

from __future__ import annotations

import errno
import io
import os
import pathlib
import sys
import urllib.parse
import warnings
from collections.abc import Callable
from typing import Any

from virtdriver.placement.endpoint import LOOPBACK_HOST

#: The only address the service listens on (``placement serve`` puts its
#: owner's token in front of it).
HOST = LOOPBACK_HOST
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
