"""The ``virConnect`` calls about domains, host memory and domain events:
:class:`DomainAPI`, one of :class:`~.connection.virConnect`'s bases.

Domains belong to the host (:func:`.guests.guests_of`), so every
connection to a host sees the same ones, as with a real hypervisor.
"""

from __future__ import annotations

import uuid as uuid_module
from collections.abc import Callable
from typing import Any

from virtdriver.fakelibvirt import domain_constants as d
from virtdriver.fakelibvirt import event_loop
from virtdriver.fakelibvirt.constants import (
    VIR_ERR_INVALID_ARG, VIR_FROM_DOMAIN, VIR_FROM_NONE)
from virtdriver.fakelibvirt.domain import virDomain
from virtdriver.fakelibvirt.domain_xml import parse_domain
from virtdriver.fakelibvirt.errors import make_error
from virtdriver.fakelibvirt.guests import (
    Guest, guests_of, internal, invalid_arg, no_domain)

#: ``getType()``: the hypervisor fakelibvirt stands in for.
HYPERVISOR_TYPE = "QEMU"
#: Each filter group of ``listAllDomains``: (flag, test) pairs; a domain
#: passes a group none of whose flags is given, or one whose flag it meets.
_FILTERS = (
    ((d.VIR_CONNECT_LIST_DOMAINS_ACTIVE, lambda g: g.active),
     (d.VIR_CONNECT_LIST_DOMAINS_INACTIVE, lambda g: not g.active)),
    ((d.VIR_CONNECT_LIST_DOMAINS_PERSISTENT, lambda g: g.persistent),
     (d.VIR_CONNECT_LIST_DOMAINS_TRANSIENT, lambda g: not g.persistent)),
    ((d.VIR_CONNECT_LIST_DOMAINS_RUNNING,
      lambda g: g.state == d.VIR_DOMAIN_RUNNING),
     (d.VIR_CONNECT_LIST_DOMAINS_PAUSED,
      lambda g: g.state == d.VIR_DOMAIN_PAUSED),
     (d.VIR_CONNECT_LIST_DOMAINS_SHUTOFF,
      lambda g: g.state == d.VIR_DOMAIN_SHUTOFF),
     (d.VIR_CONNECT_LIST_DOMAINS_OTHER, lambda g: g.state not in (
         d.VIR_DOMAIN_RUNNING, d.VIR_DOMAIN_PAUSED, d.VIR_DOMAIN_SHUTOFF))),
    ((d.VIR_CONNECT_LIST_DOMAINS_MANAGEDSAVE, lambda g: False),
     (d.VIR_CONNECT_LIST_DOMAINS_NO_MANAGEDSAVE, lambda g: True)),
    ((d.VIR_CONNECT_LIST_DOMAINS_AUTOSTART, lambda g: False),
     (d.VIR_CONNECT_LIST_DOMAINS_NO_AUTOSTART, lambda g: True)),
    ((d.VIR_CONNECT_LIST_DOMAINS_HAS_SNAPSHOT, lambda g: False),
     (d.VIR_CONNECT_LIST_DOMAINS_NO_SNAPSHOT, lambda g: True)),
    ((d.VIR_CONNECT_LIST_DOMAINS_HAS_CHECKPOINT, lambda g: False),
     (d.VIR_CONNECT_LIST_DOMAINS_NO_CHECKPOINT, lambda g: True)),
)
#: Highest domain event id libvirt-python knows.
_LAST_EVENT_ID = max(v for k, v in vars(d).items()
                     if k.startswith("VIR_DOMAIN_EVENT_ID_")
                     and k != "VIR_DOMAIN_EVENT_ID_LAST")


