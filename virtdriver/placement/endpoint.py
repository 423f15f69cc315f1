"""What a Placement endpoint URL must be, checked once for every place one
is given (``--placement-url``, ``[placement] endpoint_override``).

keystoneauth1 fills ``%(project_id)s``-style fields into an endpoint with
Python's ``%`` operator, so any other ``%`` in it (``%zz``, a
percent-encoded byte) fails inside the request; a Placement endpoint
needs neither, so a ``%`` is refused up front.  Pure: no HTTP.
"""

from __future__ import annotations

import urllib.parse

#: What to give instead, for messages.
EXAMPLE = "http://placement.example:8778"
#: The address a Placement of this process (embedded, ``placement
#: serve``) listens on and is named by.
LOOPBACK_HOST = "127.0.0.1"


def endpoint_problem(url: str) -> str | None:
    """Why ``url`` cannot be a Placement endpoint (words that follow the
    URL in a message), or ``None`` when it can."""
    try:
        parts = urllib.parse.urlsplit(url)
        parts.port  # noqa: B018 (a port that is not a number raises)
    except ValueError as exc:
        return f"is not a URL ({exc})"
    if (parts.scheme not in ("http", "https") or not parts.hostname
            or any(char.isspace() for char in url)):
        return "is not an http:// or https:// URL with a host"
    if "%" in url:
        return ("holds a '%', which keystoneauth would read as the start "
                "of a %(name)s field")
    return None
