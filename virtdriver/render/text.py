"""Layout helpers the text renderers share."""

from __future__ import annotations


def wrapped(names: list[str], indent: int, width: int = 79) -> list[str]:
    """``names`` filled into lines of at most ``width`` columns, each
    indented by ``indent``; one ``none`` line when there are none."""
    lines: list[str] = []
    current = " " * indent
    for name in names:
        if len(current) + len(name) + 1 > width and current.strip():
            lines.append(current.rstrip())
            current = " " * indent
        current += name + " "
    if current.strip():
        lines.append(current.rstrip())
    return lines or [" " * indent + "none"]
