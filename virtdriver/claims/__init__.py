"""Claims: what an instance asks of a host, and whether a rebuild may proceed.

Pure functions and frozen data, no I/O; the resource tracker calls them under
its lock.  See ``docs/claims.md``.

* :mod:`.model` — the frozen request model and the exceptions.
"""

from virtdriver.claims.model import (
    CellRequest, ClaimError, Flavor, Instance, InvalidRequest, NUMARequest,
    Problem)

__all__ = ["CellRequest", "ClaimError", "Flavor", "Instance",
           "InvalidRequest", "NUMARequest", "Problem"]
