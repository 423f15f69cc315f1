"""Faulty environments on loopback for the Placement tests: a proxy in
front of the real Placement that fails chosen requests or speaks TLS
(:class:`Proxy`), a throw-away certificate authority (:func:`make_ca`),
and a keystone that answers 5xx (:class:`BrokenKeystone`)."""

from __future__ import annotations

import http.client
import json
import pathlib
import ssl
import subprocess
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

#: ``fault(n, method, path)`` for the n-th request (1-based): ``None`` to
#: forward it, ``"503"`` to answer 503 without forwarding, ``"reset"`` to
#: forward it and close the connection without an answer, ``"500-after"``
#: to forward it and answer 500 (Placement did it; the answer is lost).
Fault = Callable[[int, str, str], str | None]

_HOP = {"connection", "keep-alive", "transfer-encoding", "content-length"}


class _Server(ThreadingHTTPServer):
    daemon_threads = True


class _Loopback:
    """A threaded HTTP(S) server on 127.0.0.1, port 0: ``url``,
    ``close()``."""

    def _serve(self, handler, tls: ssl.SSLContext | None = None) -> None:
        self.server = _Server(("127.0.0.1", 0), handler)
        if tls is not None:
            self.server.socket = tls.wrap_socket(self.server.socket,
                                                 server_side=True)
        scheme = "https" if tls is not None else "http"
        self.url = f"{scheme}://127.0.0.1:{self.server.server_port}"
        threading.Thread(target=self.server.serve_forever,
                         daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


class Proxy(_Loopback):
    """An HTTP (or, with ``tls``, HTTPS) proxy on 127.0.0.1, port 0, in
    front of ``upstream``; ``fault`` decides per request.  ``log`` lists
    ``(method, path, what)`` for every request."""

    def __init__(self, upstream: str, *, fault: Fault | None = None,
                 tls: ssl.SSLContext | None = None) -> None:
        self.upstream = urlsplit(upstream)
        self.fault = fault or (lambda n, method, path: None)
        self.log: list[tuple[str, str, str]] = []
        self._lock = threading.Lock()
        self._serve(self._handler(), tls)

    def what(self, what: str) -> list[tuple[str, str]]:
        """``(method, path)`` of the requests that got ``what``."""
        return [(m, p) for m, p, w in self.log if w == what]

    def _decide(self, method: str, path: str) -> str | None:
        with self._lock:
            n = len(self.log) + 1
            what = self.fault(n, method, path)
            self.log.append((method, path, what or "forwarded"))
            return what

    def _forward(self, method: str, path: str, headers, body: bytes):
        upstream = http.client.HTTPConnection(
            self.upstream.hostname, self.upstream.port, timeout=30)
        try:
            upstream.request(method, path, body=body or None, headers={
                k: v for k, v in headers.items() if k.lower() not in _HOP})
            answer = upstream.getresponse()
            return answer.status, answer.getheaders(), answer.read()
        finally:
            upstream.close()

    def _handler(self):
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:
                pass

            def _any(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                what = proxy._decide(self.command, self.path)
                if what == "503":
                    payload = json.dumps({"errors": [{
                        "status": 503, "title": "Service Unavailable",
                        "detail": "injected by the test's proxy"}]}).encode()
                    self.send_response(503)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(payload)))
                    self.end_headers()
                    self.wfile.write(payload)
                    return
                status, headers, payload = proxy._forward(
                    self.command, self.path, self.headers, body)
                if what == "reset":          # it landed; the answer is lost
                    self.close_connection = True
                    return
                if what == "500-after":      # it landed; a 500 instead
                    status, payload = 500, json.dumps({"errors": [{
                        "status": 500, "title": "Internal Server Error",
                        "detail": "injected by the test's proxy after "
                                  "forwarding"}]}).encode()
                    headers = [("Content-Type", "application/json")]
                self.send_response(status)
                for key, value in headers:
                    if key.lower() not in _HOP:
                        self.send_header(key, value)
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            do_GET = do_PUT = do_POST = do_DELETE = do_PATCH = _any

        return Handler


def make_ca(directory: pathlib.Path) -> dict[str, pathlib.Path]:
    """A throw-away CA, a server certificate for 127.0.0.1 and a client
    certificate signed by it, made with the ``openssl`` command: paths
    ``ca``, ``cert``, ``key``, ``client``, ``client_key``."""
    directory.mkdir(parents=True, exist_ok=True)
    ca, ca_key = directory / "ca.pem", directory / "ca.key"
    cert, key = directory / "server.pem", directory / "server.key"
    csr, ext = directory / "server.csr", directory / "server.ext"
    ext.write_text("basicConstraints = critical, CA:FALSE\n"
                   "keyUsage = critical, digitalSignature\n"
                   "extendedKeyUsage = serverAuth\n"
                   "subjectAltName = IP:127.0.0.1\n"
                   "subjectKeyIdentifier = hash\n"
                   "authorityKeyIdentifier = keyid, issuer\n")
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
          "-nodes"]

    def openssl(*args) -> None:
        subprocess.run(["openssl", *args], check=True, capture_output=True)

    openssl("req", "-x509", *ec, "-keyout", ca_key, "-out", ca, "-days", "2",
            "-subj", "/CN=virtdriver test CA",
            "-addext", "basicConstraints=critical,CA:TRUE",
            "-addext", "keyUsage=critical,keyCertSign,cRLSign")
    openssl("req", *ec, "-keyout", key, "-out", csr, "-subj", "/CN=127.0.0.1")
    openssl("x509", "-req", "-in", csr, "-CA", ca, "-CAkey", ca_key,
            "-CAcreateserial", "-out", cert, "-days", "2", "-extfile", ext)
    client, client_key = directory / "client.pem", directory / "client.key"
    ext.write_text("basicConstraints = critical, CA:FALSE\n"
                   "keyUsage = critical, digitalSignature\n"
                   "extendedKeyUsage = clientAuth\n"
                   "subjectKeyIdentifier = hash\n"
                   "authorityKeyIdentifier = keyid, issuer\n")
    openssl("req", *ec, "-keyout", client_key, "-out", csr, "-subj",
            "/CN=virtdriver agent")
    openssl("x509", "-req", "-in", csr, "-CA", ca, "-CAkey", ca_key,
            "-CAcreateserial", "-out", client, "-days", "2", "-extfile", ext)
    return {"ca": ca, "cert": cert, "key": key, "client": client,
            "client_key": client_key}


def server_context(paths: dict[str, pathlib.Path], *,
                   client_cert: bool = False) -> ssl.SSLContext:
    """A server-side TLS context with :func:`make_ca`'s certificate;
    ``client_cert``: clients must present one the CA signed."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(paths["cert"], paths["key"])
    if client_cert:
        context.verify_mode = ssl.CERT_REQUIRED
        context.load_verify_locations(paths["ca"])
    return context


class BrokenKeystone(_Loopback):
    """A keystone on loopback that answers ``status`` to every request."""

    def __init__(self, status: int = 503) -> None:
        self.calls: list[str] = []
        keystone = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:
                pass

            def _any(self) -> None:
                keystone.calls.append(f"{self.command} {self.path}")
                length = int(self.headers.get("Content-Length") or 0)
                if length:
                    self.rfile.read(length)
                payload = json.dumps({"error": {
                    "code": status, "message": "keystone is failing",
                    "title": "Service Unavailable"}}).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            do_GET = do_POST = _any

        self._serve(Handler)
