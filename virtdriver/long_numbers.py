"""Python refuses to read an integer of more than 4300 digits (CVE-2020-
10735) with advice to call ``sys.set_int_max_str_digits()`` — advice for
a programmer, not for whoever wrote the file.  :func:`long_number_reason`
says it for a user."""

from __future__ import annotations

import re

_DIGITS = re.compile(r"value has (\d+) digits")


def long_number_reason(exc: BaseException) -> str | None:
    """``a number of N digits`` when ``exc`` is Python's refusal of a too
    long integer, else ``None``."""
    text = str(exc)
    if "set_int_max_str_digits" not in text:
        return None
    digits = _DIGITS.search(text)
    return f"a number of {digits[1] if digits else 'over 4300'} digits"
