"""Fake libvirt hosts and the connections that read them.

A :class:`FakeHost` is one host: its :class:`HostDocuments` (immutable:
what libvirt would answer) plus its runtime state (which CPUs are online,
the connections open to it).  :func:`open` reaches a registered host by
``fake:///<name>``; :func:`connection_for` opens an unregistered one.

A :class:`virConnect` answers the ``virConnect`` calls the libvirt driver
makes, with libvirt's errors: a document the host lacks is
``VIR_ERR_NO_SUPPORT``, a closed connection ``VIR_ERR_INVALID_CONN``, a
dropped one libvirt's end-of-file error.  Each call first passes through
fault injection (:mod:`.faults`).
"""

from __future__ import annotations

import functools
import itertools
import threading
from collections.abc import Callable, Iterable, Sequence
from typing import Any, TypeVar
from urllib.parse import urlsplit

from virtdriver.capabilities import HostCapabilities, parse_host_capabilities
from virtdriver.fakelibvirt import cpu
from virtdriver.fakelibvirt.constants import (
    VIR_CONNECT_CLOSE_REASON_EOF,
    VIR_ERR_OPERATION_DENIED,
    VIR_FROM_DOMAIN,
    VIR_FROM_NODEDEV,
    VIR_FROM_NONE,
)
from virtdriver.fakelibvirt.documents import DomainCapsKey, HostDocuments
from virtdriver.fakelibvirt.errors import (
    end_of_file,
    invalid_conn,
    make_error,
    no_connect,
    no_node_device,
    no_support,
)
from virtdriver.fakelibvirt.faults import Fault, FaultPlan, raise_for
from virtdriver.fakelibvirt.nodedev import virNodeDevice, matches_flags

F = TypeVar("F", bound=Callable[..., Any])

#: The URI scheme of fake hosts: ``fake:///<name>``.
SCHEME = "fake"

#: Faults for every connection (``fakelibvirt.fail``); counts all calls.
GLOBAL_FAULTS = FaultPlan()

_hosts_lock = threading.Lock()
_hosts: dict[str, FakeHost] = {}
_anonymous = itertools.count(1)


class FakeHost:
    """One fake host: immutable documents, mutable runtime state.

    The state lives here, not in a connection, because it is the host's:
    CPUs taken offline stay offline for a connection opened later.
    """

    def __init__(self, name: str, documents: HostDocuments) -> None:
        self.name = name
        self.documents = documents
        self._lock = threading.Lock()
        self._online: tuple[int, frozenset[int]] | None = None
        self._connections: list[virConnect] = []

    @property
    def uri(self) -> str:
        """The URI :func:`open` reaches this host by."""
        return f"{SCHEME}:///{self.name}"

    def set_online_cpus(self, online: Iterable[int],
                        count: int | None = None) -> None:
        """Make exactly ``online`` the online CPUs from now on.

        ``count`` (how many CPUs ``getCPUMap`` reports in all) defaults to
        the documents' count, else to one more than the highest CPU.
        """
        cpus = frozenset(online)
        if count is None:
            count = (self.documents.cpu_map[0] if self.documents.cpu_map
                     else max(cpus, default=-1) + 1)
        if any(c < 0 or c >= count for c in cpus):
            raise ValueError(f"online CPUs {sorted(cpus)} are not all in "
                             f"0-{count - 1}")
        with self._lock:
            self._online = (count, cpus)

    def cpu_map(self) -> tuple[int, list[bool], int] | None:
        """``getCPUMap()``'s answer now, or ``None`` if the host has none."""
        with self._lock:
            online = self._online
        if online is None:
            if self.documents.cpu_map is None:
                return None
            count, flags, total = self.documents.cpu_map
            return count, list(flags), total
        count, cpus = online
        return count, [i in cpus for i in range(count)], len(cpus)

    def connections(self) -> list[virConnect]:
        """The connections to this host not yet closed."""
        with self._lock:
            return [c for c in self._connections if not c.closed]

    def drop(self, reason: int = VIR_CONNECT_CLOSE_REASON_EOF) -> int:
        """Drop every open connection (a daemon restart); returns how many.

        New connections open normally afterwards.
        """
        dropped = [c for c in self.connections() if c.isAlive()]
        for conn in dropped:
            conn.drop(reason)
        return len(dropped)

    def _attach(self, conn: virConnect) -> None:
        with self._lock:
            self._connections = [c for c in self._connections
                                 if not c.closed] + [conn]


def register_host(name: str, documents: HostDocuments) -> FakeHost:
    """Serve ``documents`` at ``fake:///<name>`` (replacing any host of
    that name); returns the host."""
    host = FakeHost(name, documents)
    with _hosts_lock:
        _hosts[name] = host
    return host


