"""Requests counted by method: :class:`RequestCounts` (what a sync sent).

Apart from the transport (:mod:`~.transport`, which re-exports it) so
that a result can be made and shown without importing keystoneauth1.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass

_READS = frozenset({"GET", "HEAD"})


@dataclass(frozen=True)
class RequestCounts:
    """Requests sent, by method (attempts, answered or not)."""

    by_method: Mapping[str, int]

    @property
    def reads(self) -> int:
        return sum(n for m, n in self.by_method.items() if m in _READS)

    @property
    def writes(self) -> int:
        return sum(n for m, n in self.by_method.items() if m not in _READS)

    @property
    def total(self) -> int:
        return sum(self.by_method.values())

    def __sub__(self, other: RequestCounts) -> RequestCounts:
        diff = Counter(self.by_method)
        diff.subtract(other.by_method)
        return RequestCounts({m: n for m, n in diff.items() if n})

    def __str__(self) -> str:
        return f"{self.total} requests ({self.reads} reads, " \
               f"{self.writes} writes)"
