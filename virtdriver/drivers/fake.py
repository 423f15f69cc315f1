"""The fake driver: a described host, no hypervisor.

The host comes from a preset (``small``, ``numa2-ht``, ``numa4-large``), a
YAML/JSON file, or a dict (see :mod:`virtdriver.drivers.fake_host`).  It is
turned into the same host model libvirt gives, so resources, traits and
the provider tree come out of the code the libvirt driver uses; domain
capabilities are not described, so traits read from them are unknown
(left alone), and guests see the described CPU (``host-passthrough``)
unless ``[libvirt] cpu_mode`` says otherwise.  A described ``disk_gb`` is
the root's ``DISK_GB``, with the disk options applied as for libvirt.
Extra traits in the description are owned and asserted.  Described
``devices`` (:mod:`~.fake_devices`) are device providers under their cells,
published by the libvirt driver's device code; :meth:`FakeDriver.
node_devices` names each provider's units for the claims.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from virtdriver.capabilities.traits import (
    capability_flags, cpu_features, host_traits)
from virtdriver.capabilities.traits.config import TraitConfig
from virtdriver.capabilities.traits.derive import TraitReport, derive_traits
from virtdriver.capabilities.traits.model import (
    DerivationInputs, Evidence, TraitFamily, TraitResult, TraitState)
from virtdriver.capabilities.traits.ownership import Ownership
from virtdriver.conf.disk import DiskConfig, disk_config
from virtdriver.conf.guest import trait_config
from virtdriver.conf.pinning import PinningConfig, pinning_config
from virtdriver.conf.reader import ConfigError
from virtdriver.drivers.base import (
    ComputeDriver, DriverError, NodeCapabilities, ProviderTreeLike)
from virtdriver.drivers.fake_host import (
    FakeHostError, FakeHostSpec, load_spec, spec_from_dict)
from virtdriver.drivers.host_resources import (
    HostResourceError, HostResources, host_resources)
from virtdriver.drivers.device_tree import lift_device_providers
from virtdriver.drivers.host_tree import (
    cell_provider_name, provider_reports, publish_host)
from virtdriver.drivers.identity import root_uuid
from virtdriver.drivers.device_units import DeviceUnits, device_units

if TYPE_CHECKING:
    from oslo_config import cfg

#: The families a described host can answer (no domain capabilities).
FAKE_FAMILIES = (*host_traits.FAMILIES, cpu_features.FAMILY,
                 capability_flags.FAMILY)
FAKE_CAPABILITIES = MappingProxyType({
    "supports_attach_interface": True, "supports_device_tagging": True,
    "supports_multiattach": True, "supports_image_type_raw": True,
    "supports_image_type_qcow2": True,
})


class FakeDriver(ComputeDriver):
    """A compute driver for a described host (see module doc).

    Args:
        host: a preset name, a description file path, or a dict.
        conf: options (pinning, reservations, CPU mode, …); defaults apply
            when omitted.
        nested: NUMA cells as child providers (default) or all on the root.
    """

    capabilities = FAKE_CAPABILITIES
    root_uuid_kind = "fake"

    def __init__(self, host: str | Mapping[str, Any] = "small", *,
                 conf: cfg.ConfigOpts | None = None,
                 nested: bool = True) -> None:
        self._source = host
        self._conf = conf
        self._nested = nested
        self._spec: FakeHostSpec | None = None
        self._config: TraitConfig | None = None
        self._pinning: PinningConfig | None = None
        self._disk: DiskConfig | None = None
        self._devices = None     # (HostDevices, DeviceProviders) or None

    @property
    def ownership(self) -> Ownership:
        """The families' traits, plus the description's extra traits (owned
        while the description lists them; others' traits never are)."""
        extra = self._spec.traits if self._spec is not None else frozenset()
        owned = Ownership.of(FAKE_FAMILIES).union(Ownership(extra))
        if self._devices is not None:
            from virtdriver.capabilities.traits.device_providers import (
                DEVICE_OWNERSHIP, rule_ownership)
            owned = owned.union(DEVICE_OWNERSHIP).union(
                rule_ownership(self._devices[1].rules))
        return owned

    def init_host(self, host: str) -> None:
        """Read and validate the description and the options.

        Raises:
            DriverError: the description is unusable, an option has a bad
                value (naming it), or pinning does not fit the host.
        """
        try:
            self._spec = (spec_from_dict(self._source)
                          if isinstance(self._source, Mapping)
                          else load_spec(self._source))
        except FakeHostError as exc:
            raise DriverError(f"fake host: {exc}") from exc
        if self._conf is None:
            from virtdriver.conf.options import make_conf
            self._conf = make_conf()
        try:
            config = trait_config(self._conf)
            # The described CPU is the guest CPU unless configured otherwise.
            self._config = (config if config.cpu_mode else dataclasses.replace(
                config, cpu_mode="host-passthrough"))
            self._pinning = pinning_config(self._conf)
            self._disk = disk_config(self._conf)
        except ConfigError as exc:
            raise DriverError(f"fake driver options: {exc}") from exc
        overlap = sorted(self._spec.traits
                         & Ownership.of(FAKE_FAMILIES).static)
        if overlap:
            raise DriverError(
                f"fake host {self._spec.name!r}: extra traits "
                f"{', '.join(overlap)} are derived from the description "
                "itself; describe the CPU or capabilities instead")
        self._resources()  # validate pinning against the host now
        if self._spec.devices:
            from virtdriver.drivers.fake_devices import fake_devices
            from virtdriver.drivers.libvirt.device_providers import (
                DeviceProviders)
            devices, rules = fake_devices(self._spec.devices,
                                          self._spec.cells, self._spec.name)
            self._devices = (devices, DeviceProviders(rules))

    def get_available_nodes(self, refresh: bool = False) -> list[str]:
        """The described host's name."""
        return [self._ready().name]

    def node_capabilities(self, nodename: str) -> NodeCapabilities:
        """Traits with evidence, and the description's shape."""
        self.require_node(nodename)
        spec = self._ready()
        report = self._report()
        if self._devices is not None:  # the node's report answers for them
            report = self._devices[1].report(report, self._devices[0])
        return NodeCapabilities(nodename, report, {
            "arch": spec.arch, "numa_cells": spec.cells,
            "cores_per_cell": spec.cores_per_cell,
            "threads_per_core": spec.threads_per_core,
            "memory_mb_per_cell": spec.memory_mb_per_cell,
            "disk_gb": spec.disk_gb})

    def update_provider_tree(self, tree: ProviderTreeLike, nodename: str,
                             allocations: Mapping[str, Any] | None = None
                             ) -> None:
        """Publish the described host (see :mod:`~..host_tree`)."""
        self.require_node(nodename)
        spec = self._ready()
        if self._devices is not None:
            lift_device_providers(tree, nodename, {
                cell_provider_name(nodename, cell)
                for cell in range(spec.cells)} if self._nested else set())
        publish_host(tree, nodename, host=spec.host_capabilities(),
                     resources=self._resources(), report=self._report(),
                     node_uuid=root_uuid(self.root_uuid_kind, nodename),
                     disk_gb=spec.disk_gb, disk=self._disk,
                     nested=self._nested)
        if self._devices is not None:
            devices, providers = self._devices
            providers.publish(tree, nodename, devices, nested=self._nested,
                              allocations=allocations)

    def provider_traits(self, nodename: str) -> Mapping[str, TraitReport]:
        """The report each provider follows, as the tree publishes them
        (:func:`~..host_tree.provider_reports`)."""
        self.require_node(nodename)
        reports = dict(provider_reports(
            nodename, self._ready().host_capabilities(), self._report(),
            nested=self._nested))
        if self._devices is not None:
            devices, providers = self._devices
            reports.update(providers.provider_reports(nodename, devices))
        return reports

    def node_devices(self, nodename: str) -> Mapping[str, DeviceUnits]:
        """Device provider name → its units (:mod:`~.device_units`)."""
        self.require_node(nodename)
        if self._devices is None:
            return {}
        devices, providers = self._devices
        return device_units(nodename, providers.offers(devices) or (),
                            devices)

    def node_resources(self, nodename: str) -> HostResources:
        """The described host's cells, as the tree publishes them."""
        self.require_node(nodename)
        return self._resources()

    def _ready(self) -> FakeHostSpec:
        if self._spec is None:
            raise DriverError("the fake driver was not initialised; call "
                              "init_host() first")
        return self._spec

    def _resources(self):
        try:
            return host_resources(self._ready().host_capabilities(), None,
                                  self._pinning)
        except HostResourceError as exc:
            raise DriverError(f"fake host {self._ready().name!r}: {exc}") \
                from exc

    def _report(self) -> TraitReport:
        spec = self._ready()
        extra = TraitFamily("fake host traits", spec.traits,
                            lambda inputs: _extra(spec))
        inputs = DerivationInputs(
            host=spec.host_capabilities(),
            driver_capabilities={**FAKE_CAPABILITIES, **spec.capabilities},
            config=self._config)
        return derive_traits(inputs, (*FAKE_FAMILIES, extra))


def _extra(spec: FakeHostSpec) -> Iterator[TraitResult]:
    for trait in sorted(spec.traits):
        yield TraitResult(trait, TraitState.ASSERTED, "fake host traits", (
            Evidence(f"fake host {spec.name!r}", f"lists trait {trait}"),))
