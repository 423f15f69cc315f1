"""Keep credentials out of what virtdriver prints and records.

A URL may carry a user name and password (``http://user:pw@host``);
:func:`redact_userinfo` replaces that part with ``***`` wherever it
appears in a text (a command line, a message), so a password given by
mistake never reaches standard output, an error, a state file or the
lock file's record of its holder.

What counts as the part to hide: in each run of non-space characters,
from the first ``scheme://`` (a letter, then letters, digits, ``+``,
``.`` or ``-``) to the run's last ``@`` — a password may hold ``/`` or
``:`` that a URL parser would misread, so redacting too much is the safe
side.  The scan is linear in the text's length: every command records
its command line in the lock file, and a regular expression with a
backtracking scheme took quadratic time on one long argument.
"""

from __future__ import annotations

import re
import string

_SPACE = re.compile(r"(\s+)")
_SCHEME_CHARS = frozenset(string.ascii_letters + string.digits + "+.-")
_LETTERS = frozenset(string.ascii_letters)


def _userinfo_span(word: str) -> tuple[int, int] | None:
    """``(start, end)`` of ``user:password`` in ``word`` (one run of
    non-space characters), or ``None`` when it holds no such URL."""
    at = word.rfind("@")
    if at < 0:
        return None
    sep = word.find("://")
    while 0 <= sep and sep + 3 <= at:
        start = sep
        while start > 0 and word[start - 1] in _SCHEME_CHARS:
            start -= 1
        # The scheme starts at its run's first letter (``1http://`` is
        # ``http://``); a run without one is no scheme.
        if any(char in _LETTERS for char in word[start:sep]):
            return sep + 3, at
        sep = word.find("://", sep + 3)
    return None


def has_userinfo(text: str) -> bool:
    """Whether ``text`` holds a URL with a user name or password."""
    return any(_userinfo_span(word) is not None
               for word in _SPACE.split(text)[::2])


def redact_userinfo(text: str) -> str:
    """``text`` with each URL's ``user:password@`` replaced by ``***@``."""
    parts = _SPACE.split(text)
    for index in range(0, len(parts), 2):
        span = _userinfo_span(parts[index])
        if span is not None:
            word = parts[index]
            parts[index] = word[:span[0]] + "***" + word[span[1]:]
    return "".join(parts)
