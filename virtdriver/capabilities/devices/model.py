"""Frozen model of a host's devices, as libvirt's node-device API lists them.

Pure data, no I/O.  A reading of the host's devices is either a
:class:`HostDevices` (libvirt answered: these are the devices, possibly
none) or a :class:`DevicesUnknown` (we could not ask, or the answer was
incomplete).  The two are never confused: "could not ask" is not "no
device", and code that removes providers must check :attr:`known` first.

Identifiers follow libvirt's node-device XML: a device's ``name`` is its
node-device name (``pci_0000_81_00_0``, ``ap_matrix``, ``css_0_0_fffe``,
``mdev_<uuid>_<parent>``); vendor and product ids are lowercase 4-digit
hex strings (``"10de"``), convenient for trait and resource-class names.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

#: PCI address limits as libvirt checks them (virPCIDeviceAddressIsValid):
#: a 32-bit domain (VMD domains go past 0xffff), 8-bit bus, 5-bit slot,
#: 3-bit function.
MAX_DOMAIN = 0xFFFFFFFF
MAX_BUS = 0xFF
MAX_SLOT = 0x1F
MAX_FUNCTION = 0x7

_ADDRESS = re.compile(
    r"([0-9a-fA-F]{1,8}):([0-9a-fA-F]{1,2}):([0-9a-fA-F]{1,2})\.([0-7])")


@dataclass(frozen=True, slots=True, order=True)
class PCIAddress:
    """A PCI function's address: domain, bus, slot (device), function."""

    domain: int
    bus: int
    slot: int
    function: int

    def __str__(self) -> str:
        """``0000:81:00.0``, as Nova, sysfs and ``lspci -D`` write it."""
        return (f"{self.domain:04x}:{self.bus:02x}:{self.slot:02x}."
                f"{self.function:x}")

    @property
    def nova_suffix(self) -> str:
        """``pci_0000_81_00_0``: Nova's suffix for an mdev parent provider.

        Nova names it ``<node>_pci_0000_81_00_0``; it is also libvirt's
        node-device name of the function.
        """
        return (f"pci_{self.domain:04x}_{self.bus:02x}_{self.slot:02x}_"
                f"{self.function:x}")

    @classmethod
    def parse(cls, text: str) -> PCIAddress:
        """Read ``0000:81:00.0`` (hex, as :meth:`__str__` writes it).

        Raises:
            ValueError: not a PCI address, or a part out of range.
        """
        match = _ADDRESS.fullmatch(text.strip()) if text.isascii() else None
        if match is None:
            raise ValueError(f"{text!r} is not a PCI address like "
                             "0000:81:00.0")
        domain, bus, slot, function = (int(part, 16)
                                       for part in match.groups())
        check_pci_address(domain, bus, slot, function)
        return cls(domain, bus, slot, function)


def check_pci_address(domain: int, bus: int, slot: int,
                      function: int) -> None:
    """Refuse a PCI address part out of the range libvirt accepts.

    Raises:
        ValueError: naming the part, its value and its limit.
    """
    for part, value, limit in (("domain", domain, MAX_DOMAIN),
                               ("bus", bus, MAX_BUS),
                               ("slot", slot, MAX_SLOT),
                               ("function", function, MAX_FUNCTION)):
        if not 0 <= value <= limit:
            raise ValueError(f"PCI {part} {value:#x} is out of range "
                             f"(0 to {limit:#x})")


@dataclass(frozen=True, slots=True)
class MdevType:
    """A mediated-device type a parent offers (``<capability type='mdev_types'>``).

    ``available_instances`` is how many more mdevs of this type the parent
    can create now (libvirt's ``availableInstances``; existing mdevs are
    not counted in it).  ``None`` when the document does not say.
    """

    type_id: str
    name: str | None = None
    device_api: str | None = None
    available_instances: int | None = None


@dataclass(frozen=True, slots=True)
class Mdev:
    """An existing mediated device (``<capability type='mdev'>``).

    ``parent`` is the node-device name of its parent (``pci_0000_00_02_0``,
    ``ap_matrix``, ``css_0_0_0052``), ``None`` if the document names none.
    ``uuid`` is from ``<uuid>`` or else from the device's name
    (``mdev_<uuid>[_<parent>]``), ``None`` if neither holds one.
    """

    uuid: str | None
    type_id: str
    parent: str | None
    name: str = ""
    iommu_group: int | None = None


