"""The workers' per-request timing (``virtdriver.placement.workers``):
the line each request logs, and its parse."""

from __future__ import annotations

import io

from virtdriver.placement.workers import Timing, timings


def app(environ, start_response):
    status = "409 Conflict" if environ["REQUEST_METHOD"] == "PUT" \
        else "200 OK"
    start_response(status, [("Content-Type", "application/json")])
    return [b'{"a": ', b'1}']


def call(wrapped, method: str, path: str, query: str = "") -> bytes:
    started = []
    body = wrapped({"REQUEST_METHOD": method, "PATH_INFO": path,
                    "QUERY_STRING": query},
                   lambda status, headers, exc_info=None:
                   started.append(status))
    assert started
    return b"".join(body)


def test_each_request_logs_one_line_that_parses_back():
    log = io.StringIO()
    wrapped = Timing(app, stream=log)

    assert call(wrapped, "GET", "/resource_providers",
                "member_of=in:a,b") == b'{"a": 1}'
    assert call(wrapped, "PUT", "/resource_providers/u/traits") == \
        b'{"a": 1}'

    rows = timings(["unrelated line", *log.getvalue().splitlines()])
    assert [(r["method"], r["path"], r["status"], r["bytes"]) for r in rows] \
        == [("GET", "/resource_providers?member_of=in:a,b", 200, 8),
            ("PUT", "/resource_providers/u/traits", 409, 8)]
    assert all(r["wall"] >= 0 and r["cpu"] >= 0 and r["pid"] > 0
               for r in rows)
