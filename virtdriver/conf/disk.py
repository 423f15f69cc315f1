"""Nova's disk options, for the compute node's ``DISK_GB``.

The libvirt driver reports as ``DISK_GB`` the size of the filesystem that
holds the state directory (where ``qemu:///embed`` keeps its images), or a
snapshot's recorded size when it replays one.  ``[compute]
reserved_host_disk_mb`` is kept for the host (reported as ``reserved``,
rounded up to whole GiB as Nova rounds it) and ``[compute]
disk_allocation_ratio`` is the inventory's ``allocation_ratio``.  Nova
keeps both in ``[DEFAULT]``; a Nova-style setting there is read too.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from virtdriver.conf.reader import OptionReader

#: Nova's initial_disk_allocation_ratio.
DEFAULT_DISK_ALLOCATION_RATIO = 1.0
#: Nova's default: nothing kept for the host.
DEFAULT_RESERVED_HOST_DISK_MB = 0
#: Placement's largest allocation ratio (a float column).
MAX_ALLOCATION_RATIO = 3.40282e38
OPTION_RESERVED_DISK = "[compute] reserved_host_disk_mb"
OPTION_DISK_RATIO = "[compute] disk_allocation_ratio"


@dataclass(frozen=True)
class DiskConfig:
    """What the disk options say about ``DISK_GB``.

    Attributes:
        reserved_gb: GiB kept for the host (``reserved_host_disk_mb``
            rounded up).
        allocation_ratio: the ``DISK_GB`` allocation ratio.
    """

    reserved_gb: int = 0
    allocation_ratio: float = DEFAULT_DISK_ALLOCATION_RATIO

    def record(self, total_gb: int) -> dict[str, int | float]:
        """The ``DISK_GB`` inventory record for a disk of ``total_gb``
        (the reservation at most the total)."""
        return {"total": total_gb,
                "reserved": min(self.reserved_gb, total_gb),
                "min_unit": 1, "max_unit": total_gb, "step_size": 1,
                "allocation_ratio": self.allocation_ratio}


def _reserved_mb(value: int) -> int:
    if value < 0:
        raise ValueError("is negative; use 0 or more (MiB)")
    return value


def _ratio(value: float) -> float:
    if not (math.isfinite(value) and 0 < value <= MAX_ALLOCATION_RATIO):
        raise ValueError(f"must be a finite number greater than 0 and at "
                         f"most {MAX_ALLOCATION_RATIO:g} (Placement's "
                         "limit), e.g. 1.0")
    return value


def disk_config(conf) -> DiskConfig:
    """The :class:`DiskConfig` ``conf`` describes (a ``ConfigOpts`` or
    :class:`~virtdriver.conf.defaults.DefaultConf`).

    Raises:
        ConfigError: a negative reservation or a ratio that is not a
            finite number in (0, Placement's maximum].
    """
    reader = OptionReader(conf)
    reserved_mb = reader.get("compute", "reserved_host_disk_mb",
                             _reserved_mb)
    ratio = reader.get("compute", "disk_allocation_ratio", _ratio)
    reader.check()
    return DiskConfig(reserved_gb=math.ceil(reserved_mb / 1024),
                      allocation_ratio=ratio)
