"""The domains of one fake host: their life cycle, what they hold of the
host, and the events they cause.

One :class:`Guests` per :class:`~.connection.FakeHost` (:func:`guests_of`),
shared by every connection to it, as a hypervisor's domains are.  Its
rules are libvirt's QEMU driver's where ``test:///default`` says
something a real hypervisor would not (``docs/fakelibvirt.md`` lists
each):

* a running domain holds its memory (``currentMemory``) on the host's
  NUMA cells — those of ``<numatune>``, else spread evenly — so
  ``getFreeMemory`` and friends follow what runs (never below 0;
  overcommit is not refused, as the kernel does not refuse it);
* a domain whose definition names a CPU or NUMA node the host does not
  have, or a host device it does not have (its node devices now, see
  :mod:`.nodedev_state`: an mdev must be active) or another running
  domain holds, does not start, with the error libvirt gives;
* host devices: a running domain holds its ``<hostdev>``\\ s; a managed
  one is detached from the host when the domain starts and re-attached
  when it stops.

fakelibvirt's QEMU driver is called ``QEMU`` in "in use by" messages.
"""

from __future__ import annotations

import errno
import itertools
import os
import threading
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from virtdriver.capabilities import HostCapabilities
from virtdriver.fakelibvirt import domain_constants as d
from virtdriver.fakelibvirt.constants import (
    VIR_ERR_CONFIG_UNSUPPORTED, VIR_ERR_DEVICE_MISSING, VIR_ERR_INTERNAL_ERROR,
    VIR_ERR_INVALID_ARG, VIR_ERR_NO_DOMAIN, VIR_ERR_OPERATION_FAILED,
    VIR_ERR_OPERATION_INVALID, VIR_ERR_SYSTEM_ERROR, VIR_FROM_DOMAIN,
    VIR_FROM_NONE, VIR_FROM_QEMU)
from virtdriver.fakelibvirt.domain_xml import DomainDef, Hostdev
from virtdriver.fakelibvirt.errors import libvirtError, make_error
from virtdriver.fakelibvirt.nodedev_state import table_for

if TYPE_CHECKING:
    from virtdriver.fakelibvirt.connection import FakeHost

#: The error domain of the hypervisor driver fakelibvirt stands in for.
DRIVER_DOMAIN = VIR_FROM_QEMU
#: How libvirt's host device code names the driver holding a device.
DRIVER_NAME = "QEMU"
#: Node device names start so; mdev names carry the uuid with ``_``.
PCI_PREFIX, MDEV_PREFIX = "pci_", "mdev_"


@dataclass
class Guest:
    """One domain: its persistent (``config``) and running (``live``)
    definitions, id, state and reason."""

    uuid: str
    name: str
    config: DomainDef | None
    live: DomainDef | None = None
    id: int = -1
    state: int = d.VIR_DOMAIN_SHUTOFF
    reason: int = d.VIR_DOMAIN_SHUTOFF_UNKNOWN
    pins: dict[int, frozenset[int]] = field(default_factory=dict)
    #: Managed PCI devices this domain's start detached from the host.
    auto_detached: set[str] = field(default_factory=set)

    @property
    def current(self) -> DomainDef:
        return self.live if self.live is not None else self.config

    @property
    def active(self) -> bool:
        return self.live is not None

    @property
    def persistent(self) -> bool:
        return self.config is not None


