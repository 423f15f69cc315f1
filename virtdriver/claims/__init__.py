"""Claims: what an instance asks of a host, and whether a rebuild may proceed.

Pure functions and frozen data, no I/O; the resource tracker calls them under
its lock.  See ``docs/claims.md``.

* :mod:`.model` — the frozen request model and the exceptions.
* :mod:`.constraints` — flavor + image properties → :class:`NUMARequest`
  (parsing in :mod:`.extra_specs`, the split over nodes in :mod:`.topology`).
* :mod:`.consumption` — what the instance takes from Placement.
* :mod:`.rebuild` — the no-op rebuild claim's checks.
* :mod:`.fit` — fitting a request onto a host's NUMA cells.
* :mod:`.placement_request` — the granular ``GET /allocation_candidates``
  request a scheduler sends for an instance on this tree's shape.
"""

from virtdriver.claims.model import (
    CellRequest, ClaimError, Flavor, Instance, InvalidRequest, NUMARequest,
    Problem)

__all__ = ["CellRequest", "ClaimError", "Flavor", "Instance",
           "InvalidRequest", "NUMARequest", "Problem"]
