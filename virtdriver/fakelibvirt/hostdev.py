"""Host devices in guests: ``<hostdev>`` attach and detach, and a node
device's detach from / re-attach to the host.

As on a real host, a device is held by at most one running domain: a
second domain that asks for it (attach, or start with it in its
definition) gets libvirt's "PCI device ... is in use by driver QEMU,
domain ..." (``VIR_ERR_OPERATION_INVALID``), and so does
``nodeDeviceDetachFlags`` / ``nodeDeviceReAttach`` of a held device.  A
managed PCI device (``managed='yes'``) is detached from the host when a
domain takes it and re-attached when the domain lets it go; an unmanaged
one is the caller's to detach first (``virNodeDevice.detachFlags``),
which the fake records but does not require.
"""

from __future__ import annotations

import copy

from lxml import etree

from virtdriver.fakelibvirt import domain_constants as d
from virtdriver.fakelibvirt.constants import (
    VIR_ERR_DEVICE_MISSING, VIR_ERR_OPERATION_UNSUPPORTED, VIR_FROM_NODEDEV)
from virtdriver.fakelibvirt.domain_xml import (
    DomainDef, Hostdev, hostdev_of, parse_device)
from virtdriver.fakelibvirt.errors import make_error
from virtdriver.fakelibvirt.guests import (
    DRIVER_DOMAIN, Guest, Guests, guests_of, in_use, invalid, invalid_arg)
from virtdriver.fakelibvirt.nodedev_state import table_for


def attach_device(guests: Guests, guest: Guest, xml: str,
                  targets: list[DomainDef], *, live: bool) -> None:
    """Add a ``<hostdev>`` to ``targets`` (the live and/or persistent
    definition); live, the device must be free and is then held."""
    element, hostdev = _hostdev_only(xml, "attach")
    for target in targets:
        if hostdev in target.hostdevs():
            raise invalid("device is already in the domain configuration",
                          DRIVER_DOMAIN)
    if live:
        guests.check_device_free(hostdev, guest.name)
        if hostdev.kind == "pci" and hostdev.managed \
                and hostdev.key not in guests.detached:
            guests.detached.add(hostdev.key)
            guest.auto_detached.add(hostdev.key)
    for target in targets:
        copy = _with_alias(element, target) if target is guest.live \
            else element
        target.add_device(copy)
    if live:
        guests.emit(guest.uuid, guest.name, d.VIR_DOMAIN_EVENT_ID_DEVICE_ADDED,
                    _alias(guest.live, hostdev))


def detach_device(guests: Guests, guest: Guest, xml: str,
                  targets: list[DomainDef], *, live: bool) -> None:
    """Remove a ``<hostdev>`` from ``targets``; live, the device is let
    go (a managed one re-attached to the host) and ``DEVICE_REMOVED``
    follows with its alias."""
    _, hostdev = _hostdev_only(xml, "detach")
    for target in targets:
        if hostdev not in target.hostdevs():
            raise _not_found(hostdev)
    alias = _alias(guest.live, hostdev) if live else None
    for target in targets:
        target.remove_hostdev(hostdev)
    if live:
        if hostdev.key in guest.auto_detached:
            guest.auto_detached.discard(hostdev.key)
            guests.detached.discard(hostdev.key)
        guests.emit(guest.uuid, guest.name,
                    d.VIR_DOMAIN_EVENT_ID_DEVICE_REMOVED, alias)


def _hostdev_only(xml: str, verb: str) -> tuple[etree._Element, Hostdev]:
    element, hostdev = parse_device(xml)
    if hostdev is None or hostdev.kind not in ("pci", "mdev"):
        what = element.get("type") if hostdev else element.tag
        detail = (f"fakelibvirt can {verb} PCI and mdev <hostdev> devices "
                  f"only, not {what}")
        raise make_error(VIR_ERR_OPERATION_UNSUPPORTED, DRIVER_DOMAIN,
                         f"Operation not supported: {detail}",
                         str1="Operation not supported: %s", str2=detail)
    return element, hostdev


