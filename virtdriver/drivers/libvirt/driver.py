"""The libvirt driver: one host, read through libvirt, published as a tree.

It opens ``[libvirt] connection_uri`` (or chooses one, see
:mod:`.connection`), reads host capabilities, the online CPU map, versions
and the domain capabilities that count (:mod:`.host`), derives traits
(:mod:`.traits`) and publishes the NUMA tree (:mod:`..host_tree`).  A
dropped connection is re-opened with bounded backoff and the reading is
cached until reconnect, a version change, or :meth:`LibvirtDriver.refresh`
(:mod:`.session`).  Any source that cannot be read is *unknown*: its traits
are left as they are.  Online CPUs libvirt does not report (no
``getCPUMap`` for the URI, or a snapshot recorded without it) are every
CPU the host capabilities list, and the facts, the evidence and a warning
say so.

``DISK_GB`` is the size of the filesystem holding the state directory
(:func:`host_disk_gb`), or the size a replayed snapshot recorded
(``disk_gb``), with ``[compute] reserved_host_disk_mb`` and
``disk_allocation_ratio`` applied (:mod:`virtdriver.conf.disk`).
"""

from __future__ import annotations

import logging
import shutil
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import libvirt

from virtdriver.capabilities import CapabilityXMLError
from virtdriver.capabilities.cpu_map import CPUModelCatalog
from virtdriver.capabilities.devices.model import DevicesReading
from virtdriver.capabilities.traits.derive import TraitReport
from virtdriver.capabilities.traits.registry import LIBVIRT_OWNERSHIP
from virtdriver.capabilities.traits.ownership import Ownership
from virtdriver.conf.device_rules import device_rules
from virtdriver.conf.disk import DiskConfig, disk_config
from virtdriver.conf.guest import trait_config
from virtdriver.conf.pinning import pinning_config
from virtdriver.conf.reader import ConfigError
from virtdriver.drivers.identity import root_uuid
from virtdriver.drivers.base import (
    ComputeDriver, DriverError, NodeCapabilities, ProviderTreeLike)
from virtdriver.drivers.host_resources import (
    HostResourceError, HostResources, host_resources)
from virtdriver.drivers.device_tree import lift_device_providers
from virtdriver.drivers.host_tree import (
    cell_provider_name, provider_reports, publish_host)
from virtdriver.drivers.nova_tree import NovaProfile, publish_nova
from virtdriver.drivers.libvirt.capabilities import LIBVIRT_CAPABILITIES
from virtdriver.drivers.libvirt.connection import (
    LibvirtConnectionError, state_dir)
from virtdriver.drivers.libvirt.cpu_map_loader import load_cpu_map
from virtdriver.drivers.libvirt.device_providers import (
    DeviceProviders, Usage)
from virtdriver.drivers.libvirt.device_watch import DeviceWatch
from virtdriver.drivers.libvirt.devices import devices_summary
from virtdriver.drivers.libvirt.host import (
    ONLINE_FROM_CAPABILITIES, ONLINE_FROM_CPU_MAP, HostReading, Unknown)
from virtdriver.drivers.libvirt.session import LibvirtSession
from virtdriver.drivers.libvirt.traits import trait_report

if TYPE_CHECKING:
    from oslo_config import cfg

LOG = logging.getLogger(__name__)

#: What evidence naming the usable CPUs adds when they are not libvirt's.
NOT_REPORTED = ("online CPUs not reported by libvirt, so every CPU the host "
                "capabilities list counts as online")


#: The :func:`~virtdriver.drivers.identity.root_uuid` scheme of compute
#: node roots (unchanged since the first release: uuids stay stable).
ROOT_UUID_KIND = "compute-node"
#: ``disk_gb`` meaning: read the state directory's filesystem.
READ_DISK = "read"
#: Tree profiles: NUMA cells as children (virtdriver's), or Nova's flat
#: root (:mod:`virtdriver.drivers.nova_tree`).
PROFILES = ("numa", "nova")


