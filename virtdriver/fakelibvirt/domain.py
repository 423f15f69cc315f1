"""``virDomain``: a handle on one domain of a fake host.

Like libvirt's, a handle is a (connection, uuid, name) triple: it outlives
the domain, and a call on a domain that is gone raises
``VIR_ERR_NO_DOMAIN`` "no domain with matching uuid". The rules (what
runs, what it holds, which errors) live in :mod:`.guests`; host devices
in :mod:`.hostdev`.
"""

from __future__ import annotations

import functools
import uuid as uuid_module
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from virtdriver.fakelibvirt import domain_constants as d
from virtdriver.fakelibvirt.api_table import Unsupported
from virtdriver.fakelibvirt.constants import VIR_FROM_DOMAIN
from virtdriver.fakelibvirt.guests import (
    DRIVER_DOMAIN, Guest, affinity_error, guests_of, invalid, invalid_arg)
from virtdriver.fakelibvirt.hostdev import attach_device, detach_device

if TYPE_CHECKING:
    from virtdriver.fakelibvirt.connection import virConnect

F = TypeVar("F", bound=Callable[..., Any])


def _call(function: str) -> Callable[[F], F]:
    """Guard a method as libvirt guards the C call ``function`` (closed or
    dropped connection, planned faults), then run it under the host's
    domain lock with the :class:`Guest` as second argument."""

    def decorate(method: F) -> F:
        @functools.wraps(method)
        def guarded(self: virDomain, *args: Any, **kwargs: Any) -> Any:
            self._conn._guard(method.__name__, function, VIR_FROM_DOMAIN)
            guests = guests_of(self._conn.host)
            with guests.lock:
                guest = guests.get(self._uuid, self._name)
                return method(self, guest, *args, **kwargs)

        return guarded  # type: ignore[return-value]

    return decorate