def unregister_host(name: str) -> None:
    """Stop serving ``fake:///<name>`` (open connections keep working,
    as they do when libvirt's configuration changes under them)."""
    with _hosts_lock:
        _hosts.pop(name, None)


def get_host(name: str) -> FakeHost | None:
    """The host registered as ``name``, if any."""
    with _hosts_lock:
        return _hosts.get(name)


def open(uri: str | None = None) -> virConnect:  # noqa: A001 - libvirt's name
    """Open a read-write connection to ``fake:///<name>``.

    Raises:
        libvirtError: ``VIR_ERR_NO_CONNECT`` for any other URI or a name
            not registered, in libvirt's words.
    """
    return _open(uri, read_only=False)


def openReadOnly(uri: str | None = None) -> virConnect:  # noqa: N802
    """Open a read-only connection (``getDomainCapabilities`` refused, as
    libvirt refuses it)."""
    return _open(uri, read_only=True)


def connection_for(documents: HostDocuments, *,
                   read_only: bool = False) -> virConnect:
    """A connection to a new unregistered host serving ``documents``."""
    host = FakeHost(f"anonymous-{next(_anonymous)}", documents)
    return virConnect(host, read_only=read_only)


def _open(uri: str | None, *, read_only: bool) -> virConnect:
    parts = urlsplit(uri or "")
    host = (get_host(parts.path.lstrip("/"))
            if parts.scheme == SCHEME and not parts.netloc else None)
    if host is None:
        raise no_connect(uri or "")
    return virConnect(host, read_only=read_only)


def _api(function: str, domain: int = VIR_FROM_DOMAIN) -> Callable[[F], F]:
    """Guard a ``virConnect`` method as libvirt guards the C call
    ``function``: refuse a closed or dropped connection, then apply the
    planned faults.  ``domain`` is the error domain of libvirt's source
    file that holds the call (``VIR_FROM_DOMAIN`` for host and domain
    calls)."""

    def decorate(method: F) -> F:
        @functools.wraps(method)
        def guarded(self: virConnect, *args: Any, **kwargs: Any) -> Any:
            self._guard(method.__name__, function, domain)
            return method(self, *args, **kwargs)

        return guarded  # type: ignore[return-value]

    return decorate