class Guests:
    """The domains of one host (thread-safe: one lock for all of them)."""

    def __init__(self, host: FakeHost) -> None:
        self.host = host
        self.lock = threading.RLock()
        self.by_uuid: dict[str, Guest] = {}
        self._ids = itertools.count(1)
        #: PCI addresses detached from the host (bound for assignment).
        self.detached: set[str] = set()
        #: (connection, callback id, event id, domain uuid or None,
        #: callback, opaque) of every registered domain event callback.
        self.callbacks: list[tuple[Any, int, int, str | None,
                                   Callable[..., Any], Any]] = []

    # -- finding ----------------------------------------------------------

    def by_name(self, name: str) -> Guest | None:
        return next((g for g in self.by_uuid.values() if g.name == name),
                    None)

    def by_id(self, domain_id: int) -> Guest | None:
        return next((g for g in self.by_uuid.values()
                     if g.active and g.id == domain_id), None)

    def get(self, uuid: str, name: str) -> Guest:
        """The domain a handle points at, or libvirt's error for a
        domain that is gone."""
        guest = self.by_uuid.get(uuid)
        if guest is None:
            detail = f"no domain with matching uuid '{uuid}' ({name})"
            raise no_domain(detail)
        return guest

    # -- life cycle ---------------------------------------------------------

    def define(self, definition: DomainDef) -> tuple[Guest, bool]:
        """Add or replace a persistent definition; ``(guest, updated)``."""
        guest = self._same_or_free(definition)
        if guest is None:
            guest = Guest(definition.uuid, definition.name,
                          config=definition)
            self.by_uuid[definition.uuid] = guest
            return guest, False
        updated = guest.config is not None  # a transient one: "added"
        guest.config = definition
        return guest, updated

    def create_transient(self, definition: DomainDef) -> Guest:
        """Start ``definition``: a new transient domain, or the inactive
        domain of the same name and uuid, which then runs it."""
        existing = self._same_or_free(definition)
        if existing is not None:
            if existing.active:
                raise invalid(f"domain '{existing.name}' is already active")
            self.start(existing, definition)
            return existing
        guest = Guest(definition.uuid, definition.name, config=None)
        guest.live = definition  # for start(): it reads guest.current
        self.by_uuid[definition.uuid] = guest
        try:
            self.start(guest, definition)
        except libvirtError:
            del self.by_uuid[definition.uuid]
            raise
        return guest

    def start(self, guest: Guest, definition: DomainDef | None = None
              ) -> None:
        """Run ``guest`` (its config, or ``definition``) after checking
        the host has what it names."""
        live = (definition or guest.config).copy()
        self._check_host_has(live, guest)
        for hostdev in live.hostdevs():
            if hostdev.kind == "pci" and hostdev.managed \
                    and hostdev.key not in self.detached:
                self.detached.add(hostdev.key)
                guest.auto_detached.add(hostdev.key)
        guest.live = live
        guest.id = next(self._ids)
        guest.state, guest.reason = d.VIR_DOMAIN_RUNNING, \
            d.VIR_DOMAIN_RUNNING_BOOTED
        guest.pins = {}

    def stop(self, guest: Guest, reason: int) -> None:
        """Stop ``guest``; a transient one is then gone."""
        self.detached -= guest.auto_detached
        guest.auto_detached.clear()
        guest.live, guest.id, guest.pins = None, -1, {}
        guest.state, guest.reason = d.VIR_DOMAIN_SHUTOFF, reason
        if not guest.persistent:
            self.by_uuid.pop(guest.uuid, None)

    def _same_or_free(self, definition: DomainDef) -> Guest | None:
        """The domain ``definition`` redefines (same name and uuid), or
        ``None`` when its name and uuid are both free; libvirt's error
        when one is taken by another domain."""
        by_name = self.by_name(definition.name)
        by_uuid = self.by_uuid.get(definition.uuid)
        if by_name is not None and by_name.uuid != definition.uuid:
            raise _exists(by_name.name, by_name.uuid)
        if by_uuid is not None and by_uuid.name != definition.name:
            detail = (f"domain '{by_uuid.name}' is already defined with "
                      f"uuid {by_uuid.uuid}")
            raise make_error(VIR_ERR_OPERATION_FAILED, VIR_FROM_DOMAIN,
                             f"operation failed: {detail}",
                             str1="operation failed: %s", str2=detail)
        return by_uuid

    # -- what the host has --------------------------------------------------

    def _check_host_has(self, live: DomainDef, guest: Guest) -> None:
        caps = self.host_capabilities()
        online = self.online_cpus(caps)
        pinned = live.pinned_cpus()
        if pinned and (not pinned & online
                       or max(pinned) >= self.cpu_count()):
            raise affinity_error(self.fake_pid(guest))
        cells = {cell.id for cell in caps.cells} if caps else set()
        for node in sorted(live.memory_nodes() or ()):
            if node not in cells:
                detail = f"NUMA node {node} is unavailable"
                raise make_error(VIR_ERR_CONFIG_UNSUPPORTED, VIR_FROM_NONE,
                                 f"unsupported configuration: {detail}",
                                 str1="unsupported configuration: %s",
                                 str2=detail)
        for hostdev in live.hostdevs():
            self.check_device_free(hostdev, live.name)

    def check_device_free(self, hostdev: Hostdev, for_domain: str) -> None:
        """Refuse a device the host lacks or another running domain holds
        (libvirt's host device manager's words)."""
        self.find_node_device(hostdev)
        holder = self.holder(hostdev)
        if holder is not None and holder != for_domain:
            raise in_use(hostdev, holder)

    def find_node_device(self, hostdev: Hostdev) -> str:
        """The node device name of ``hostdev``, or libvirt's error."""
        table = table_for(self.host)
        devices = [n for n in table.names()
                   if (state := table.get(n)) is not None and state.active]
        if hostdev.kind == "pci":
            name = PCI_PREFIX + hostdev.key.replace(":", "_").replace(".", "_")
            if name in devices:
                return name
            path = f"/sys/bus/pci/devices/{hostdev.key}/config"
            message = (f"Device {hostdev.key} not found: could not access "
                       f"{path}: {os.strerror(errno.ENOENT)}")
            raise make_error(VIR_ERR_SYSTEM_ERROR, VIR_FROM_NONE, message,
                             str1="%s", str2=message, int1=errno.ENOENT)
        if hostdev.kind == "mdev":
            prefix = MDEV_PREFIX + hostdev.key.replace("-", "_")
            found = sorted(n for n in devices if n.startswith(prefix))
            if found:
                return found[0]
            detail = f"mediated device '{hostdev.key}' not found"
            raise make_error(VIR_ERR_DEVICE_MISSING, VIR_FROM_NONE,
                             f"device not found: {detail}",
                             str1="device not found: %s", str2=detail)
        return hostdev.key

    def holder(self, hostdev: Hostdev) -> str | None:
        """The running domain that holds ``hostdev``, if any."""
        for guest in self.by_uuid.values():
            if guest.active and hostdev in guest.live.hostdevs():
                return guest.name
        return None

    def holder_of_pci(self, address: str) -> str | None:
        return self.holder(Hostdev("pci", address, False, ""))

    def host_capabilities(self) -> HostCapabilities | None:
        for conn in self.host.connections():
            try:
                return conn._host_capabilities("virDomainCreate")
            except libvirtError:
                return None
        return None

    def online_cpus(self, caps: HostCapabilities | None) -> frozenset[int]:
        cpu_map = self.host.cpu_map()
        if cpu_map is not None:
            return frozenset(i for i, on in enumerate(cpu_map[1]) if on)
        if caps is None:
            return frozenset()
        return frozenset(c.id for cell in caps.cells for c in cell.cpus)

    def cpu_count(self) -> int:
        cpu_map = self.host.cpu_map()
        if cpu_map is not None:
            return cpu_map[0]
        return len(self.online_cpus(self.host_capabilities()))

    def fake_pid(self, guest: Guest) -> int:
        """The process id fakelibvirt pretends a domain has."""
        return 10000 + max(guest.id, 0)

    # -- memory -------------------------------------------------------------

    def used_kib_by_cell(self, cells: list[int]) -> dict[int, int]:
        """KiB the running domains hold on each host cell."""
        used = dict.fromkeys(cells, 0)
        for guest in self.by_uuid.values():
            if not guest.active or not cells:
                continue
            nodes = [n for n in sorted(guest.live.memory_nodes() or cells)
                     if n in used] or cells
            share, rest = divmod(guest.live.memory_kib, len(nodes))
            for index, node in enumerate(nodes):
                used[node] += share + (1 if index < rest else 0)
        return used

    # -- events -------------------------------------------------------------

    def emit(self, guest_uuid: str, guest_name: str, event_id: int,
             *args: Any) -> None:
        """Deliver an event to every callback registered for it, on the
        event loop (see :mod:`.event_loop`)."""
        from virtdriver.fakelibvirt import event_loop
        from virtdriver.fakelibvirt.domain import virDomain

        # A closed connection's callbacks go with it, as in libvirt.
        self.callbacks[:] = [c for c in self.callbacks if not c[0].closed]
        for conn, _cid, wanted, dom_uuid, callback, opaque in list(
                self.callbacks):
            if wanted != event_id:
                continue
            if dom_uuid is not None and dom_uuid != guest_uuid:
                continue
            event_loop.dispatch(callback, conn,
                                virDomain(conn, guest_uuid, guest_name),
                                *args, opaque)

    def lifecycle(self, guest: Guest, event: int, detail: int) -> None:
        self.emit(guest.uuid, guest.name, d.VIR_DOMAIN_EVENT_ID_LIFECYCLE,
                  event, detail)


