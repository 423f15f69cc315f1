"""The libvirt driver: one host, read through libvirt, published as a tree.

It opens ``[libvirt] connection_uri`` (or chooses one, see
:mod:`.connection`), reads host capabilities, the online CPU map, versions
and the domain capabilities that count (:mod:`.host`), derives traits
(:mod:`.traits`) and publishes the NUMA tree (:mod:`..host_tree`).  A
dropped connection is re-opened with bounded backoff and the reading is
cached until reconnect, a version change, or :meth:`LibvirtDriver.refresh`
(:mod:`.session`).  Any source that cannot be read is *unknown*: its traits
are left as they are.
"""

from __future__ import annotations

import shutil
import uuid as uuidlib
from collections.abc import Mapping
from typing import Any

import libvirt
from oslo_config import cfg

from virtdriver.capabilities import CapabilityXMLError
from virtdriver.capabilities.cpu_map import CPUModelCatalog
from virtdriver.capabilities.traits.derive import TraitReport
from virtdriver.capabilities.traits.registry import LIBVIRT_OWNERSHIP
from virtdriver.conf.guest import trait_config
from virtdriver.conf.options import make_conf
from virtdriver.conf.pinning import pinning_config
from virtdriver.conf.reader import ConfigError
from virtdriver.drivers.base import (
    ComputeDriver, DriverError, NodeCapabilities, ProviderTreeLike)
from virtdriver.drivers.host_resources import (
    HostResourceError, HostResources, host_resources)
from virtdriver.drivers.host_tree import publish_host
from virtdriver.drivers.libvirt.capabilities import LIBVIRT_CAPABILITIES
from virtdriver.drivers.libvirt.connection import (
    LibvirtConnectionError, state_dir)
from virtdriver.drivers.libvirt.cpu_map_loader import load_cpu_map
from virtdriver.drivers.libvirt.host import HostReading
from virtdriver.drivers.libvirt.session import LibvirtSession
from virtdriver.drivers.libvirt.traits import trait_report


class LibvirtDriver(ComputeDriver):
    """A compute driver for the libvirt host it runs on.

    Args:
        conf: options; defaults apply when omitted.
        uri: overrides ``[libvirt] connection_uri``.
        session: a ready :class:`LibvirtSession` (tests, tools); built
            from ``conf`` and ``uri`` otherwise.
        nested: NUMA cells as child providers (default) or all on the root.
    """

    capabilities = LIBVIRT_CAPABILITIES
    ownership = LIBVIRT_OWNERSHIP

    def __init__(self, *, conf: cfg.ConfigOpts | None = None,
                 uri: str | None = None,
                 session: LibvirtSession | None = None,
                 nested: bool = True) -> None:
        self._conf = conf
        self._uri = uri
        self._session = session
        self._nested = nested
        self._cpu_map: CPUModelCatalog | None = None
        self._nodename: str | None = None

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
            self._conf = self._conf or make_conf()
            config = trait_config(self._conf)
            pinning_config(self._conf)
        except (ConfigError, ValueError) as exc:
            raise DriverError(f"libvirt driver options: {exc}") from exc
        if self._session is None:
            self._session = LibvirtSession(
                self._uri or self._conf.libvirt.connection_uri,
                config=config)
        try:
            self._cpu_map = load_cpu_map()
        except CapabilityXMLError as exc:
            raise DriverError(f"libvirt's CPU map: {exc}") from exc
        self._nodename = host
        self._resources(self._reading())

    def get_available_nodes(self, refresh: bool = False) -> list[str]:
        """The one node: the host name given to :meth:`init_host`."""
        if self._nodename is None:
            raise DriverError("call init_host() first")
        return [self._nodename]

    def refresh(self) -> None:
        """Forget the cached reading; the next update reads libvirt again."""
        self.session.invalidate()

    def node_capabilities(self, nodename: str) -> NodeCapabilities:
        """Traits with evidence, and what was read from where."""
        self.require_node(nodename)
        reading = self._reading()
        resources = self._resources(reading)
        return NodeCapabilities(nodename, self._report(reading, resources), {
            "uri": reading.uri,
            "uri_reason": self.session.choice.reason,
            "arch": reading.arch, "virt_type": reading.virt_type,
            "numa_cells": [c.cell_id for c in resources.cells],
            "online_cpus": sorted(resources.pcpus | resources.vcpus),
            "libvirt_version": reading.libvirt_version,
            "hypervisor_version": reading.hypervisor_version,
            "domain_capabilities": [
                {"label": r.label, "read": r.caps is not None,
                 "error": r.error} for r in reading.domains]})

    def update_provider_tree(self, tree: ProviderTreeLike, nodename: str,
                             allocations: Mapping[str, Any] | None = None
                             ) -> None:
        """Publish the host: root with DISK_GB and host traits, one child
        per NUMA cell with CPUs, memory, huge pages and CPU traits."""
        self.require_node(nodename)
        reading = self._reading()
        resources = self._resources(reading)
        publish_host(tree, nodename, host=reading.host, resources=resources,
                     report=self._report(reading, resources),
                     node_uuid=node_uuid(nodename), disk_gb=_disk_gb(),
                     nested=self._nested)

    def cleanup_host(self, host: str) -> None:
        """Close the libvirt connection."""
        if self._session is not None:
            self._session.close()

    def _reading(self) -> HostReading:
        try:
            return self.session.reading()
        except LibvirtConnectionError as exc:
            raise DriverError(str(exc)) from exc
        except CapabilityXMLError as exc:
            raise DriverError(f"libvirt host capabilities: {exc}") from exc
        except libvirt.libvirtError as exc:
            raise DriverError(
                f"reading the host from libvirt failed: "
                f"{exc.get_error_message() or exc}") from exc

    def _resources(self, reading: HostReading) -> HostResources:
        try:
            return host_resources(reading.host, self.session.online_cpus(),
                                  pinning_config(self._conf))
        except HostResourceError as exc:
            raise DriverError(str(exc)) from exc

    def _report(self, reading: HostReading,
                resources: HostResources) -> TraitReport:
        return trait_report(reading, self._cpu_map,
                            usable_cpus=resources.pcpus | resources.vcpus)


def node_uuid(nodename: str) -> str:
    """A stable provider uuid for ``nodename`` (the same every run)."""
    return str(uuidlib.uuid5(uuidlib.NAMESPACE_URL,
                             f"virtdriver:compute-node:{nodename}"))


def _disk_gb() -> int | None:
    try:
        return shutil.disk_usage(state_dir()).total // 1024 ** 3 or None
    except OSError:
        return None
