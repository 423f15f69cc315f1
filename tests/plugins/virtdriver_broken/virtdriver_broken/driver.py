"""Needs an SDK that is deliberately never installed: importing fails.

This is the commonest way a real plugin breaks (a missing dependency), so
the loader's failure path is tested against a real ``ModuleNotFoundError``.
"""

import virtdriver_broken_sdk  # noqa: F401  (deliberately not installed)

from virtdriver.drivers.base import ComputeDriver


class BrokenDriver(ComputeDriver):  # never reached
    """Never defined: the import above fails first."""
