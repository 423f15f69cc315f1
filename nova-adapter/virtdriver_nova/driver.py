"""Nova's ``LibvirtDriver`` whose resource reporting is virtdriver's.

Everything but :meth:`LibvirtDriver.update_provider_tree` is Nova's own
libvirt driver.  ``update_provider_tree`` hands the compute node root to
virtdriver's libvirt driver with the "nova" tree profile
(:mod:`virtdriver.drivers.nova_tree`), reading Nova's own libvirt
connection (``self._host.get_connection()``) and Nova's options
(:func:`virtdriver.conf.nova.from_nova_conf`).  virtdriver's driver is
built once per node; its reading is cached and re-read when libvirt's or
the hypervisor's version changes, the online CPUs on every periodic.

What virtdriver does not model is delegated to Nova's code, as Nova's
driver runs it: ``DISK_GB``'s size (Nova's storage backends), vGPU
providers, virtual persistent memory and memory-encryption (SEV/TDX)
inventories.  The VCPU to PCPU reshape is virtdriver's, through Nova's
protocol: ``ReshapeNeeded`` when there are no allocations, then the
allocations Nova gives are moved.
"""

from __future__ import annotations

import collections
import copy
import logging

from nova import context as nova_context
from nova import exception
from nova import objects
from nova.objects import fields
from nova.virt.libvirt import driver as nova_libvirt

import nova.conf

from virtdriver.conf.nova import from_nova_conf
from virtdriver.conf.reader import ConfigError
from virtdriver.drivers.base import DriverError
from virtdriver.drivers.libvirt.connection import URIChoice
from virtdriver.drivers.libvirt.driver import LibvirtDriver as VDLibvirt
from virtdriver.drivers.libvirt.session import LibvirtSession
from virtdriver.drivers.nova_tree import (
    move_vcpu_to_pcpu, nova_inventory, pcpu_reshape_needed)

CONF = nova.conf.CONF
LOG = logging.getLogger(__name__)


class LibvirtDriver(nova_libvirt.LibvirtDriver):
    """Nova's libvirt driver; resource reporting by virtdriver."""

    def __init__(self, virtapi, read_only=False):
        super().__init__(virtapi, read_only)
        self._virtdriver: dict[str, VDLibvirt] = {}

    def init_host(self, host):
        """virtdriver's check of ``nova.conf`` first: a value it cannot
        model stops ``nova-compute`` here, naming the option; then
        Nova's own start-up."""
        try:
            from_nova_conf(CONF)
        except ConfigError as exc:
            raise exception.InvalidConfiguration(
                f"virtdriver: {exc}; fix nova.conf, or set "
                "compute_driver = libvirt.LibvirtDriver") from exc
        return super().init_host(host)

    def _reporter(self, nodename: str) -> VDLibvirt:
        """virtdriver's libvirt driver for ``nodename``, built once."""
        reporter = self._virtdriver.get(nodename)
        if reporter is not None:
            return reporter
        try:
            conf, profile = from_nova_conf(CONF)
        except ConfigError as exc:
            raise exception.NovaException(
                f"virtdriver: {exc}; fix nova.conf") from exc
        host = self._host
        uri = self._uri()  # Nova's choice: [libvirt] connection_uri or
        # the virt type's default

        def opener(_uri):
            return host.get_connection(), URIChoice(
                uri, "Nova's own libvirt connection")

        reporter = VDLibvirt(
            conf=conf, session=LibvirtSession(opener=opener),
            profile="nova", nova_profile=profile,
            disk_gb=lambda: int(self._get_local_gb_info()["total"]))
        try:
            reporter.init_host(nodename)
        except DriverError as exc:
            raise exception.NovaException(f"virtdriver: {exc}") from exc
        self._virtdriver[nodename] = reporter
        return reporter

    def update_provider_tree(self, provider_tree, nodename, allocations=None):
        """The compute node root as virtdriver's "nova" profile reports
        it (module doc); ``ReshapeNeeded`` when pinned guests' ``VCPU``
        must become ``PCPU`` and no allocations were given."""
        reporter = self._reporter(nodename)
        root = provider_tree.data(nodename)
        before = dict(root.inventory)
        try:
            wanted = nova_inventory(
                reporter.node_resources(nodename), reporter.nova_profile(),
                before, None)
            pinned: set[str] = set()

            def pinned_guests() -> bool:
                pinned.update(self._pinned_consumers(nodename))
                return bool(pinned)

            if pcpu_reshape_needed(before, wanted, pinned_guests):
                if allocations is None:
                    LOG.info("virtdriver: %s gains PCPU inventory while "
                             "pinned guests hold VCPU; asking for a "
                             "reshape", nodename)
                    raise exception.ReshapeNeeded()
                moved = move_vcpu_to_pcpu(allocations, root.uuid,
                                          pinned.__contains__)
                LOG.info("virtdriver: moved VCPU to PCPU for %d consumers "
                         "on %s", len(moved), nodename)
            # Nova's vGPU and memory-encryption code looks for its old
            # inventory on the root to decide on a reshape: it runs
            # before the root is replaced, as in Nova's own driver.
            self._update_provider_tree_for_vgpu(
                provider_tree, nodename, allocations=allocations)
            self._update_provider_tree_for_memory_encryption(
                provider_tree, nodename, allocations=allocations)
            reporter.update_provider_tree(provider_tree, nodename)
        except DriverError as exc:
            raise exception.NovaException(f"virtdriver: {exc}") from exc
        self._nova_vpmems(provider_tree, nodename)
        # Nova's spawn and claims read the tree the driver last reported.
        self.provider_tree = copy.deepcopy(provider_tree)

    def _nova_vpmems(self, provider_tree, nodename):
        """Virtual persistent memory inventories, by Nova's own code, on
        the root virtdriver just published (nothing without vPMEM)."""
        if not self._vpmems_by_rc:
            return
        inventory = dict(provider_tree.data(nodename).inventory)
        resources = collections.defaultdict(set)
        self._update_provider_tree_for_vpmems(
            provider_tree, nodename, inventory, resources)
        provider_tree.update_inventory(nodename, inventory)
        provider_tree.update_resources(nodename, resources)

    def _pinned_consumers(self, nodename: str) -> set[str]:
        """Consumers whose ``VCPU`` on ``nodename`` are dedicated CPUs:
        this host's guests with ``hw:cpu_policy=dedicated``, and the
        migrations leaving it with such a guest (Nova's data model, read
        through its public objects)."""
        ctx = nova_context.get_admin_context()
        node = objects.ComputeNode.get_by_nodename(ctx, nodename)
        consumers = {
            i.uuid for i in objects.InstanceList.get_by_host(
                ctx, node.host, expected_attrs=["numa_topology"])
            if _dedicated(i)}
        for migration in objects.MigrationList.\
                get_in_progress_by_host_and_node(ctx, node.host, nodename):
            if not migration.dest_compute or \
                    migration.dest_compute == node.host:
                continue  # arrived here: its instance is counted above
            instance = objects.Instance.get_by_uuid(
                ctx, migration.instance_uuid,
                expected_attrs=["numa_topology"])
            if _dedicated(instance):
                consumers.add(migration.uuid)
        return consumers


def _dedicated(instance) -> bool:
    return bool(instance.numa_topology) and (
        instance.numa_topology.cpu_policy ==
        fields.CPUAllocationPolicy.DEDICATED)
