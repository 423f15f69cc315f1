"""``virtdriver placement serve`` answers its owner only: a token per run.

Placement's ``noauth2`` mode takes any token, and anyone on the machine can
reach 127.0.0.1.  So the served application sits behind :class:`TokenGate`:
every request, the version document included, must carry ``X-Auth-Token``
equal to a random token made for this run (:func:`new_token`), or it gets
``401`` and nothing reaches Placement.  The token is kept in the state
directory as ``placement-serve-<port>.token`` (:func:`token_file`), a state
file like the others: ``0600``, written atomically (never through a link),
read only when it is a private regular file, removed when the service
stops.  Only the serving user (and root) can read it; the banner names the
file, never the secret.

Clients: osc-placement sends it as ``OS_TOKEN=$(cat FILE)``; virtdriver's
own commands given ``--placement-url http://127.0.0.1:<port>`` (or
``[placement] endpoint_override``) find it in their state directory
(:func:`served_token`).
"""

from __future__ import annotations

import contextlib
import hmac
import json
import os
import pathlib
import secrets
import urllib.parse
from collections.abc import Callable, Iterable
from typing import Any

from virtdriver.placement.endpoint import LOOPBACK_HOST
from virtdriver.state_dir import chosen_path, read_state_file
from virtdriver.state_file import write_atomically

#: The token file's name before and after the port.
PREFIX, SUFFIX = "placement-serve-", ".token"
#: The host names a served Placement's URL may use (it listens on
#: LOOPBACK_HOST).
LOOPBACK_NAMES = (LOOPBACK_HOST, "localhost")
#: Random bytes in a token (URL-safe base64 of them: 43 characters).
TOKEN_BYTES = 32


def token_file(directory: str | os.PathLike[str], port: int) -> pathlib.Path:
    """``<directory>/placement-serve-<port>.token``."""
    return pathlib.Path(directory) / f"{PREFIX}{port}{SUFFIX}"


def new_token(directory: str | os.PathLike[str], port: int
              ) -> tuple[str, pathlib.Path]:
    """A fresh random token, written to :func:`token_file` (``0600``,
    atomically, replacing a stale one of an earlier run on that port).

    Raises:
        OSError: it cannot be written.
    """
    token = secrets.token_urlsafe(TOKEN_BYTES)
    path = token_file(directory, port)
    write_atomically(path, token + "\n")
    return token, path


def remove_token(path: pathlib.Path, token: str) -> None:
    """Remove the token file if it still holds ``token`` (another run on
    the same port may have replaced it)."""
    with contextlib.suppress(OSError, ValueError):
        if read_token(path) == token:
            path.unlink()


def read_token(path: pathlib.Path) -> str | None:
    """The token in ``path``, or ``None`` if there is no such file.

    Raises:
        UnsafeStateError: a link, not a regular file, or not private.
        OSError: it cannot be read.
    """
    raw = read_state_file(path)
    if raw is None:
        return None
    return raw.decode("ascii", "replace").strip() or None


def served_port(url: str) -> int | None:
    """The port of ``url`` when it names a loopback ``http`` service with
    an explicit port (what ``placement serve`` prints), else ``None``."""
    try:
        parts = urllib.parse.urlsplit(url)
        port = parts.port
    except ValueError:
        return None
    if parts.scheme != "http" or parts.hostname not in LOOPBACK_NAMES:
        return None
    return port


def served_token(url: str, directory: str | os.PathLike[str] | None = None
                 ) -> tuple[str, pathlib.Path] | None:
    """The token of the ``placement serve`` at ``url`` and its file, if
    this user's state directory (``directory``, default the one
    :func:`~virtdriver.state_dir.state_dir` would use) holds one;
    ``None`` otherwise (the URL is not on loopback, or no such file).

    Raises:
        UnsafeStateError: the file is a link or not private.
    """
    port = served_port(url)
    if port is None:
        return None
    path = token_file(directory if directory is not None
                      else chosen_path(), port)
    try:
        token = read_token(path)
    except (NotADirectoryError, PermissionError):
        return None
    return None if token is None else (token, path)


class TokenGate:
    """WSGI middleware: only requests carrying ``token`` reach ``app``.

    A request with it goes on as Placement's ``noauth2`` admin (the
    service's owner may do anything); any other gets ``401`` naming
    ``path`` (the file the token is in, not the token).
    """

    def __init__(self, app: Callable, token: str, path: pathlib.Path,
                 *, admin_token: str, admin_roles: str) -> None:
        self.app = app
        self._token = token.encode("ascii")
        self._path = path
        self._admin = admin_token
        self._roles = admin_roles

    def __call__(self, environ: dict[str, Any],
                 start_response: Callable) -> Iterable[bytes]:
        given = environ.get("HTTP_X_AUTH_TOKEN", "")
        if not hmac.compare_digest(given.encode("latin-1", "replace"),
                                   self._token):
            return self._refuse(start_response, bool(given))
        environ["HTTP_X_AUTH_TOKEN"] = self._admin
        environ["HTTP_X_ROLES"] = self._roles
        return self.app(environ, start_response)

    def _refuse(self, start_response: Callable, given: bool
                ) -> list[bytes]:
        what = "a wrong token" if given else "no token"
        detail = (f"this Placement is `virtdriver placement serve`'s and "
                  f"answers its owner only; the request had {what}: send "
                  f"the one in {self._path} (X-Auth-Token, OS_TOKEN)")
        body = json.dumps({"errors": [{
            "status": 401, "title": "Unauthorized",
            "detail": detail}]}).encode("utf-8")
        start_response("401 Unauthorized", [
            ("Content-Type", "application/json"),
            ("Content-Length", str(len(body)))])
        return [body]
