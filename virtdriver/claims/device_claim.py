"""Which devices a claim takes (pure).

The claim of an instance with device requests (:mod:`~.device_request`)
chooses concrete units — the PCI function, which VF of a pool, which
mdev to reuse or create — on the node's device providers
(:class:`~virtdriver.drivers.device_units.DeviceUnits`), never a unit
another claim holds.  With the scheduler's allocation, only within
exactly the device providers and amounts it names; without one, on any
provider of the class and traits asked.

NUMA affinity, relative to the host cell of guest node 0 (the instance
without a NUMA topology has none):

* ``required``: the device's provider is under that cell;
* ``legacy``: under that cell, or a device without a NUMA node (root);
* ``socket``: under a cell of the same socket (a device without a NUMA
  node is refused; a host that does not say its sockets counts each cell
  as its own);
* ``preferred``: anywhere; that cell first when the claim chooses.

:func:`node0_cells` narrows the cells guest node 0 may take so that the
devices can follow it; :func:`choose_devices` then takes them, or raises
:class:`DevicesRefused` naming the device request, provider and cell.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from virtdriver.claims.device_request import (
    LEGACY, PREFERRED, REQUIRED, SOCKET, DeviceRequest)
from virtdriver.claims.model import ClaimError
from virtdriver.drivers.device_units import DeviceUnits

#: Devices that do not belong to a NUMA cell (their providers hang off
#: the root).
NO_CELL = None


class DevicesRefused(ClaimError):
    """The devices asked cannot be taken; ``reasons`` one per request."""

    def __init__(self, instance_uuid: str, reasons: Iterable[str]) -> None:
        self.instance_uuid = instance_uuid
        self.reasons = tuple(reasons)
        super().__init__(f"instance {instance_uuid}: devices: "
                         + "; ".join(self.reasons))


@dataclass(frozen=True)
class DeviceClaim:
    """Units one device request took.

    Attributes:
        source: the request (``alias gpu #1``, ``resources:VGPU``).
        provider: the device provider's name.
        resource_class: its class.
        cell: its cell, ``None``: no NUMA node.
        units: the unit ids taken (PCI addresses, mdev uuids or
            ``new-mdev-N``).
    """

    source: str
    provider: str
    resource_class: str
    cell: int | None
    units: tuple[str, ...]

    def to_json(self) -> dict[str, Any]:
        """The claims file's record."""
        return {"source": self.source, "provider": self.provider,
                "resource_class": self.resource_class, "cell": self.cell,
                "units": list(self.units)}


def device_claim_from_json(value: Any, where: str,
                           problems: list[str]) -> DeviceClaim | None:
    """One record of the claims file, or ``None`` with its problem."""
    if not isinstance(value, dict):
        problems.append(f"{where}: not an object")
        return None
    keys = {"source", "provider", "resource_class", "cell", "units"}
    if set(value) != keys:
        problems.append(f"{where}: fields {sorted(value)}, not "
                        f"{sorted(keys)}")
        return None
    cell = value["cell"]
    units = value["units"]
    if not all(isinstance(value[k], str) for k in
               ("source", "provider", "resource_class")) \
            or not (cell is None or (isinstance(cell, int)
                                     and not isinstance(cell, bool))) \
            or not isinstance(units, list) or not units \
            or not all(isinstance(u, str) for u in units):
        problems.append(f"{where}: source, provider, resource_class must "
                        "be strings, cell a cell id or null, units a "
                        "non-empty list of strings")
        return None
    return DeviceClaim(value["source"], value["provider"],
                       value["resource_class"], cell, tuple(units))


def allows(policy: str, device_cell: int | None, node0_cell: int | None,
           sockets: Mapping[int, int] | None = None) -> bool:
    """Whether a device on ``device_cell`` may serve an instance whose
    guest node 0 is on ``node0_cell`` (``None``: no NUMA topology)."""
    if node0_cell is None or policy == PREFERRED:
        return True
    if policy == REQUIRED:
        return device_cell == node0_cell
    if policy == LEGACY:
        return device_cell in (node0_cell, NO_CELL)
    if policy == SOCKET:
        if device_cell is None:
            return False
        sockets = sockets or {}
        return sockets.get(device_cell, ("cell", device_cell)) == \
            sockets.get(node0_cell, ("cell", node0_cell))
    raise ValueError(f"unknown policy {policy!r}")


def free_units(units: Mapping[str, DeviceUnits],
               taken: Mapping[str, Iterable[str]]) -> dict[str, list[str]]:
    """Provider → its units no claim holds, in order."""
    return {name: [u for u in record.units
                   if u not in set(taken.get(name, ()))]
            for name, record in units.items()}


def node0_cells(requests: Iterable[DeviceRequest],
                units: Mapping[str, DeviceUnits],
                traits: Mapping[str, frozenset[str]],
                taken: Mapping[str, Iterable[str]],
                cells: Iterable[int],
                sockets: Mapping[int, int] | None = None) -> frozenset[int]:
    """The cells guest node 0 may take so that every request can be met
    there (a greedy choice per cell, as :func:`choose_devices` makes)."""
    requests = tuple(requests)
    found = set()
    for cell in cells:
        try:
            choose_devices("-", requests, units, traits, taken, cell,
                           sockets=sockets)
        except DevicesRefused:
            continue
        found.add(cell)
    return frozenset(found)


def choose_devices(instance_uuid: str, requests: Iterable[DeviceRequest],
                   units: Mapping[str, DeviceUnits],
                   traits: Mapping[str, frozenset[str]],
                   taken: Mapping[str, Iterable[str]],
                   node0_cell: int | None, *,
                   allocation: Mapping[str, Mapping[str, int]] | None = None,
                   sockets: Mapping[int, int] | None = None
                   ) -> tuple[DeviceClaim, ...]:
    """The units each request takes (module doc).

    ``allocation`` is the scheduler's, by device provider *name* (the
    caller maps uuids): every unit comes from it, and all of it is used.

    Raises:
        DevicesRefused: every request that cannot be met, naming it, the
            providers and cells tried; an allocated device left over.
    """
    free = free_units(units, taken)
    left = ({p: dict(r) for p, r in allocation.items()}
            if allocation is not None else None)
    chosen: list[DeviceClaim] = []
    reasons: list[str] = []
    for request in requests:
        names = sorted(
            (n for n, rec in units.items()
             if rec.resource_class == request.resource_class),
            key=lambda n: (units[n].cell != node0_cell, n))
        tried = []
        for name in names:
            record = units[name]
            where = _where(name, record.cell)
            if left is not None and \
                    left.get(name, {}).get(request.resource_class, 0) \
                    < request.count:
                continue
            if not request.required <= traits.get(name, frozenset()) \
                    or request.forbidden & traits.get(name, frozenset()):
                tried.append(f"{where} lacks its traits")
                continue
            if not allows(request.policy, record.cell, node0_cell, sockets):
                tried.append(f"{where} is not on guest node 0's cell "
                             f"{node0_cell} (policy {request.policy})")
                continue
            if len(free[name]) < request.count:
                tried.append(f"{where} has {len(free[name])} free")
                continue
            take = tuple(free[name][:request.count])
            free[name] = free[name][request.count:]
            if left is not None:
                left[name][request.resource_class] -= request.count
            chosen.append(DeviceClaim(request.source, name,
                                      request.resource_class, record.cell,
                                      take))
            break
        else:
            scope = ("within the allocation" if left is not None
                     else "on this node")
            reasons.append(
                f"{request.source} ({request.resource_class}:"
                f"{request.count}, policy {request.policy}) has no device "
                f"{scope}" + (": " + "; ".join(tried) if tried else ""))
    if left is not None:
        for name, row in sorted(left.items()):
            for rc, amount in sorted(row.items()):
                if amount > 0:
                    reasons.append(
                        f"the allocation gives {rc}:{amount} on "
                        f"{_where(name, units[name].cell) if name in units else name}"
                        " that no device request of the instance asks for")
    if reasons:
        raise DevicesRefused(instance_uuid, reasons)
    return tuple(chosen)


def _where(name: str, cell: int | None) -> str:
    return f"{name} (" + ("no NUMA cell" if cell is None
                          else f"cell {cell}") + ")"