class virDomain(Unsupported):  # noqa: N801 - libvirt's name
    """One domain, answering as libvirt's QEMU driver would."""

    LIBVIRT_CLASS = "virDomain"

    def __init__(self, conn: virConnect, uuid: str, name: str) -> None:
        self._conn = conn
        self._uuid = uuid
        self._name = name

    @property
    def _guests(self):
        return guests_of(self._conn.host)

    def connect(self) -> virConnect:
        return self._conn

    def name(self) -> str:
        return self._name

    def UUIDString(self) -> str:  # noqa: N802
        return self._uuid

    def UUID(self) -> bytes:  # noqa: N802
        return uuid_module.UUID(self._uuid).bytes

    def __eq__(self, other: Any) -> bool:
        return (isinstance(other, virDomain) and other._conn is self._conn
                and other._uuid == self._uuid)

    def __hash__(self) -> int:
        return hash(self._uuid)

    def __repr__(self) -> str:
        return f"<fakelibvirt.virDomain {self._name} {self._uuid}>"

    # -- reading ------------------------------------------------------------

    @_call("virDomainGetID")
    def ID(self, guest: Guest) -> int:  # noqa: N802
        return guest.id

    @_call("virDomainIsActive")
    def isActive(self, guest: Guest) -> int:  # noqa: N802
        return int(guest.active)

    @_call("virDomainIsPersistent")
    def isPersistent(self, guest: Guest) -> int:  # noqa: N802
        return int(guest.persistent)

    @_call("virDomainGetInfo")
    def info(self, guest: Guest) -> list[int]:
        """``[state, max memory KiB, memory KiB, vCPUs, CPU time ns]``
        (CPU time is always 0: nothing runs)."""
        current = guest.current
        return [guest.state, current.max_memory_kib, current.memory_kib,
                current.vcpus, 0]

    @_call("virDomainGetState")
    def state(self, guest: Guest, flags: int = 0) -> list[int]:
        return [guest.state, guest.reason]

    @_call("virDomainGetMaxMemory")
    def maxMemory(self, guest: Guest) -> int:  # noqa: N802
        return guest.current.max_memory_kib

    @_call("virDomainGetAutostart")
    def autostart(self, guest: Guest) -> int:
        return 0

    @_call("virDomainGetXMLDesc")
    def XMLDesc(self, guest: Guest, flags: int = 0) -> str:  # noqa: N802
        """The definition as defined, with libvirt's fill-ins; the running
        one with its ``id`` unless ``VIR_DOMAIN_XML_INACTIVE``."""
        if flags & d.VIR_DOMAIN_XML_INACTIVE and guest.config is not None:
            return guest.config.to_xml(None)
        return guest.current.to_xml(guest.id if guest.active else None)

    # -- life cycle ---------------------------------------------------------

    @_call("virDomainCreate")
    def create(self, guest: Guest) -> int:
        return self._start(guest, 0)

    @_call("virDomainCreateWithFlags")
    def createWithFlags(self, guest: Guest, flags: int = 0) -> int:  # noqa: N802
        return self._start(guest, flags)

    def _start(self, guest: Guest, flags: int) -> int:
        if guest.active:
            raise invalid("domain is already running", DRIVER_DOMAIN)
        self._guests.start(guest)
        self._guests.lifecycle(guest, d.VIR_DOMAIN_EVENT_STARTED,
                               d.VIR_DOMAIN_EVENT_STARTED_BOOTED)
        if flags & d.VIR_DOMAIN_START_PAUSED:
            self._pause(guest)
        return 0

    @_call("virDomainDestroy")
    def destroy(self, guest: Guest) -> int:
        return self._destroy(guest)

    @_call("virDomainDestroyFlags")
    def destroyFlags(self, guest: Guest, flags: int = 0) -> int:  # noqa: N802
        return self._destroy(guest)

    def _destroy(self, guest: Guest) -> int:
        self._stop(guest, d.VIR_DOMAIN_SHUTOFF_DESTROYED,
                   d.VIR_DOMAIN_EVENT_STOPPED_DESTROYED)
        return 0

    @_call("virDomainShutdown")
    def shutdown(self, guest: Guest) -> int:
        """Stops at once (the guest "agrees" immediately)."""
        return self._shutdown(guest)

    @_call("virDomainShutdownFlags")
    def shutdownFlags(self, guest: Guest, flags: int = 0) -> int:  # noqa: N802
        return self._shutdown(guest)

    def _shutdown(self, guest: Guest) -> int:
        self._stop(guest, d.VIR_DOMAIN_SHUTOFF_SHUTDOWN,
                   d.VIR_DOMAIN_EVENT_STOPPED_SHUTDOWN)
        return 0

    def _stop(self, guest: Guest, reason: int, detail: int) -> None:
        if not guest.active:
            raise invalid("domain is not running")
        self._guests.stop(guest, reason)
        self._guests.lifecycle(guest, d.VIR_DOMAIN_EVENT_STOPPED, detail)

    @_call("virDomainSuspend")
    def suspend(self, guest: Guest) -> int:
        if not guest.active:
            raise invalid("domain is not running")
        if guest.state != d.VIR_DOMAIN_PAUSED:
            self._pause(guest)
        return 0

    def _pause(self, guest: Guest) -> None:
        guest.state, guest.reason = d.VIR_DOMAIN_PAUSED, d.VIR_DOMAIN_PAUSED_USER
        self._guests.lifecycle(guest, d.VIR_DOMAIN_EVENT_SUSPENDED,
                               d.VIR_DOMAIN_EVENT_SUSPENDED_PAUSED)

    @_call("virDomainResume")
    def resume(self, guest: Guest) -> int:
        if not guest.active:
            raise invalid("domain is not running")
        if guest.state == d.VIR_DOMAIN_RUNNING:
            raise invalid("domain is already running", DRIVER_DOMAIN)
        guest.state, guest.reason = (d.VIR_DOMAIN_RUNNING,
                                     d.VIR_DOMAIN_RUNNING_UNPAUSED)
        self._guests.lifecycle(guest, d.VIR_DOMAIN_EVENT_RESUMED,
                               d.VIR_DOMAIN_EVENT_RESUMED_UNPAUSED)
        return 0

    @_call("virDomainUndefine")
    def undefine(self, guest: Guest) -> int:
        """Forget the persistent definition; a running domain goes on as
        a transient one."""
        return self._undefine(guest)

    @_call("virDomainUndefineFlags")
    def undefineFlags(self, guest: Guest, flags: int = 0) -> int:  # noqa: N802
        return self._undefine(guest)

    def _undefine(self, guest: Guest) -> int:
        if not guest.persistent:
            raise invalid("cannot undefine transient domain", DRIVER_DOMAIN)
        self._guests.lifecycle(guest, d.VIR_DOMAIN_EVENT_UNDEFINED,
                               d.VIR_DOMAIN_EVENT_UNDEFINED_REMOVED)
        if guest.active:
            guest.config = None
        else:
            del self._guests.by_uuid[self._uuid]
        return 0

    # -- resources ----------------------------------------------------------

    @_call("virDomainSetMemory")
    def setMemory(self, guest: Guest, memory: int) -> int:  # noqa: N802
        return self._set_memory(guest, memory, d.VIR_DOMAIN_AFFECT_LIVE)

    @_call("virDomainSetMemoryFlags")
    def setMemoryFlags(self, guest: Guest, memory: int,  # noqa: N802
                       flags: int = 0) -> int:
        return self._set_memory(guest, memory, flags)

    def _set_memory(self, guest: Guest, memory: int, flags: int) -> int:
        """The balloon target, KiB: the running domain (live) and/or its
        definition (config); counts against the host at once."""
        targets = _targets(guest, flags)
        for target in targets:
            if memory > target.max_memory_kib:
                raise invalid_arg("cannot set memory higher than max memory")
        for target in targets:
            target.set_memory_kib(memory)
        return 0

    @_call("virDomainGetVcpus")
    def vcpus(self, guest: Guest) -> tuple[list[tuple[int, int, int, int]],
                                           list[tuple[bool, ...]]]:
        """``([(vcpu, state, cpu time, CPU)], [CPU map per vcpu])``: CPU
        is the lowest CPU the vCPU may run on; maps are over the host's
        CPUs."""
        if not guest.active:
            raise invalid("cannot list vcpus for an inactive domain",
                          DRIVER_DOMAIN)
        count = self._guests.cpu_count()
        online = self._guests.online_cpus(self._guests.host_capabilities())
        info, maps = [], []
        for vcpu in range(guest.live.vcpus):
            cpus = self._affinity(guest, vcpu, online)
            info.append((vcpu, d.VIR_VCPU_RUNNING, 0, min(cpus, default=-1)))
            maps.append(tuple(i in cpus for i in range(count)))
        return info, maps

    def _affinity(self, guest: Guest, vcpu: int,
                  online: frozenset[int]) -> frozenset[int]:
        if vcpu in guest.pins:
            return guest.pins[vcpu]
        pinned = guest.live.vcpu_pins().get(vcpu) or guest.live.cpuset
        return (pinned & online) if pinned else online

    @_call("virDomainPinVcpu")
    def pinVcpu(self, guest: Guest, vcpu: int,  # noqa: N802
                cpumap: tuple[bool, ...]) -> int:
        """Pin a running domain's vCPU to the CPUs flagged in ``cpumap``
        (flags past the host's CPUs are dropped, as libvirt-python drops
        them); pinning only to offline CPUs fails as the kernel makes it
        fail."""
        if not guest.active:
            raise invalid("cannot pin vcpus on an inactive domain",
                          DRIVER_DOMAIN)
        if not 0 <= vcpu < guest.live.vcpus:
            raise invalid_arg(f"requested vcpu '{vcpu}' is not present in "
                              "the domain")
        count = self._guests.cpu_count()
        cpus = frozenset(i for i, on in enumerate(cpumap[:count]) if on)
        online = self._guests.online_cpus(self._guests.host_capabilities())
        if cpus and not cpus & online:
            raise affinity_error(self._guests.fake_pid(guest))
        guest.pins[vcpu] = cpus
        return 0

    # -- devices --------------------------------------------------------------

    @_call("virDomainAttachDevice")
    def attachDevice(self, guest: Guest, xml: str) -> int:  # noqa: N802
        return self._attach(guest, xml, d.VIR_DOMAIN_AFFECT_LIVE)

    @_call("virDomainAttachDeviceFlags")
    def attachDeviceFlags(self, guest: Guest, xml: str,  # noqa: N802
                          flags: int = 0) -> int:
        """Attach a ``<hostdev>`` (PCI or mdev); see :mod:`.hostdev`."""
        return self._attach(guest, xml, flags)

    def _attach(self, guest: Guest, xml: str, flags: int) -> int:
        attach_device(self._guests, guest, xml, _targets(guest, flags),
                      live=bool(_live(guest, flags)))
        return 0

    @_call("virDomainDetachDevice")
    def detachDevice(self, guest: Guest, xml: str) -> int:  # noqa: N802
        return self._detach(guest, xml, d.VIR_DOMAIN_AFFECT_LIVE)

    @_call("virDomainDetachDeviceFlags")
    def detachDeviceFlags(self, guest: Guest, xml: str,  # noqa: N802
                          flags: int = 0) -> int:
        return self._detach(guest, xml, flags)

    def _detach(self, guest: Guest, xml: str, flags: int) -> int:
        detach_device(self._guests, guest, xml, _targets(guest, flags),
                      live=bool(_live(guest, flags)))
        return 0


def _live(guest: Guest, flags: int) -> int:
    if flags & (d.VIR_DOMAIN_AFFECT_LIVE | d.VIR_DOMAIN_AFFECT_CONFIG):
        return flags & d.VIR_DOMAIN_AFFECT_LIVE
    return int(guest.active)


def _targets(guest: Guest, flags: int) -> list:
    """The definitions a call with ``flags`` (``VIR_DOMAIN_AFFECT_*``)
    changes, or libvirt's error for one the domain does not have."""
    live = _live(guest, flags)
    config = flags & d.VIR_DOMAIN_AFFECT_CONFIG or (
        not flags & (d.VIR_DOMAIN_AFFECT_LIVE | d.VIR_DOMAIN_AFFECT_CONFIG)
        and not guest.active)
    if live and not guest.active:
        raise invalid("domain is not running")
    if config and not guest.persistent:
        raise invalid("transient domains do not have any persistent config")
    return [t for t, wanted in ((guest.live, live), (guest.config, config))
            if wanted]
