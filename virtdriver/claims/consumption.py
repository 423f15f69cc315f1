"""What an instance consumes in Placement, given its flavor and NUMA request.

* **CPUs.**  No request or a shared policy: ``VCPU = vcpus``.  Dedicated:
  ``PCPU = vcpus``.  Mixed: ``VCPU`` for the shared vCPUs, ``PCPU`` for the
  dedicated ones.  Isolated emulator threads with a dedicated or mixed
  policy add one ``PCPU``.  Explicit ``resources[N]:VCPU`` /
  ``resources[N]:PCPU`` extra specs replace this, as in Nova (summed over
  request groups; an amount of 0 drops the class).
* **Memory.**  Small pages (no page size, ``small``, 4 KiB):
  ``MEMORY_MB = memory_mb`` (or ``resources[N]:MEMORY_MB``).  A huge page
  size takes pages only, one unit per page:
  ``CUSTOM_MEM_PAGE_SIZE_<KiB> = memory_mb * 1024 / KiB`` (a cell's
  ``MEMORY_MB`` is its small-page memory, so never both).  ``large`` and
  ``any`` name no size: no memory class (the claim chooses the pages).

Classes with an amount of 0 are left out.
"""

from __future__ import annotations

import os_resource_classes as orc

from virtdriver.claims.extra_specs import group_keys
from virtdriver.claims.model import (
    CPU_DEDICATED, CPU_MIXED, Flavor, InvalidRequest, NUMARequest, Problem)
from virtdriver.claims.placement_request import memory_resources


def consumption(flavor: Flavor, request: NUMARequest | None
                ) -> dict[str, int]:
    """``{resource class: amount}`` the instance takes from Placement.

    ``request`` is what :func:`~virtdriver.claims.constraints.
    numa_constraints` returned for ``flavor`` and the instance's image.

    Raises:
        InvalidRequest: a ``resources[N]:VCPU``, ``PCPU`` or ``MEMORY_MB``
            amount is not a non-negative integer (``numa_constraints``
            refuses those first, for VCPU and PCPU).
    """
    used: dict[str, int] = {}
    pinned = request is not None and request.cpu_policy in (CPU_DEDICATED,
                                                            CPU_MIXED)
    if pinned:
        extra = 1 if request.emulator_threads_isolated else 0
        used[orc.VCPU] = len(request.shared_cpus)
        used[orc.PCPU] = len(request.dedicated_cpus) + extra
    else:
        used[orc.VCPU] = flavor.vcpus
    explicit = {rc: _explicit(flavor, rc)
                for rc in (orc.VCPU, orc.PCPU, orc.MEMORY_MB)}
    if explicit[orc.VCPU] is not None or explicit[orc.PCPU] is not None:
        used[orc.VCPU] = explicit[orc.VCPU] or 0
        used[orc.PCPU] = explicit[orc.PCPU] or 0
    if explicit[orc.MEMORY_MB] is not None:
        used[orc.MEMORY_MB] = explicit[orc.MEMORY_MB]
    elif request is None:
        used[orc.MEMORY_MB] = flavor.memory_mb
    else:
        used.update(memory_resources(request.page_size, request.memory_mb))
    return {rc: amount for rc, amount in sorted(used.items()) if amount}


def _explicit(flavor: Flavor, resource_class: str) -> int | None:
    keys = group_keys(flavor.extra_specs, "resources", resource_class)
    if not keys:
        return None
    total = 0
    for key in keys:
        text = str(flavor.extra_specs[key]).strip()
        if not (text.isascii() and text.isdigit()):
            raise InvalidRequest([Problem(
                f"flavor {key}={flavor.extra_specs[key]!r} is not a "
                f"non-negative integer; set it to the amount of "
                f"{resource_class}", {key: flavor.extra_specs[key]})])
        total += int(text)
    return total
