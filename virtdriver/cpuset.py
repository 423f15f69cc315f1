"""CPU set specifications: ``0-3,^2,8-11`` to a set of CPU ids and back.

This is the syntax libvirt uses in capability XML (``siblings='0,4'``,
``cpus='0-7,16-23'``) and OpenStack uses in ``cpu_dedicated_set``.
"""

from __future__ import annotations

from collections.abc import Iterable

#: Largest CPU id accepted; far above any real host, low enough that a
#: hostile range such as ``0-4000000000`` cannot exhaust memory.
MAX_CPU_ID = 65535
_MAX_ID_DIGITS = len(str(MAX_CPU_ID))


class CPUSetError(ValueError):
    """A CPU set specification could not be read.

    Attributes:
        spec: the whole specification.
        token: the comma-separated part that was wrong.
    """

    def __init__(self, spec: str, token: str, reason: str) -> None:
        self.spec = spec
        self.token = token
        super().__init__(f"invalid CPU set {spec!r}: {token!r} {reason}; "
                         "expected comma-separated ids or ranges such as "
                         "'0-3,^2,8-11'")


def parse_cpuset(spec: str) -> frozenset[int]:
    """Return the CPU ids named by ``spec``.

    ``N`` adds a CPU, ``N-M`` adds a range, ``^N`` (or ``^N-M``) removes
    CPUs added by the other tokens, in any order.  Blank specs give the
    empty set.

    Raises:
        CPUSetError: a token is empty, not a number, or a reversed range.
    """
    if spec.replace(",", "").isdigit() and spec.isascii():
        # Fast path for the common "0,16" form; anything odd in it (an
        # empty token, a huge id) falls through to the checks below.
        ids = spec.split(",")
        if all(0 < len(i) <= _MAX_ID_DIGITS for i in ids) \
                and max(map(int, ids)) <= MAX_CPU_ID:
            return frozenset(map(int, ids))
    included: set[int] = set()
    excluded: set[int] = set()
    if not spec.strip():
        return frozenset()
    for raw in spec.split(","):
        token = raw.strip()
        target = included
        if token.startswith("^"):
            target, token = excluded, token[1:].strip()
        target.update(_token_ids(spec, raw.strip(), token))
    return frozenset(included - excluded)


def _token_ids(spec: str, raw: str, token: str) -> range:
    if not token:
        raise CPUSetError(spec, raw, "is empty")
    first, sep, last = token.partition("-")
    for part in (first, last) if sep else (first,):
        if not (part.strip().isdigit() and part.strip().isascii()):
            raise CPUSetError(spec, raw, "is not a CPU id or range")
        if len(part.strip().lstrip("0")) > _MAX_ID_DIGITS:
            raise CPUSetError(spec, raw, f"goes past the largest CPU id "
                                         f"({MAX_CPU_ID})")
    start = int(first)
    end = int(last) if sep else start
    if end < start:
        raise CPUSetError(spec, raw, "is a reversed range")
    if end > MAX_CPU_ID:
        raise CPUSetError(spec, raw, f"goes past the largest CPU id "
                                     f"({MAX_CPU_ID})")
    return range(start, end + 1)


def cpu_runs(cpus: Iterable[int]) -> list[tuple[int, int]]:
    """Consecutive runs of CPU ids, e.g. ``{0,1,2,8}`` as ``[(0, 2), (8, 8)]``."""
    ordered = sorted(set(cpus))
    runs: list[tuple[int, int]] = []
    for cpu in ordered:
        if runs and runs[-1][1] == cpu - 1:
            runs[-1] = (runs[-1][0], cpu)
        else:
            runs.append((cpu, cpu))
    return runs


def format_cpuset(cpus: Iterable[int]) -> str:
    """Render CPU ids compactly, e.g. ``{0,1,2,3,8}`` as ``"0-3,8"``."""
    return ",".join(str(first) if first == last else f"{first}-{last}"
                    for first, last in cpu_runs(cpus))