_registry_lock = threading.Lock()
_registry: weakref.WeakKeyDictionary[FakeHost, Guests] = \
    weakref.WeakKeyDictionary()


def guests_of(host: FakeHost) -> Guests:
    """The :class:`Guests` of ``host`` (made on first use)."""
    with _registry_lock:
        guests = _registry.get(host)
        if guests is None:
            guests = _registry[host] = Guests(host)
        return guests


def no_domain(detail: str | None = None) -> libvirtError:
    """``VIR_ERR_NO_DOMAIN`` from the driver."""
    if detail is None:
        return make_error(VIR_ERR_NO_DOMAIN, DRIVER_DOMAIN,
                          "Domain not found", str1="Domain not found")
    return make_error(VIR_ERR_NO_DOMAIN, DRIVER_DOMAIN,
                      f"Domain not found: {detail}",
                      str1="Domain not found: %s", str2=detail)


def invalid(detail: str, domain: int = VIR_FROM_DOMAIN) -> libvirtError:
    """``VIR_ERR_OPERATION_INVALID``: "Requested operation is not valid"."""
    return make_error(VIR_ERR_OPERATION_INVALID, domain,
                      f"Requested operation is not valid: {detail}",
                      str1="Requested operation is not valid: %s",
                      str2=detail)


def invalid_arg(detail: str, domain: int = DRIVER_DOMAIN) -> libvirtError:
    return make_error(VIR_ERR_INVALID_ARG, domain,
                      f"invalid argument: {detail}",
                      str1="invalid argument: %s", str2=detail)


