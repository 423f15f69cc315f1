"""Keep credentials out of what virtdriver prints and records.

A URL may carry a user name and password (``http://user:pw@host``);
:func:`redact_userinfo` replaces that part with ``***`` wherever it
appears in a text (a command line, a message), so a password given by
mistake never reaches standard output, an error, a state file or the
lock file's record of its holder.
"""

from __future__ import annotations

import re

# Everything between "scheme://" and the last "@" before the next space:
# a password may hold "/" or ":" that a URL parser would misread, so
# redacting too much is the safe side.
_USERINFO = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*://)[^\s]*@")


def has_userinfo(text: str) -> bool:
    """Whether ``text`` holds a URL with a user name or password."""
    return _USERINFO.search(text) is not None


def redact_userinfo(text: str) -> str:
    """``text`` with each URL's ``user:password@`` replaced by ``***@``."""
    return _USERINFO.sub(r"\1***@", text)
