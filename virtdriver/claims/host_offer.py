"""Whether a node's providers can hold what a Placement request asks at
all (pure): the reasons a request gets no candidate from a host that are
visible in its inventories alone.

``placement-request --driver …`` uses it so that "no candidate" comes with
a reason: a flavor with ``root_gb`` on a host that offers no ``DISK_GB``,
a guest node bigger than any cell can ever hold.  It looks at totals only
(what the inventories could ever give, ``(total - reserved) ×
allocation_ratio`` within ``max_unit``), never at usage: a request that
passes may still find no room today.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import os_resource_classes as orc

from virtdriver.claims.placement_request import PlacementRequest

#: How a node comes to offer a class, where there is one way to say.
_HOW = {
    orc.PCPU: "[compute] cpu_dedicated_set gives a node PCPU",
    orc.VCPU: "[compute] cpu_shared_set (or no cpu_dedicated_set) gives a "
              "node VCPU",
    orc.DISK_GB: "the libvirt driver reports the state directory's disk; "
                 "a fake host describes disk_gb",
}


@dataclass(frozen=True)
class Shortfall:
    """A class one request group asks that no provider of the node can
    hold.

    Attributes:
        group: the group's suffix (``""`` unnumbered).
        resource_class: the class.
        amount: what the group asks.
        most: the most one provider could ever give (0: none offers it).
    """

    group: str
    resource_class: str
    amount: int
    most: int

    @property
    def message(self) -> str:
        """One sentence naming the class and what to do."""
        where = (f"group {self.group}" if self.group
                 else "the unnumbered group")
        if not self.most:
            how = _HOW.get(self.resource_class, (
                f"configure the host to offer {self.resource_class}"))
            return (f"{where} asks {self.resource_class}:{self.amount}, "
                    f"which no provider of this node offers; no candidate "
                    f"can come from it ({how}; or ask a flavor without "
                    "it)")
        return (f"{where} asks {self.resource_class}:{self.amount}, more "
                f"than any one provider of this node can ever hold "
                f"({self.most}); no candidate can come from it")

    def to_json(self) -> dict[str, Any]:
        """``{"group", "resource_class", "amount", "most", "message"}``."""
        return {"group": self.group, "resource_class": self.resource_class,
                "amount": self.amount, "most": self.most,
                "message": self.message}


def capacity(record: Mapping[str, Any]) -> int:
    """The most one allocation may take of an inventory record."""
    usable = int((record.get("total", 0) - record.get("reserved", 0))
                 * float(record.get("allocation_ratio", 1.0)))
    return max(0, min(usable, record.get("max_unit", usable)))


def shortfalls(request: PlacementRequest,
               inventories: Mapping[str, Mapping[str, Mapping[str, Any]]]
               ) -> list[Shortfall]:
    """Each class of ``request`` that no provider in ``inventories``
    (``{provider: {rc: inventory record}}``, one node's) can hold."""
    most: dict[str, int] = {}
    for records in inventories.values():
        for rc, record in records.items():
            most[rc] = max(most.get(rc, 0), capacity(record))
    return [Shortfall(group.suffix, rc, amount, most.get(rc, 0))
            for group in request.groups
            for rc, amount in sorted(group.resources.items())
            if most.get(rc, 0) < amount]
