"""A claim's devices on a tracker's node: the pure rules of
:mod:`virtdriver.claims.device_claim` joined to the driver's device units,
the tree's device providers and the claims already held.

:func:`narrow_node0` keeps guest node 0 on cells its devices can follow
(within the allocation when there is one); :func:`take_devices` records
the chosen units on the fit.  A refusal names the device request, the
provider and the cell; with an allocation it is an
:class:`~virtdriver.claims.allocation.AllocationRefused` whose cases are
the device policies Placement was not asked.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from virtdriver.claims.allocation import AllocationRefused
from virtdriver.claims.device_claim import (
    DevicesRefused, choose_devices, node0_cells)
from virtdriver.claims.device_request import (
    LEGACY, PREFERRED, SOCKET, DeviceRequest)
from virtdriver.claims.fit import DoesNotFit
from virtdriver.claims.model import NUMARequest
from virtdriver.claims.placement_request import (
    DEVICE_LEGACY, DEVICE_PREFERRED, DEVICE_SOCKET)
from virtdriver.claims.usage import HostUsage, InstanceFit, taken_devices
from virtdriver.drivers.device_units import DeviceUnits
from virtdriver.drivers.host_resources import HostResources

_CASE = {LEGACY: DEVICE_LEGACY, SOCKET: DEVICE_SOCKET,
         PREFERRED: DEVICE_PREFERRED}


@dataclass(frozen=True)
class DeviceContext:
    """What a claim's device choice needs, read once."""

    requests: tuple[DeviceRequest, ...]
    units: Mapping[str, DeviceUnits]
    traits: Mapping[str, frozenset[str]]
    taken: Mapping[str, list[str]]
    #: By provider name; ``None`` without the scheduler's allocation.
    allocation: Mapping[str, Mapping[str, int]] | None
    #: Cell id → its socket, where the host says.
    sockets: Mapping[int, int] = dataclasses.field(default_factory=dict)

    @classmethod
    def of(cls, driver: Any, tree: Any, nodename: str, usage: HostUsage,
           requests: tuple[DeviceRequest, ...],
           allocations: Mapping[str, Mapping[str, int]] | None
           ) -> DeviceContext:
        """Read the node's device units, their traits and the claims'."""
        units = dict(driver.node_devices(nodename))
        traits = {}
        by_uuid = {}
        for name in units:
            if tree is not None and tree.exists(name):
                data = tree.data(name)
                traits[name] = frozenset(data.traits)
                by_uuid[data.uuid] = name
        allocation = None
        if allocations is not None:
            allocation = {by_uuid[rp]: dict(row)
                          for rp, row in allocations.items()
                          if rp in by_uuid}
        host = driver.node_resources(nodename)
        sockets = {c.cell_id: c.socket for c in (host.cells if host else ())
                   if c.socket is not None}
        return cls(requests, units, traits, taken_devices(usage),
                   allocation, sockets)

    def choose(self, instance_uuid: str, node0_cell: int | None):
        """:func:`choose_devices` for guest node 0 on ``node0_cell``."""
        return choose_devices(instance_uuid, self.requests, self.units,
                              self.traits, self.taken, node0_cell,
                              allocation=self.allocation,
                              sockets=self.sockets)

    def refused(self, exc: DevicesRefused,
                allowed: Mapping[int, frozenset[int]] | None):
        """The claim's refusal for ``exc``: :class:`DoesNotFit` without an
        allocation, else :class:`AllocationRefused` with the cases of the
        device policies Placement was not asked."""
        if self.allocation is None:
            return DoesNotFit(exc.instance_uuid, exc.reasons)
        cases = sorted({_CASE[r.policy] for r in self.requests
                        if r.policy in _CASE and allowed is not None
                        and any(f"policy {r.policy}" in reason
                                for reason in exc.reasons)})
        lines = list(exc.reasons)
        if cases:
            lines.append("not expressed to Placement, checked here: "
                         + ", ".join(cases))
        return AllocationRefused(exc.instance_uuid, lines, cases)


def narrow_node0(devices: DeviceContext, request: NUMARequest,
                 host: HostResources,
                 allowed: Mapping[int, frozenset[int]] | None,
                 instance_uuid: str) -> dict[int, frozenset[int]]:
    """``allowed`` with guest node 0 kept to the cells its devices can
    follow.

    Raises:
        DoesNotFit / AllocationRefused: no cell can (every reason).
    """
    every = frozenset(c.cell_id for c in host.cells)
    narrowed = {c.id: (allowed[c.id] if allowed is not None else every)
                for c in request.cells}
    ok = node0_cells(devices.requests, devices.units, devices.traits,
                     devices.taken, sorted(narrowed[0]), devices.sockets)
    if devices.allocation is not None:
        ok = frozenset(c for c in ok if _fits(devices, c))
    if not ok:
        reasons = []
        for cell in sorted(narrowed[0]):
            try:
                devices.choose(instance_uuid, cell)
            except DevicesRefused as exc:
                reasons.extend(f"guest node 0 on cell {cell}: {r}"
                               for r in exc.reasons)
        raise devices.refused(DevicesRefused(instance_uuid, reasons or [
            "no cell guest node 0 may take has the devices asked"]),
            allowed)
    narrowed[0] = ok
    return narrowed


def _fits(devices: DeviceContext, cell: int) -> bool:
    try:
        devices.choose("-", cell)
    except DevicesRefused:
        return False
    return True


def take_devices(devices: DeviceContext, found: InstanceFit
                 ) -> InstanceFit:
    """``found`` with the devices it takes.

    Raises:
        DevicesRefused: they cannot be taken.
    """
    node0 = found.cells[0].host_cell if found.cells else None
    chosen = devices.choose(found.uuid, node0)
    return dataclasses.replace(found, devices=chosen)