class DomainAPI:
    """Domains, host memory and domain events on a connection."""

    # Provided by virConnect.
    host: Any
    closed: bool
    _guard: Callable[..., None]

    def _domain(self, guest: Guest) -> virDomain:
        return virDomain(self, guest.uuid, guest.name)  # type: ignore[arg-type]

    def _checked(self, method: str, function: str):
        self._guard(method, function, VIR_FROM_DOMAIN)
        return guests_of(self.host)

    # -- defining and starting ----------------------------------------------

    def defineXML(self, xml: str) -> virDomain:  # noqa: N802
        """Define (or redefine: same name and uuid) a persistent domain."""
        return self._define("defineXML", "virDomainDefineXML", xml)

    def defineXMLFlags(self, xml: str, flags: int = 0) -> virDomain:  # noqa: N802
        return self._define("defineXMLFlags", "virDomainDefineXMLFlags", xml)

    def _define(self, method: str, function: str, xml: str) -> virDomain:
        guests = self._checked(method, function)
        definition = parse_domain(xml)
        with guests.lock:
            guest, updated = guests.define(definition)
            guests.lifecycle(guest, d.VIR_DOMAIN_EVENT_DEFINED,
                             d.VIR_DOMAIN_EVENT_DEFINED_UPDATED if updated
                             else d.VIR_DOMAIN_EVENT_DEFINED_ADDED)
            return self._domain(guest)

    def createXML(self, xmlDesc: str, flags: int = 0) -> virDomain:  # noqa: N802, N803
        """Start a transient domain."""
        guests = self._checked("createXML", "virDomainCreateXML")
        definition = parse_domain(xmlDesc)
        with guests.lock:
            guest = guests.create_transient(definition)
            guests.lifecycle(guest, d.VIR_DOMAIN_EVENT_STARTED,
                             d.VIR_DOMAIN_EVENT_STARTED_BOOTED)
            domain = self._domain(guest)
        if flags & d.VIR_DOMAIN_START_PAUSED:
            domain.suspend()
        return domain

    # -- finding --------------------------------------------------------------

    def lookupByName(self, name: str) -> virDomain:  # noqa: N802
        guests = self._checked("lookupByName", "virDomainLookupByName")
        with guests.lock:
            guest = guests.by_name(name)
            if guest is None:
                raise no_domain(f"no domain with matching name '{name}'")
            return self._domain(guest)

    def lookupByUUIDString(self, uuidstr: str) -> virDomain:  # noqa: N802
        function = "virDomainLookupByUUIDString"
        guests = self._checked("lookupByUUIDString", function)
        try:
            key = str(uuid_module.UUID(uuidstr))
        except (ValueError, TypeError, AttributeError):
            raise make_error(VIR_ERR_INVALID_ARG, VIR_FROM_DOMAIN,
                             "Invalid UUID", str1=function,
                             str2="uuidstr") from None
        return self._by_uuid(guests, key)

    def lookupByUUID(self, uuid: bytes) -> virDomain:  # noqa: N802
        guests = self._checked("lookupByUUID", "virDomainLookupByUUID")
        return self._by_uuid(guests, str(uuid_module.UUID(bytes=bytes(uuid))))

    def _by_uuid(self, guests, key: str) -> virDomain:
        with guests.lock:
            guest = guests.by_uuid.get(key)
            if guest is None:
                raise no_domain(f"no domain with matching uuid '{key}'")
            return self._domain(guest)

    def lookupByID(self, id: int) -> virDomain:  # noqa: N802, A002
        function = "virDomainLookupByID"
        guests = self._checked("lookupByID", function)
        if id < 0:
            message = f"id in {function} must be zero or greater"
            raise make_error(VIR_ERR_INVALID_ARG, VIR_FROM_DOMAIN, message,
                             str1=function, str2="id")
        with guests.lock:
            guest = guests.by_id(id)
            if guest is None:
                raise no_domain(f"no domain with matching id {id}")
            return self._domain(guest)

    def listAllDomains(self, flags: int = 0) -> list[virDomain]:  # noqa: N802
        """Every domain passing ``flags`` (``VIR_CONNECT_LIST_DOMAINS_*``):
        within each group, one of the flags given must hold."""
        guests = self._checked("listAllDomains", "virConnectListAllDomains")
        with guests.lock:
            return [self._domain(g) for g in guests.by_uuid.values()
                    if _passes(g, flags)]

    def listDomainsID(self) -> list[int]:  # noqa: N802
        guests = self._checked("listDomainsID", "virConnectListDomains")
        with guests.lock:
            return sorted(g.id for g in guests.by_uuid.values() if g.active)

    def numOfDomains(self) -> int:  # noqa: N802
        return len(self.listDomainsID())

    def listDefinedDomains(self) -> list[str]:  # noqa: N802
        guests = self._checked("listDefinedDomains",
                               "virConnectListDefinedDomains")
        with guests.lock:
            return sorted(g.name for g in guests.by_uuid.values()
                          if not g.active)

    def numOfDefinedDomains(self) -> int:  # noqa: N802
        return len(self.listDefinedDomains())

    # -- the host's memory ----------------------------------------------------

    def _cells_kib(self, function: str) -> list[tuple[int, int]]:
        """``(total KiB, free KiB)`` per cell: a cell's memory less its
        reserved huge pages and what running domains hold there."""
        self._guard(function, function, VIR_FROM_DOMAIN)
        caps = self._host_capabilities(function)  # type: ignore[attr-defined]
        cells = [c for c in caps.cells if c.memory_kib is not None]
        guests = guests_of(self.host)
        with guests.lock:
            used = guests.used_kib_by_cell([c.id for c in cells])
        out = []
        for cell in cells:
            huge = sum(p.size_kib * p.count for p in cell.pages
                       if p.size_kib > min((q.size_kib for q in cell.pages),
                                           default=0))
            out.append((cell.memory_kib,
                        max(cell.memory_kib - huge - used[cell.id], 0)))
        return out

    def getFreeMemory(self) -> int:  # noqa: N802
        """Free memory of the host, bytes."""
        return sum(free for _, free in
                   self._cells_kib("virNodeGetFreeMemory")) * 1024

    def getCellsFreeMemory(self, startCell: int,  # noqa: N802, N803
                           maxCells: int) -> list[int]:  # noqa: N803
        """Free memory of cells ``startCell`` on, bytes each."""
        cells = self._cells_kib("virNodeGetCellsFreeMemory")
        last = len(cells) - 1
        if startCell < 0 or startCell > last:
            raise internal(f"start cell {startCell} out of range "
                           f"(0-{last})", VIR_FROM_NONE)
        end = min(startCell + maxCells, len(cells))
        return [free * 1024 for _, free in cells[startCell:end]]

    def getMemoryStats(self, cellNum: int,  # noqa: N802, N803
                       flags: int = 0) -> dict[str, int]:
        """``{'total', 'free'}`` KiB of one cell, or of the host
        (``VIR_NODE_MEMORY_STATS_ALL_CELLS``, with ``buffers`` and
        ``cached`` 0)."""
        function = "virNodeGetMemoryStats"
        cells = self._cells_kib(function)
        if cellNum == d.VIR_NODE_MEMORY_STATS_ALL_CELLS:
            return {d.VIR_NODE_MEMORY_STATS_TOTAL: sum(t for t, _ in cells),
                    d.VIR_NODE_MEMORY_STATS_FREE: sum(f for _, f in cells),
                    d.VIR_NODE_MEMORY_STATS_BUFFERS: 0,
                    d.VIR_NODE_MEMORY_STATS_CACHED: 0}
        if not 0 <= cellNum < len(cells):
            raise invalid_arg(f"cellNum in virHostMemGetStats must be less "
                              f"than or equal to {len(cells) - 1}",
                              VIR_FROM_NONE)
        total, free = cells[cellNum]
        return {d.VIR_NODE_MEMORY_STATS_TOTAL: total,
                d.VIR_NODE_MEMORY_STATS_FREE: free}

    def getType(self) -> str:  # noqa: N802
        self._guard("getType", "virConnectGetType", VIR_FROM_DOMAIN)
        return HYPERVISOR_TYPE

    def getSysinfo(self, flags: int = 0) -> str:  # noqa: N802
        """A small SMBIOS ``<sysinfo>``: the host's uuid, the maker
        ``fakelibvirt``."""
        self._guard("getSysinfo", "virConnectGetSysinfo", VIR_FROM_DOMAIN)
        caps = self._host_capabilities("virConnectGetSysinfo")  # type: ignore[attr-defined]
        entries = [("manufacturer", "fakelibvirt"),
                   ("product", self.host.documents.hostname)]
        if caps.uuid:
            entries.append(("uuid", caps.uuid))
        lines = ["<sysinfo type='smbios'>", "  <system>"]
        lines += [f"    <entry name='{k}'>{_text(v)}</entry>"
                  for k, v in entries]
        lines += ["  </system>", "</sysinfo>"]
        return "\n".join(lines) + "\n"

    # -- events -------------------------------------------------------------

    def domainEventRegisterAny(self, dom: virDomain | None,  # noqa: N802
                               eventID: int,  # noqa: N803
                               cb: Callable[..., Any], opaque: Any) -> int:
        """Call ``cb`` on the event loop thread for each ``eventID`` event
        (of ``dom`` only, unless ``None``), with libvirt-python's
        arguments: lifecycle ``cb(conn, dom, event, detail, opaque)``,
        device added/removed ``cb(conn, dom, alias, opaque)``.  Needs a
        registered default event loop, as libvirt does.  Returns the
        callback id."""
        function = "virConnectDomainEventRegisterAny"
        self._guard("domainEventRegisterAny", function, VIR_FROM_DOMAIN)
        event_loop.require()
        if not 0 <= eventID <= _LAST_EVENT_ID:
            raise invalid_arg(f"eventID in {function} must be less than "
                              f"{_LAST_EVENT_ID + 1}", VIR_FROM_DOMAIN)
        key = dom.UUIDString() if dom is not None else None
        guests = guests_of(self.host)
        with guests.lock:
            if any(c[0] is self and c[2] == eventID and c[3] == key
                   for c in guests.callbacks):
                # libvirt-python registers one C callback per event id.
                raise invalid_arg("event callback already tracked",
                                  VIR_FROM_NONE)
            callback_id = _next_callback_id()
            guests.callbacks.append((self, callback_id, eventID, key, cb,
                                     opaque))
        return callback_id

    def domainEventDeregisterAny(self, callbackID: int) -> None:  # noqa: N802, N803
        """Forget a callback; libvirt's error for an unknown id."""
        self._guard("domainEventDeregisterAny",
                    "virConnectDomainEventDeregisterAny", VIR_FROM_DOMAIN)
        guests = guests_of(self.host)
        with guests.lock:
            kept = [c for c in guests.callbacks
                    if not (c[0] is self and c[1] == callbackID)]
            if len(kept) == len(guests.callbacks):
                raise invalid_arg(f"could not find event callback "
                                  f"{callbackID} for deletion",
                                  VIR_FROM_NONE)
            guests.callbacks[:] = kept


def _passes(guest: Guest, flags: int) -> bool:
    for group in _FILTERS:
        given = [test for flag, test in group if flags & flag]
        if given and not any(test(guest) for test in given):
            return False
    return True


def _text(value: str) -> str:
    from xml.sax.saxutils import escape
    return escape(value)


_callback_ids = iter(range(2**31))


def _next_callback_id() -> int:
    return next(_callback_ids)