class virConnect:  # noqa: N801 - libvirt's name
    """A connection to a :class:`FakeHost`, answering as libvirt would.

    Beyond libvirt's calls it has the test controls :meth:`fail`,
    :meth:`drop`, :meth:`set_online_cpus` and :meth:`calls`.
    """

    def __init__(self, host: FakeHost, *, read_only: bool = False) -> None:
        self.host = host
        self.read_only = read_only
        self.faults = FaultPlan()
        refused = host.documents.node_devices_error
        if refused is not None:  # a recorded host whose devices were unknown
            self.faults.fail("listAllDevices", repeat=True,
                             error_code=refused.code,
                             error_domain=refused.domain,
                             message=refused.message)
        self.closed = False
        self._lock = threading.Lock()
        self._dropped = False
        self._close_callback: tuple[Callable[..., Any], Any] | None = None
        self._parsed: HostCapabilities | None = None
        host._attach(self)

    # -- test controls --------------------------------------------------

    def fail(self, method: str, **kwargs: Any) -> Fault:
        """Plan a fault on this connection (see :meth:`.FaultPlan.fail`):
        ``conn.fail("getDomainCapabilities", error_code=VIR_ERR_NO_SUPPORT,
        on_call=2)`` fails the second call from now."""
        return self.faults.fail(method, **kwargs)

    def calls(self, method: str) -> int:
        """How many times ``method`` was called on this connection."""
        return self.faults.calls(method)

    def drop(self, reason: int = VIR_CONNECT_CLOSE_REASON_EOF) -> None:
        """Lose the connection, as when the daemon goes away.

        Every later call raises libvirt's ``VIR_ERR_SYSTEM_ERROR`` /
        ``VIR_FROM_RPC`` "End of file while reading data" (the remote
        driver keeps that error and repeats it); :meth:`isAlive` turns 0;
        the close callback runs once, here on the caller's thread (libvirt
        runs it from its event loop), with ``reason``.  :meth:`close` still
        succeeds, and a new :func:`open` works.
        """
        with self._lock:
            if self._dropped or self.closed:
                return
            self._dropped = True
            callback, self._close_callback = self._close_callback, None
        if callback is not None:
            callback[0](self, reason, callback[1])

    def set_online_cpus(self, online: Iterable[int],
                        count: int | None = None) -> None:
        """Take CPUs on- or offline on this connection's host (see
        :meth:`FakeHost.set_online_cpus`)."""
        self.host.set_online_cpus(online, count)

    # -- the connection itself -----------------------------------------

    def _guard(self, method: str, function: str, domain: int) -> None:
        if self.closed:
            raise invalid_conn(function, domain)
        if self._dropped:
            raise end_of_file()
        # Both plans count every call, whichever fires.
        planned = GLOBAL_FAULTS.check(method), self.faults.check(method)
        fault = planned[0] or planned[1]
        if fault is None:
            return
        if fault.drop:
            self.drop()
            raise end_of_file()
        raise_for(fault, function)

    def close(self) -> int:
        """Close the connection; returns 0.  Later calls (``close`` too)
        raise ``VIR_ERR_INVALID_CONN``.  The close callback does not run:
        libvirt runs it only for a connection lost, not one closed."""
        with self._lock:
            if self.closed:
                raise invalid_conn("virConnectClose", VIR_FROM_NONE)
            self.closed = True
            self._close_callback = None
        return 0

    def isAlive(self) -> int:  # noqa: N802
        """1 while usable, 0 once dropped."""
        if self.closed:
            raise invalid_conn("virConnectIsAlive")
        return 0 if self._dropped else 1

    def registerCloseCallback(self, cb: Callable[..., Any],
                              opaque: Any) -> int:  # noqa: N802
        """Call ``cb(conn, reason, opaque)`` when the connection is lost;
        replaces an earlier callback.  Returns 0."""
        if self.closed:
            raise invalid_conn("virConnectRegisterCloseCallback")
        with self._lock:
            self._close_callback = (cb, opaque)
        return 0

    def unregisterCloseCallback(self) -> None:  # noqa: N802
        """Forget the close callback (``None``, as libvirt-python returns)."""
        if self.closed:
            raise invalid_conn("virConnectUnregisterCloseCallback")
        with self._lock:
            self._close_callback = None

    @_api("virConnectGetURI")
    def getURI(self) -> str:  # noqa: N802
        return self.host.uri

    @_api("virConnectGetHostname")
    def getHostname(self) -> str:  # noqa: N802
        return self.host.documents.hostname

    @_api("virConnectGetLibVersion")
    def getLibVersion(self) -> int:  # noqa: N802
        return self.host.documents.lib_version

    @_api("virConnectGetVersion")
    def getVersion(self) -> int:  # noqa: N802
        return self.host.documents.version

    @_api("virConnectGetCapabilities")
    def getCapabilities(self) -> str:  # noqa: N802
        caps = self.host.documents.capabilities
        if caps is None:
            raise no_support("virConnectGetCapabilities", VIR_FROM_DOMAIN)
        return caps

    @_api("virConnectGetDomainCapabilities")
    def getDomainCapabilities(self, emulatorbin: str | None,  # noqa: N802
                              arch: str | None, machine: str | None,
                              virttype: str | None, flags: int = 0) -> str:
        """The document for these arguments.

        Looked up by :class:`DomainCapsKey`: first exactly, then with
        ``emulator`` ``None`` (the default emulator answers for the one
        named).  ``arch`` ``None`` is the host arch (from the
        capabilities); ``virttype`` ``None`` is ``kvm`` when the host has a
        kvm document for the arch, else ``qemu`` (libvirt's QEMU driver
        picks the same way).  A call no document answers is refused with
        ``VIR_ERR_NO_SUPPORT``, one a recorded host refused with the error
        it gave (``domain_capabilities_errors``); a read-only connection with
        ``VIR_ERR_OPERATION_DENIED``, as libvirt refuses both.
        """
        function = "virConnectGetDomainCapabilities"
        if self.read_only:
            detail = f"read only access prevents {function}"
            raise make_error(VIR_ERR_OPERATION_DENIED, VIR_FROM_DOMAIN,
                             f"operation forbidden: {detail}",
                             str1="operation forbidden: %s", str2=detail)
        documents = self.host.documents.domain_capabilities
        recorded = self.host.documents.domain_capabilities_errors
        if not documents and not recorded:
            raise no_support(function, VIR_FROM_DOMAIN)
        arch = arch or self._host_arch()
        virttype = virttype or (
            "kvm" if any(k.arch == arch and k.virt_type == "kvm"
                         for k in (*documents, *recorded)) else "qemu")
        for emulator in dict.fromkeys((emulatorbin, None)):
            key = DomainCapsKey(arch, virttype, machine, emulator)
            found = documents.get(key)
            if found is not None:
                return found
            error = recorded.get(key)
            if error is not None:  # a recorded host refused it: again
                raise make_error(error.code, error.domain, error.message)
        raise no_support(function, VIR_FROM_DOMAIN, (
            f"no document for arch={arch!r}, virttype={virttype!r}, "
            f"machine={machine!r}, emulatorbin={emulatorbin!r}"))

    @_api("virNodeGetCPUMap")
    def getCPUMap(self, flags: int = 0) -> tuple[int, list[bool], int]:  # noqa: N802
        """``(CPU count, online flag per CPU, online count)``."""
        cpu_map = self.host.cpu_map()
        if cpu_map is None:
            raise no_support("virNodeGetCPUMap", VIR_FROM_DOMAIN)
        return cpu_map

    @_api("virNodeGetInfo")
    def getInfo(self) -> list[Any]:  # noqa: N802
        """``[model, memory MiB, cpus, MHz, nodes, sockets, cores,
        threads]``: the documents' ``info``, else derived from the
        capabilities (model = arch, memory = the cells' total, cpus = the
        online count when a CPU map exists, MHz 0 as it is not in the
        capabilities)."""
        if self.host.documents.info is not None:
            return list(self.host.documents.info)
        caps = self._host_capabilities("virNodeGetInfo")
        cpu_ids = {c.id for cell in caps.cells for c in cell.cpus}
        cpu_map = self.host.cpu_map()
        return [
            caps.cpu.arch or "",
            sum(cell.memory_kib or 0 for cell in caps.cells) // 1024,
            cpu_map[2] if cpu_map else len(cpu_ids),
            0,
            len(caps.cells) or 1,
            *_topology(caps),
        ]

    @_api("virConnectListAllNodeDevices", VIR_FROM_NODEDEV)
    def listAllDevices(self, flags: int = 0) -> list[virNodeDevice]:  # noqa: N802
        """The host's node devices; ``flags`` (``VIR_CONNECT_LIST_NODE_
        DEVICES_CAP_*``) keep those with one of the capabilities named."""
        devices = [virNodeDevice(self, name, xml) for name, xml
                   in sorted(self.host.documents.node_devices.items())]
        return [d for d in devices if matches_flags(d, flags)]

    @_api("virNodeDeviceLookupByName", VIR_FROM_NODEDEV)
    def nodeDeviceLookupByName(self, name: str) -> virNodeDevice:  # noqa: N802
        xml = self.host.documents.node_devices.get(name)
        if xml is None:
            raise no_node_device(name)
        return virNodeDevice(self, name, xml)

    @_api("virConnectBaselineCPU")
    def baselineCPU(self, xmlCPUs: Sequence[str],  # noqa: N802, N803
                    flags: int = 0) -> str:
        """A CPU every one of ``xmlCPUs`` can run (see
        :func:`.cpu.baseline` for the simplification)."""
        return cpu.baseline(xmlCPUs, flags)

    @_api("virConnectCompareCPU")
    def compareCPU(self, xmlDesc: str, flags: int = 0) -> int:  # noqa: N802, N803
        """How the host CPU compares with ``xmlDesc`` (see
        :func:`.cpu.compare` for the simplification)."""
        caps = self._host_capabilities("virConnectCompareCPU")
        return cpu.compare(caps.cpu, xmlDesc, flags)

    def _host_capabilities(self, function: str) -> HostCapabilities:
        if self._parsed is None:
            xml = self.host.documents.capabilities
            if xml is None:
                raise no_support(function, VIR_FROM_DOMAIN)
            self._parsed = parse_host_capabilities(
                xml, f"{self.host.uri} capabilities")
        return self._parsed

    def _host_arch(self) -> str | None:
        if self.host.documents.capabilities is None:
            return None
        return self._host_capabilities("virConnectGetCapabilities").cpu.arch


def _topology(caps: HostCapabilities) -> tuple[int, int, int]:
    """``(sockets per node, cores per socket, threads per core)``: the
    capabilities' ``<topology>``, else counted in the first cell."""
    topology = caps.cpu.topology
    if topology is not None and topology.sockets:
        return (topology.sockets, topology.cores or 1, topology.threads or 1)
    cpus = caps.cells[0].cpus if caps.cells else ()
    sockets = len({c.socket_id for c in cpus}) or 1
    threads = max((len(c.siblings) for c in cpus), default=1) or 1
    return sockets, max(len(cpus) // (sockets * threads), 1), threads


def reset() -> None:
    """Unregister every host and forget the global faults (test teardown)."""
    with _hosts_lock:
        _hosts.clear()
    GLOBAL_FAULTS.clear()
