"""The upgrade to small-page ``MEMORY_MB``: memory an allocation holds
twice (pure).

Before a NUMA cell's ``MEMORY_MB`` was its small-page memory only, an
instance on huge pages was allocated ``MEMORY_MB`` *and* its pages for the
same memory.  :func:`doubled_memory` finds such consumers on the
providers of a tree as Placement holds them, :func:`undouble` gives their
allocations as they are now meant (the repeated ``MEMORY_MB`` dropped),
and :func:`memory_shrinks` / :func:`holds_pages` tell the sync which
providers are worth reading for them (``docs/provider-tree.md``,
"Memory").
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

import os_resource_classes as orc

from virtdriver.drivers.host_tree import PAGE_RC_PREFIX

Allocations = Mapping[str, Mapping[str, int]]


def doubled_memory(current: Mapping[str, Any]) -> dict[str, frozenset[str]]:
    """Provider → the consumers holding the same memory twice there: huge
    pages and, beside them, ``MEMORY_MB`` for the memory those pages hold.
    ``current``: provider uuid → an object with ``allocations`` (consumer
    → class → amount), as :class:`~.reshape_plan.ProviderNow`."""
    found = {}
    for uuid, provider in current.items():
        twice = frozenset(c for c, used in provider.allocations.items()
                          if _doubled_mb(used))
        if twice:
            found[uuid] = twice
    return found


def undouble(allocations: Allocations) -> Allocations:
    """``allocations`` without the ``MEMORY_MB`` that only repeats the
    memory of huge pages held on the same provider; others unchanged."""
    new = {}
    for rp, used in allocations.items():
        res = dict(used)
        doubled = _doubled_mb(used)
        if doubled:
            res[orc.MEMORY_MB] -= doubled
        res = {rc: n for rc, n in res.items() if n}
        if res:
            new[rp] = MappingProxyType(res)
    return MappingProxyType(new)


def _doubled_mb(used: Mapping[str, int]) -> int:
    """MiB of ``MEMORY_MB`` in ``used`` that its huge pages repeat."""
    memory = used.get(orc.MEMORY_MB, 0)
    if not memory:
        return 0
    huge = sum(amount * int(rc[len(PAGE_RC_PREFIX):]) // 1024
               for rc, amount in used.items()
               if rc.startswith(PAGE_RC_PREFIX)
               and rc[len(PAGE_RC_PREFIX):].isdigit())
    return min(memory, huge)


def holds_pages(inventory: Mapping[str, Any]) -> bool:
    """Memory and huge pages on one provider: where an allocation made
    before ``MEMORY_MB`` meant small pages only may hold memory twice."""
    return orc.MEMORY_MB in inventory and any(
        rc.startswith(PAGE_RC_PREFIX) for rc in inventory)


def memory_shrinks(before: Mapping[str, Any], after: Mapping[str, Any]
                   ) -> bool:
    """``MEMORY_MB``'s total goes down beside huge pages (the upgrade, or
    fewer small pages): allocations may hold memory twice."""
    old, new = before.get(orc.MEMORY_MB), after.get(orc.MEMORY_MB)
    return (old is not None and new is not None
            and _total(new) < _total(old) and holds_pages(after))


def _total(record: Any) -> int:
    return record["total"] if isinstance(record, Mapping) else record.total
