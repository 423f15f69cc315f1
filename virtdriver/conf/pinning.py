"""The CPU pinning and host reservation options, parsed and checked.

:class:`PinningConfig` is what :mod:`virtdriver.drivers.host_resources`
needs: which host CPUs are dedicated (PCPU) or shared (VCPU), what the
host keeps for itself, and the allocation ratios.  Checks here need no
host; checks against the host (does CPU 40 exist? is it online?) are in
``host_resources``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from virtdriver.conf.defaults import (
    DEFAULT_CPU_ALLOCATION_RATIO,
    DEFAULT_RAM_ALLOCATION_RATIO,
    DEFAULT_RESERVED_HOST_MEMORY_MB,
)
from virtdriver.conf.reader import ConfigError, OptionReader, sources
from virtdriver.cpuset import parse_cpuset
from virtdriver.providers.inventory import MAX_ALLOCATION_RATIO

if TYPE_CHECKING:
    from oslo_config import cfg

OPTION_DEDICATED = "[compute] cpu_dedicated_set"
OPTION_SHARED = "[compute] cpu_shared_set"
OPTION_RESERVED_MEMORY = "[compute] reserved_host_memory_mb"
OPTION_RESERVED_PAGES = "[compute] reserved_huge_pages"
OPTION_CPU_RATIO = "[compute] cpu_allocation_ratio"
OPTION_RAM_RATIO = "[compute] ram_allocation_ratio"

_ENTRY_FORM = "write node:N,size:KIB,count:N, e.g. node:0,size:2048,count:64"
_SIZE = re.compile(r"(\d+)\s*([KMGT]?)(?:i?B)?", re.IGNORECASE)
_UNIT_KIB = {"": 1, "K": 1, "M": 1024, "G": 1024 ** 2, "T": 1024 ** 3}


@dataclass(frozen=True, slots=True)
class PageReservation:
    """``count`` pages of ``size_kib`` kept for the host on NUMA ``node``."""

    node: int
    size_kib: int
    count: int

    @property
    def entry(self) -> str:
        """The reservation as a ``reserved_huge_pages`` entry."""
        return f"node:{self.node},size:{self.size_kib},count:{self.count}"


@dataclass(frozen=True, slots=True)
class PinningConfig:
    """Dedicated and shared CPUs, host reservations, allocation ratios.

    Attributes:
        cpu_dedicated_set: host CPUs for pinned guest CPUs; ``None`` when
            the option is unset.
        cpu_shared_set: host CPUs for floating guest CPUs; ``None`` when
            unset.  Which CPUs each NUMA cell offers when one or both are
            unset is decided in ``host_resources``.
        reserved_host_memory_mb: MiB the host keeps.
        reserved_huge_pages: pages the host keeps, at most one entry per
            node and page size.
        cpu_allocation_ratio: VCPU overcommit, > 0.
        ram_allocation_ratio: memory overcommit, > 0.

    Raises:
        ConfigError: a value no host could satisfy (an empty CPU set, a
            negative reservation, a ratio that is not > 0, a node and
            size reserved twice); the message names the option.
    """

    cpu_dedicated_set: frozenset[int] | None = None
    cpu_shared_set: frozenset[int] | None = None
    reserved_host_memory_mb: int = DEFAULT_RESERVED_HOST_MEMORY_MB
    reserved_huge_pages: tuple[PageReservation, ...] = ()
    cpu_allocation_ratio: float = DEFAULT_CPU_ALLOCATION_RATIO
    ram_allocation_ratio: float = DEFAULT_RAM_ALLOCATION_RATIO

    def __post_init__(self) -> None:
        problems = [
            f"{option} names no CPUs; leave it unset or name at least one"
            for option, cpus in ((OPTION_DEDICATED, self.cpu_dedicated_set),
                                 (OPTION_SHARED, self.cpu_shared_set))
            if cpus is not None and not cpus]
        if self.reserved_host_memory_mb < 0:
            problems.append(f"{OPTION_RESERVED_MEMORY} = "
                            f"{self.reserved_host_memory_mb} is negative; "
                            "use 0 or more")
        for option, ratio in ((OPTION_CPU_RATIO, self.cpu_allocation_ratio),
                              (OPTION_RAM_RATIO, self.ram_allocation_ratio)):
            if not 0 < ratio <= MAX_ALLOCATION_RATIO:
                problems.append(f"{option} = {ratio} must be a finite "
                                "number greater than 0 and at most "
                                f"{MAX_ALLOCATION_RATIO:g} (Placement's "
                                "largest), e.g. 1.0")
        problems.extend(_reservation_problems(self.reserved_huge_pages))
        if problems:
            raise ConfigError(problems)

    def reserved_pages(self, node: int, size_kib: int) -> int:
        """Pages of ``size_kib`` reserved on ``node`` (0 if none)."""
        return sum(r.count for r in self.reserved_huge_pages
                   if r.node == node and r.size_kib == size_kib)


def _reservation_problems(reservations: tuple[PageReservation, ...]
                          ) -> list[str]:
    problems = []
    seen: dict[tuple[int, int], PageReservation] = {}
    for r in reservations:
        if min(r.node, r.count) < 0 or r.size_kib <= 0:
            problems.append(f"{OPTION_RESERVED_PAGES} entry {r.entry!r} "
                            "has a negative node or count, or a size that "
                            "is not positive")
        first = seen.setdefault((r.node, r.size_kib), r)
        if first is not r:
            problems.append(
                f"{OPTION_RESERVED_PAGES} entries {first.entry!r} and "
                f"{r.entry!r} both reserve {r.size_kib} KiB pages on node "
                f"{r.node}; keep one entry per node and size")
    return problems


def parse_page_reservation(entry: str) -> PageReservation:
    """Read one ``reserved_huge_pages`` entry, Nova's form.

    ``node:0,size:2048,count:64``; the size is in KiB unless it has a
    binary unit (``2MB``, ``1GiB``, ``1G``: Nova's ``1GB`` is 1 GiB).

    Raises:
        ValueError: a key is missing, repeated or unknown, or a value is
            not a whole number; the message names the part.
    """
    fields: dict[str, str] = {}
    for part in entry.split(","):
        key, sep, value = (s.strip() for s in part.partition(":"))
        if not sep or key not in ("node", "size", "count"):
            raise ValueError(f"{part.strip()!r} is not node:N, size:KIB or "
                             f"count:N; {_ENTRY_FORM}")
        if ":" in value:
            raise ValueError(f"{part.strip()!r} holds more than one "
                             f"key:value; separate them with commas")
        if key in fields:
            raise ValueError(f"{key} is given twice; {_ENTRY_FORM}")
        fields[key] = value
    missing = [key for key in ("node", "size", "count") if key not in fields]
    if missing:
        raise ValueError(f"{' and '.join(missing)} missing; {_ENTRY_FORM}")
    for key in ("node", "count"):
        if not (fields[key].isascii() and fields[key].isdigit()):
            raise ValueError(f"{key} {fields[key]!r} is not a whole number "
                             "(0 or more)")
    size = _SIZE.fullmatch(fields["size"])
    if size is None or int(size[1]) == 0:
        raise ValueError(f"size {fields['size']!r} is not a page size; give "
                         "KiB (2048) or a unit (2MB, 1GB)")
    return PageReservation(
        node=int(fields["node"]), count=int(fields["count"]),
        size_kib=int(size[1]) * _UNIT_KIB[size[2].upper()])


def _cpu_option(spec: str) -> frozenset[int] | None:
    # Blank means unset, as in Nova; "0,^0" names nothing and is refused
    # by PinningConfig.
    return parse_cpuset(spec) if spec.strip() else None


def pinning_config(conf: cfg.ConfigOpts) -> PinningConfig:
    """The :class:`PinningConfig` that ``conf`` describes.

    Raises:
        ConfigError: every bad value, each naming its option (and, for
            ``reserved_huge_pages``, its entry).
    """
    reader = OptionReader(conf)
    dedicated = reader.get("compute", "cpu_dedicated_set", _cpu_option)
    shared = reader.get("compute", "cpu_shared_set", _cpu_option)
    memory = reader.get("compute", "reserved_host_memory_mb")
    cpu_ratio = reader.get("compute", "cpu_allocation_ratio")
    ram_ratio = reader.get("compute", "ram_allocation_ratio")
    pages = []
    for entry in reader.get("compute", "reserved_huge_pages") or ():
        try:
            pages.append(parse_page_reservation(entry))
        except ValueError as exc:
            reader.add(f"{OPTION_RESERVED_PAGES} entry {entry!r}: {exc}")
    reader.check()
    try:
        return PinningConfig(
            cpu_dedicated_set=dedicated, cpu_shared_set=shared,
            reserved_host_memory_mb=memory, reserved_huge_pages=tuple(pages),
            cpu_allocation_ratio=cpu_ratio, ram_allocation_ratio=ram_ratio)
    except ConfigError as exc:
        raise ConfigError(exc.problems, sources(conf)) from None

