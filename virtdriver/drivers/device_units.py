"""What each device provider's units are, for the claims.

A device provider sells units of one class; a claim must say *which*
device it took: the PCI function itself, which VF of a pool, which
mediated device (an existing one to reuse, else a new one to create).
:func:`device_units` lists them from the offers the tree was published
from, in a stable order (addresses; existing mdevs before new ones).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from virtdriver.capabilities.devices.model import HostDevices
from virtdriver.capabilities.devices.selection import (
    MDEV, VF_POOL, DeviceOffer)
from virtdriver.drivers.device_tree import device_provider_name

#: The prefix of an mdev unit that does not exist yet (created on use).
NEW_MDEV = "new-mdev-"


@dataclass(frozen=True)
class DeviceUnits:
    """One device provider's units.

    Attributes:
        provider: the provider name (``<node>_pci_0000_81_00_0``).
        resource_class: the class it sells.
        cell: the NUMA cell it sits under, ``None``: no NUMA node.
        kind: ``pci``, ``vf-pool`` or ``mdev``.
        units: one id per unit: a PCI address, or an mdev's uuid, or
            ``new-mdev-N`` for one to create.
    """

    provider: str
    resource_class: str
    cell: int | None
    kind: str
    units: tuple[str, ...]


def offer_units(offer: DeviceOffer, devices: HostDevices | None = None
                ) -> tuple[str, ...]:
    """The unit ids of one offer (module doc); ``devices`` (the reading)
    names an mdev parent's existing mdevs by uuid."""
    if offer.kind == VF_POOL:
        return tuple(str(vf.address) for vf in offer.members)
    if offer.kind == MDEV:
        existing = [] if devices is None else sorted(
            m.uuid for m in devices.mdevs_of(offer.device.name)
            if m.uuid and offer.mdev_type is not None
            and m.type_id == offer.mdev_type.type_id)
        existing = existing[:offer.total]
        return tuple(existing) + tuple(
            f"{NEW_MDEV}{n}" for n in range(offer.total - len(existing)))
    return (str(offer.device.address),)


def device_units(nodename: str, offers: Iterable[DeviceOffer],
                 devices: HostDevices | None = None
                 ) -> Mapping[str, DeviceUnits]:
    """Provider name → :class:`DeviceUnits`, for ``nodename``'s offers."""
    found = {}
    for offer in offers:
        name = device_provider_name(nodename, offer)
        found[name] = DeviceUnits(name, offer.resource_class,
                                  offer.numa_node, offer.kind,
                                  offer_units(offer, devices))
    return found