def _with_alias(element: etree._Element, target: DomainDef
                ) -> etree._Element:
    """``element`` with the next free ``hostdevN`` alias, as libvirt names
    a hot-plugged host device."""
    taken = {a.get("name") for a in target.root.iterfind(
        "devices/hostdev/alias")}
    number = next(n for n in range(len(taken) + 1)
                  if f"hostdev{n}" not in taken)
    copied = copy.deepcopy(element)
    for old in copied.findall("alias"):
        copied.remove(old)
    etree.SubElement(copied, "alias", name=f"hostdev{number}")
    return copied


def _alias(definition: DomainDef | None, hostdev: Hostdev) -> str:
    if definition is not None:
        for element in definition.root.iterfind("devices/hostdev"):
            if hostdev_of(element) == hostdev:
                alias = element.find("alias")
                if alias is not None:
                    return alias.get("name")
    return "hostdev0"


def _not_found(hostdev: Hostdev):
    detail = (f"host pci device {hostdev.key} not found"
              if hostdev.kind == "pci"
              else f"mediated device '{hostdev.key}' not found")
    return make_error(VIR_ERR_DEVICE_MISSING, DRIVER_DOMAIN,
                      f"device not found: {detail}",
                      str1="device not found: %s", str2=detail)


class NodeDeviceHostdev:
    """``virNodeDevice`` calls for assigning a PCI device: detach it from
    the host (``detachFlags``, ``dettach``), give it back (``reAttach``),
    ``reset``.  Each refuses a device a running domain holds."""

    def _pci_address(self, method: str, function: str) -> str:
        """The device's PCI address, after the connection's guard (faults
        under ``nodeDevice.<method>``, as the other device calls)."""
        conn = self.connect()
        key = f"nodeDevice.{method}"
        conn._guard(key, function, VIR_FROM_NODEDEV)
        conn._guard(f"{key}:{self.name()}", function, VIR_FROM_NODEDEV)
        name = self.name()
        state = table_for(conn.host).require(name)
        top = etree.fromstring(state.xml.encode()).findall("capability")
        if not name.startswith("pci_") or "pci" not in [
                e.get("type") for e in top]:
            raise invalid_arg(f"device {name} is not a PCI device",
                              VIR_FROM_NODEDEV)
        domain, bus, slot, function_ = name[4:].split("_")
        return f"{domain}:{bus}:{slot}.{int(function_, 16):x}"

    def _refuse_if_held(self, guests: Guests, address: str) -> None:
        holder = guests.holder_of_pci(address)
        if holder is not None:
            raise in_use(Hostdev("pci", address, False, ""), holder)

    def detachFlags(self, driverName: str | None = None,  # noqa: N802, N803
                    flags: int = 0) -> int:
        """Detach from the host (for assignment); 0."""
        address = self._pci_address("detachFlags", "virNodeDeviceDetachFlags")
        guests = guests_of(self.connect().host)
        with guests.lock:
            self._refuse_if_held(guests, address)
            guests.detached.add(address)
        return 0

    def dettach(self) -> int:
        """libvirt's old spelling of :meth:`detachFlags`."""
        address = self._pci_address("dettach", "virNodeDeviceDettach")
        guests = guests_of(self.connect().host)
        with guests.lock:
            self._refuse_if_held(guests, address)
            guests.detached.add(address)
        return 0

    def reAttach(self) -> int:  # noqa: N802
        """Give the device back to the host; 0."""
        address = self._pci_address("reAttach", "virNodeDeviceReAttach")
        guests = guests_of(self.connect().host)
        with guests.lock:
            self._refuse_if_held(guests, address)
            guests.detached.discard(address)
        return 0

    def reset(self) -> int:
        """Reset the device; refused while a domain holds it; 0."""
        address = self._pci_address("reset", "virNodeDeviceReset")
        guests = guests_of(self.connect().host)
        with guests.lock:
            self._refuse_if_held(guests, address)
        return 0
