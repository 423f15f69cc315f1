"""Host devices: node-device XML in, a frozen device model out (no I/O).

:mod:`.model` holds the model (:class:`HostDevices` or
:class:`DevicesUnknown`); :mod:`.parser` reads libvirt's node-device XML
into it, refusing bad input with :class:`CapabilityXMLError`.
"""

from virtdriver.capabilities.devices.model import (
    DevicesReading, DevicesUnknown, HostDevices, Mdev, MdevParent, MdevType,
    PCIAddress, PCIDevice)

__all__ = [
    "DevicesReading",
    "DevicesUnknown",
    "HostDevices",
    "Mdev",
    "MdevParent",
    "MdevType",
    "PCIAddress",
    "PCIDevice",
]