class LibvirtDriver(ComputeDriver):
    """A compute driver for the libvirt host it runs on.

    Args:
        conf: options; defaults apply when omitted.
        uri: overrides ``[libvirt] connection_uri``.
        session: a ready :class:`LibvirtSession` (tests, tools); built
            from ``conf`` and ``uri`` otherwise.
        nested: NUMA cells as child providers (default) or all on the root.
        disk_gb: the disk size (GiB) to report as ``DISK_GB``: the
            default :data:`READ_DISK` reads it (:func:`host_disk_gb`); a
            number is a recorded size (a replayed snapshot's); ``None``
            reports no ``DISK_GB`` (not known).
        device_usage: provider uuid → class → amount allocated, or
            ``None`` when unknown, for device providers whose device is
            gone (:mod:`.device_providers`); default: not known.
        profile: ``numa`` (default: ``nested`` says where cells go) or
            ``nova``: Nova's flat root (:mod:`..nova_tree`), no device
            providers (Nova's own code has them).
        nova_profile: Nova's reporting options for the ``nova`` profile
            (default: Nova's defaults, the ratios and reservations of
            ``conf``).
    """

    capabilities = LIBVIRT_CAPABILITIES
    ownership = LIBVIRT_OWNERSHIP
    root_uuid_kind = ROOT_UUID_KIND

    def __init__(self, *, conf: cfg.ConfigOpts | None = None,
                 uri: str | None = None,
                 session: LibvirtSession | None = None,
                 nested: bool = True,
                 disk_gb: Any = READ_DISK,
                 device_usage: Usage | None = None,
                 profile: str = "numa",
                 nova_profile: NovaProfile | None = None) -> None:
        if profile not in PROFILES:
            raise DriverError(f"unknown tree profile {profile!r}; use one "
                              f"of {', '.join(PROFILES)}")
        self._profile = profile
        self._nova_profile = nova_profile
        self._report_cache: tuple | None = None
        self._conf = conf
        self._device_usage = device_usage
        self._devices = DeviceProviders(usage=device_usage)
        self._device_watch = DeviceWatch()
        self._last_devices: DevicesReading | None = None
        self._disk_gb = disk_gb
        self._disk = DiskConfig()
        self._uri = uri
        self._session = session
        self._nested = nested
        self._cpu_map: CPUModelCatalog | None = None
        self._nodename: str | None = None
        self._online_unknown: Unknown | None = None

    @property
    def session(self) -> LibvirtSession:
        """The libvirt session (after :meth:`init_host`)."""
        if self._session is None:
            raise DriverError("the libvirt driver was not initialised; call "
                              "init_host() first")
        return self._session

    def init_host(self, host: str) -> None:
        """Check the options, open libvirt, and check pinning fits the host.

        Raises:
            DriverError: bad options, libvirt unreachable, unusable XML, or
                pinning options that do not fit this host.
        """
        try:
            if self._conf is None:  # oslo.config only when needed
                from virtdriver.conf.options import make_conf
                self._conf = make_conf()
            config = trait_config(self._conf)
            pinning_config(self._conf)
            self._disk = disk_config(self._conf)
            self._devices = DeviceProviders(device_rules(self._conf),
                                            self._device_usage)
        except (ConfigError, ValueError) as exc:
            raise DriverError(f"libvirt driver options: {exc}") from exc
        if self._session is None:
            self._session = LibvirtSession(
                self._uri or self._conf.libvirt.connection_uri,
                config=config, nodedev_uri=self._conf.libvirt.nodedev_uri)
        try:
            self._cpu_map = load_cpu_map()
        except CapabilityXMLError as exc:
            raise DriverError(f"libvirt's CPU map: {exc}") from exc
        self._nodename = host
        # Listen before the first reading, so an event after it is not
        # lost; when events are heard, that reading is the one the next
        # update re-reads after an event (not the session's "just taken").
        self._report_cache = None
        self._devices_need_read()
        reading = self._reading()
        if self._device_watch.watching:
            reading = self._reading(fresh_devices=True)  # no new listing
        self._last_devices = reading.devices
        self._resources(reading)

    def get_available_nodes(self, refresh: bool = False) -> list[str]:
        """The one node: the host name given to :meth:`init_host`."""
        if self._nodename is None:
            raise DriverError("call init_host() first")
        return [self._nodename]

    def refresh(self) -> None:
        """Forget the cached reading; the next update reads libvirt again."""
        self.session.invalidate()

    def node_capabilities(self, nodename: str) -> NodeCapabilities:
        """Traits with evidence, and what was read from where.

        ``facts["online_cpus"]`` are the CPUs guests may use;
        ``online_cpus_source`` is ``getCPUMap``, or ``capabilities`` when
        libvirt did not report online CPUs (``online_cpus_unknown_reason``
        then has libvirt's words).
        """
        self.require_node(nodename)
        reading = self._reading()
        resources, unknown = self._resources(reading)
        report = self._devices.report(
            self._report(reading, resources, unknown), reading.devices)
        return NodeCapabilities(nodename, report, {
            "uri": reading.uri,
            "uri_reason": self.session.choice.reason,
            "arch": reading.arch, "virt_type": reading.virt_type,
            "numa_cells": [c.cell_id for c in resources.cells],
            "online_cpus": sorted(resources.pcpus | resources.vcpus),
            "online_cpus_source": (ONLINE_FROM_CPU_MAP if unknown is None
                                   else ONLINE_FROM_CAPABILITIES),
            "online_cpus_unknown_reason": (None if unknown is None
                                           else unknown.describe()),
            "libvirt_version": reading.libvirt_version,
            "hypervisor_version": reading.hypervisor_version,
            "devices": devices_summary(reading.devices),
            "domain_capabilities": [
                {"label": r.label, "read": r.caps is not None,
                 "error": r.error} for r in reading.domains]})

    def update_provider_tree(self, tree: ProviderTreeLike, nodename: str,
                             allocations: Mapping[str, Any] | None = None
                             ) -> None:
        """Publish the host: root with DISK_GB and host traits, one child
        per NUMA cell with CPUs, memory, huge pages and CPU traits, and
        the device providers the rules list (:mod:`.device_providers`)."""
        self.require_node(nodename)
        if self._profile == "nova":
            # No device providers: Nova's own code makes them.
            reading = self._reading()
            resources, unknown = self._resources(reading)
            publish_nova(tree, nodename, resources=resources,
                         report=self._report(reading, resources, unknown),
                         profile=self.nova_profile(),
                         disk_gb=self._disk_size(),
                         node_uuid=node_uuid(nodename))
            return
        reading = self._reading(fresh_devices=self._devices_need_read())
        self._last_devices = reading.devices
        resources, unknown = self._resources(reading)
        lift_device_providers(tree, nodename, {
            cell_provider_name(nodename, cell.cell_id)
            for cell in resources.cells} if self._nested else set())
        publish_host(tree, nodename, host=reading.host, resources=resources,
                     report=self._report(reading, resources, unknown),
                     node_uuid=node_uuid(nodename),
                     disk_gb=self._disk_size(), disk=self._disk,
                     nested=self._nested)
        self._devices.publish(tree, nodename, reading.devices,
                              nested=self._nested, allocations=allocations)

    def nova_profile(self) -> NovaProfile:
        """The ``nova`` profile's options: those given, else virtdriver's
        ratios and reservations (set, so they win as Nova's would)."""
        if self._nova_profile is not None:
            return self._nova_profile
        pinning = pinning_config(self._conf)
        return NovaProfile(
            cpu_allocation_ratio=pinning.cpu_allocation_ratio,
            ram_allocation_ratio=pinning.ram_allocation_ratio,
            disk_allocation_ratio=self._disk.allocation_ratio,
            reserved_host_memory_mb=pinning.reserved_host_memory_mb,
            reserved_disk_gb=self._disk.reserved_gb)

    def _disk_size(self) -> int | None:
        if self._disk_gb == READ_DISK:
            return host_disk_gb()
        if callable(self._disk_gb):
            return self._disk_gb()
        return self._disk_gb

    def use_device_usage(self, usage: Usage | None) -> None:
        """Where to learn what is allocated on a device provider whose
        device changed (the agent passes Placement's, see
        :func:`virtdriver.placement.usages.provider_usage`)."""
        self._device_usage = usage
        self._devices.use_usage(usage)

    def ownership_for(self, nodename: str) -> Ownership:
        """The registry, plus the traits the device rules name."""
        return self._devices.ownership

    def provider_traits(self, nodename: str) -> Mapping[str, TraitReport]:
        """The report each provider follows, as the tree publishes them
        (:func:`~..host_tree.provider_reports`), then each device
        provider's (:mod:`.device_providers`)."""
        self.require_node(nodename)
        reading = self._reading()
        resources, unknown = self._resources(reading)
        reports = provider_reports(
            nodename, reading.host, self._report(reading, resources,
                                                 unknown),
            nested=self._nested and self._profile != "nova")
        if self._profile == "nova":
            return reports
        reports.update(self._devices.provider_reports(nodename,
                                                      reading.devices))
        return reports

    def node_resources(self, nodename: str) -> HostResources:
        """The host's NUMA cells as the tree publishes them (from the
        cached reading)."""
        self.require_node(nodename)
        return self._resources(self._reading())[0]

    def node_devices(self, nodename: str):
        """Device provider name → its units (which function, VF or mdev),
        from the cached reading; none while devices are unknown."""
        from virtdriver.drivers.device_units import device_units
        self.require_node(nodename)
        devices = self._reading().devices
        offers = self._devices.offers(devices)
        return device_units(nodename, offers or (),
                            devices if devices.known else None)

    def cleanup_host(self, host: str) -> None:
        """Close the libvirt connection."""
        self._device_watch.close()
        if self._session is not None:
            self._session.close()

    def _devices_need_read(self) -> bool:
        """Whether this update reads node devices again
        (:mod:`.device_watch`: not while libvirt's events say none
        changed)."""
        session = self.session
        try:
            conn = session.call(lambda c: c)
            uri = session.choice.uri
        except (LibvirtConnectionError, libvirt.libvirtError):
            return True  # the reading reports it
        if not self._device_watch.needs_read(conn, uri, self._last_devices):
            return False
        self._last_devices = None  # a failed reading is not kept
        self._device_watch.reading()
        return True

    def _reading(self, *, fresh_devices: bool = False) -> HostReading:
        try:
            return self.session.reading(fresh_devices=fresh_devices)
        except LibvirtConnectionError as exc:
            raise DriverError(str(exc)) from exc
        except CapabilityXMLError as exc:
            raise DriverError(f"libvirt host capabilities: {exc}") from exc
        except libvirt.libvirtError as exc:
            raise DriverError(
                f"reading the host from libvirt failed: "
                f"{exc.get_error_message() or exc}") from exc

    def _resources(self, reading: HostReading
                   ) -> tuple[HostResources, Unknown | None]:
        """The host's resources, and why online CPUs are not known (then
        every CPU of the capabilities counts as online) or ``None``."""
        online = self._online_cpus(reading)
        unknown = online if isinstance(online, Unknown) else None
        try:
            return host_resources(
                reading.host, None if unknown else online,
                pinning_config(self._conf)), unknown
        except HostResourceError as exc:
            raise DriverError(str(exc)) from exc

    def _online_cpus(self, reading: HostReading) -> frozenset[int] | Unknown:
        """libvirt's online CPUs, or why it has none; a change between
        the two is logged once, not on every update."""
        try:
            online = self.session.online_cpus()
        except LibvirtConnectionError as exc:
            raise DriverError(str(exc)) from exc
        except libvirt.libvirtError as exc:
            raise DriverError(
                f"reading the online CPUs from {reading.uri} (getCPUMap) "
                f"failed: {exc.get_error_message() or exc}; check libvirt's "
                "log, the next update tries again") from exc
        unknown = online if isinstance(online, Unknown) else None
        if unknown is not None and self._online_unknown is None:
            LOG.warning("%s does not report online CPUs (getCPUMap: %s); "
                        "counting every CPU its host capabilities list as "
                        "online", reading.uri, unknown.describe())
        elif unknown is None and self._online_unknown is not None:
            LOG.info("%s reports online CPUs again (getCPUMap)", reading.uri)
        self._online_unknown = unknown
        return online

    def _report(self, reading: HostReading, resources: HostResources,
                online_unknown: Unknown | None) -> TraitReport:
        """The trait report; derived again only when what it reads (host
        and domain capabilities, after a reconnect, a version change or
        :meth:`refresh`) or the usable CPUs change, not on every update
        (node devices, read again on updates, are not among them)."""
        usable = resources.pcpus | resources.vcpus
        note = None if online_unknown is None else NOT_REPORTED
        cached = self._report_cache
        if (cached is not None and cached[1:3] == (usable, note)
                and _same_sources(cached[0], reading)):
            return cached[3]
        report = trait_report(reading, self._cpu_map, usable_cpus=usable,
                              online_cpus_note=note)
        self._report_cache = (reading, usable, note, report)
        return report


def _same_sources(old: HostReading, new: HostReading) -> bool:
    """Whether the trait report of ``old`` holds for ``new``: the same
    host and domain capabilities, configuration and versions."""
    return (old.host is new.host and old.domains is new.domains
            and old.config is new.config
            and (old.libvirt_version, old.hypervisor_version)
            == (new.libvirt_version, new.hypervisor_version))


def node_uuid(nodename: str) -> str:
    """A stable provider uuid for ``nodename`` (the same every run)."""
    return root_uuid(ROOT_UUID_KIND, nodename)


def host_disk_gb() -> int | None:
    """The size (whole GiB) of the filesystem holding the state directory,
    or ``None`` when it cannot be read (no ``DISK_GB`` then)."""
    try:
        return shutil.disk_usage(state_dir()).total // 1024 ** 3 or None
    except OSError:
        return None