@dataclass(frozen=True, slots=True)
class PCIDevice:
    """A PCI function (``<capability type='pci'>``).

    ``class_code`` is the 24-bit PCI class (``0x030000`` VGA); ``None``
    when the document has no ``<class>``.  ``physical_function`` is set on
    an SR-IOV VF, ``virtual_functions``/``max_virtual_functions`` on a PF
    (libvirt lists only the VFs currently enabled).  ``source`` names the
    document the device was read from (for evidence in ``explain``);
    it is not compared: the same device read from a daemon or replayed
    from a snapshot is equal.
    """

    name: str
    address: PCIAddress
    vendor_id: str
    product_id: str
    class_code: int | None = None
    numa_node: int | None = None
    iommu_group: int | None = None
    physical_function: PCIAddress | None = None
    virtual_functions: tuple[PCIAddress, ...] = ()
    max_virtual_functions: int | None = None
    mdev_types: tuple[MdevType, ...] = ()
    vpd_serial: str | None = None
    vendor_name: str | None = None
    product_name: str | None = None
    driver: str | None = None
    parent: str | None = None
    source: str = field(default="", compare=False)

    @property
    def is_pf(self) -> bool:
        """An SR-IOV physical function (it has a ``virt_functions`` capability)."""
        return (self.max_virtual_functions is not None
                or bool(self.virtual_functions))

    @property
    def is_vf(self) -> bool:
        """An SR-IOV virtual function (it names its physical function)."""
        return self.physical_function is not None

    @property
    def is_display(self) -> bool:
        """A display controller (PCI base class 0x03: VGA, 3D, other)."""
        return self.class_code is not None and self.class_code >> 16 == 0x03

    @property
    def is_mdev_parent(self) -> bool:
        """It offers mediated-device types."""
        return bool(self.mdev_types)


@dataclass(frozen=True, slots=True)
class MdevParent:
    """A parent of mediated devices that is not a PCI function.

    s390's AP matrix (``kind`` ``"ap_matrix"``, name ``ap_matrix``) and
    channel subsystem devices (``kind`` ``"css"``, ``address``
    ``"0.0.fffe"``): Nova cannot name these (it assumes a PCI address);
    they are modelled so that they are read, not crashed on.
    """

    name: str
    kind: str
    mdev_types: tuple[MdevType, ...] = ()
    address: str | None = None
    parent: str | None = None
    source: str = field(default="", compare=False)


@dataclass(frozen=True, slots=True)
class DevicesUnknown:
    """The host's devices could not be read; nothing may be inferred.

    ``reason`` says why, in words a person can act on (which URI, which
    call, what libvirt said).  No device provider is created or removed
    on such a reading.
    """

    reason: str

    #: Always False: lets callers test ``reading.known`` on either kind.
    known = False


@dataclass(frozen=True, slots=True)
class HostDevices:
    """The devices libvirt listed: PCI functions, other mdev parents, mdevs.

    ``source`` names where they were read (a URI, a snapshot directory).
    ``vanished`` names devices listed but gone before their XML could be
    read (hot-unplugged during the reading; see ``docs/devices.md``,
    "Reading devices").  ``ignored`` holds ``(name, reason)`` for devices
    read but left out: a PCI function whose address is out of
    PCI's ranges (libvirt accepts ``<bus>4294967295</bus>``).  Build it
    with :meth:`build`, which indexes the lookups.
    """

    pci: tuple[PCIDevice, ...] = ()
    other_mdev_parents: tuple[MdevParent, ...] = ()
    mdevs: tuple[Mdev, ...] = ()
    source: str = field(default="", compare=False)
    vanished: tuple[str, ...] = ()
    ignored: tuple[tuple[str, str], ...] = ()
    _by_address: tuple | None = field(default=None, compare=False,
                                      hash=False, repr=False)

    #: Always True (see :attr:`DevicesUnknown.known`).
    known = True

    @classmethod
    def build(cls, pci=(), other_mdev_parents=(), mdevs=(), *,
              source: str = "", vanished=(), ignored=()) -> HostDevices:
        """The reading of these devices, PCI functions sorted by address."""
        ordered = tuple(sorted(pci, key=_ADDRESS_KEY))
        return cls(ordered, tuple(other_mdev_parents), tuple(mdevs), source,
                   tuple(vanished), tuple(ignored),
                   (ordered, {device.address: device for device in ordered}))

    def by_address(self, address: PCIAddress | str) -> PCIDevice | None:
        """The PCI function at ``address`` (a :class:`PCIAddress` or text)."""
        if isinstance(address, str):
            try:
                address = PCIAddress.parse(address)
            except ValueError:
                return None
        index = self._by_address
        # The index is of the PCI functions it was built with: a copy made
        # by dataclasses.replace(pci=...) carries a stale one; not used.
        if index is None or index[0] is not self.pci:
            return next((d for d in self.pci if d.address == address), None)
        return index[1].get(address)

    def virtual_functions_of(self, pf: PCIDevice | PCIAddress
                             ) -> tuple[PCIDevice, ...]:
        """The listed VFs of ``pf``: those that name it as their PF."""
        address = pf.address if isinstance(pf, PCIDevice) else pf
        return tuple(d for d in self.pci if d.physical_function == address)

    def mdevs_of(self, parent: str) -> tuple[Mdev, ...]:
        """The existing mdevs whose parent is the device named ``parent``."""
        return tuple(m for m in self.mdevs if m.parent == parent)

    @property
    def mdev_parents(self) -> tuple[PCIDevice | MdevParent, ...]:
        """Every device offering mdev types: PCI functions, then the others."""
        return tuple(d for d in self.pci if d.mdev_types) + tuple(
            self.other_mdev_parents)


_ADDRESS_KEY = (lambda device: device.address)  # noqa: E731

#: What a reading of the host's devices is.
DevicesReading = HostDevices | DevicesUnknown