def internal(detail: str, domain: int = DRIVER_DOMAIN) -> libvirtError:
    return make_error(VIR_ERR_INTERNAL_ERROR, domain,
                      f"internal error: {detail}",
                      str1="internal error: %s", str2=detail)


def in_use(hostdev: Hostdev, holder: str) -> libvirtError:
    """A device another domain holds, as libvirt's host device code says
    it."""
    what = (f"PCI device {hostdev.key}" if hostdev.kind == "pci" else
            f"mediated device /sys/bus/mdev/devices/{hostdev.key}")
    return invalid(f"{what} is in use by driver {DRIVER_NAME}, "
                   f"domain {holder}", VIR_FROM_NONE)


def affinity_error(pid: int) -> libvirtError:
    """What pinning to CPUs none of which is online ends in."""
    message = (f"cannot set CPU affinity on process {pid}: "
               f"{os.strerror(errno.EINVAL)}")
    return make_error(VIR_ERR_SYSTEM_ERROR, VIR_FROM_NONE, message,
                      str1="%s", str2=message, int1=errno.EINVAL)


def _exists(name: str, uuid: str) -> libvirtError:
    detail = f"domain '{name}' already exists with uuid {uuid}"
    return make_error(VIR_ERR_OPERATION_FAILED, VIR_FROM_DOMAIN,
                      f"operation failed: {detail}",
                      str1="operation failed: %s", str2=detail)
