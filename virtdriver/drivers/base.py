"""The contract every virt driver fulfils: :class:`ComputeDriver`.

A compute service loads one driver (see :mod:`virtdriver.drivers.loader`),
calls :meth:`~ComputeDriver.init_host` once, then periodically asks it for
its nodes, each node's capabilities, and to bring the provider tree of each
node up to date.  The resource tracker owns the tree and syncs it to
Placement; the driver only says what its nodes are.

The methods mirror Nova's virt driver API where Nova has one
(``init_host``, ``get_available_nodes``, ``update_provider_tree``,
``cleanup_host``, the ``capabilities`` dict, :class:`ReshapeNeeded`,
:class:`HypervisorUnavailable`), so a driver written against Nova's
contract runs unchanged: the tracker creates each node's root before the
driver runs, a driver that declares no :attr:`~ComputeDriver.ownership`
owns exactly the traits it set itself, and a driver that moves inventory
gets the allocations to move.  ``docs/driver-authors.md`` walks through a
complete out-of-tree driver, and a port of Nova's.
"""

from __future__ import annotations

import abc
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Protocol

from virtdriver.capabilities.traits.derive import TraitReport
from virtdriver.capabilities.traits.ownership import Ownership
from virtdriver.drivers.host_resources import HostResources
from virtdriver.drivers.identity import root_uuid


class DriverError(Exception):
    """Base class of every error a driver, or loading one, raises."""


class HypervisorUnavailable(DriverError):
    """The hypervisor (or the service behind the node) does not answer now.

    Nova's exception of the same name.  Raised by a driver from
    ``update_provider_tree`` (or any method the tracker calls for a node),
    it means "not now", never "your input is wrong": the node's providers
    are left exactly as they were (nothing removed), the commands exit 3
    and the agent tries again next cycle.
    """


class ReshapeNeeded(Exception):
    """Raised by ``update_provider_tree`` called without ``allocations``
    when the driver must move inventory between providers (Nova's
    exception of the same name).

    The tracker then reads the allocations of every consumer of the
    node's providers and calls ``update_provider_tree`` again with them
    (``allocations=``); the driver moves inventory and, in that mapping,
    the allocations on it; the sync sends both in one ``POST /reshaper``.
    """


#: The root uuid scheme of a driver that names none (Nova's ``compute
#: node``): :meth:`ComputeDriver.root_uuid_for`.
DEFAULT_ROOT_KIND = "compute-node"
#: How many of a driver's nodes an error message lists.
_NODES_SHOWN = 10


class NodeNotFoundError(DriverError, LookupError):
    """A node name the driver does not manage.

    Attributes:
        nodename: the name asked for.
        available: the nodes the driver does manage.
    """

    def __init__(self, nodename: str, available: Iterable[str]) -> None:
        self.nodename = nodename
        self.available = tuple(sorted(available))
        shown = self.available[:_NODES_SHOWN]
        known = ", ".join(shown) or "none"
        if len(self.available) > len(shown):
            known += f", … ({len(self.available)} in all)"
        super().__init__(
            f"node {nodename!r} is not managed by this driver (its nodes: "
            f"{known}); pass one of those, or refresh the node list with "
            "get_available_nodes(refresh=True)")


class ProviderDataLike(Protocol):
    """What :meth:`ProviderTreeLike.data` returns: one provider's view."""

    @property
    def uuid(self) -> str: ...

    @property
    def traits(self) -> Collection[str]: ...


class ProviderTreeLike(Protocol):
    """The provider-tree calls a driver may make in ``update_provider_tree``.

    The tracker passes a
    :class:`virtdriver.resource_tracker.provider_tree.ProviderTree`; these
    are its Nova-compatible methods.  ``provider`` is a provider's name or
    uuid.
    """

    def new_root(self, name: str, uuid: str | None = None) -> str:
        """Add a root provider; return its uuid (without one, during a
        tracker's update: the node's stable uuid)."""
        ...

    def new_child(self, name: str, parent: str,
                  uuid: str | None = None) -> str:
        """Add a child of ``parent``; return its uuid."""
        ...

    def exists(self, provider: str) -> bool:
        """Whether the tree holds ``provider``."""
        ...

    def data(self, provider: str) -> ProviderDataLike:
        """A read-only snapshot of ``provider``."""
        ...

    def update_inventory(self, provider: str,
                         inventory: Mapping[str, Mapping[str, Any]]) -> bool:
        """Replace ``provider``'s inventory; return whether it changed."""
        ...

    def update_traits(self, provider: str, traits: Iterable[str]) -> bool:
        """Replace ``provider``'s traits; return whether they changed."""
        ...

    def add_traits(self, provider: str, *traits: str) -> None:
        """Add ``traits`` to ``provider``'s (Nova's call)."""
        ...

    def remove_traits(self, provider: str, *traits: str) -> None:
        """Remove ``traits`` from ``provider``'s (Nova's call)."""
        ...


@dataclass(frozen=True)
class NodeCapabilities:
    """What one node is, in terms any driver can give.

    Attributes:
        nodename: the node, one of
            :meth:`ComputeDriver.get_available_nodes`.
        traits: every trait the driver owns for this node with its state
            (asserted, unasserted, unknown) and evidence, or ``None`` when
            the driver does not derive traits per node.  Its ownership must
            be part of the driver's :attr:`ComputeDriver.ownership` (when
            the driver declares one).
        facts: driver-specific, JSON-ready facts for people and tools
            (``{"arch": "x86_64", "numa_cells": 2}``); read-only.  Nothing
            schedules on them: what the scheduler needs goes into the
            provider tree.
    """

    nodename: str
    traits: TraitReport | None = None
    facts: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "facts", MappingProxyType(dict(self.facts)))


class ComputeDriver(abc.ABC):
    """A virt driver: reads what its host's nodes are, keeps their
    providers true.

    Subclasses declare :attr:`capabilities` — the Nova-style capabilities
    dict (``supports_multiattach`` → bool …; each ``supports_*`` entry
    corresponds to a ``COMPUTE_*`` trait) — and implement
    :meth:`init_host`, :meth:`get_available_nodes` and
    :meth:`update_provider_tree`, as a Nova driver does.  Optional:

    * :attr:`ownership` — every trait (and dynamic-name prefix) the driver
      could ever set.  Declared, the tracker removes an owned trait the
      driver does not assert and never touches any other.  Not declared
      (``None``, Nova's way), the driver owns exactly the traits it set
      itself, provider by provider, as the tracker saw it set them and
      recorded in its ledger: it may remove those later, never another.
    * :meth:`node_capabilities` — traits with evidence, and facts, for
      ``explain`` and ``report``; the default has neither.

    The constructor is called with keyword arguments only, and only with
    those its signature names: the ``virtdriver`` command offers ``conf``
    (the configuration) to every driver, and
    :func:`~virtdriver.drivers.loader.build_driver` passes what the
    constructor takes (``**kwargs`` takes all).  Any other parameter needs
    a default — one without is refused at load time, by name.  It must
    not do I/O (``virtdriver drivers`` builds each driver to check it):
    :meth:`init_host` does.
    """

    @property
    @abc.abstractmethod
    def capabilities(self) -> Mapping[str, bool]:
        """The driver's capabilities dict: capability name → supported."""

    #: Every trait (and dynamic-name prefix) this driver may set, or
    #: ``None``: not declared — the driver owns the traits it set itself
    #: (class doc).  A class attribute or a property.
    ownership: Ownership | None = None

    @abc.abstractmethod
    def init_host(self, host: str) -> None:
        """Prepare to manage ``host`` (the compute service's host name).

        Called once, before any other method but the constructor.  Open
        connections and check the hypervisor here.

        Raises:
            DriverError: the host cannot be managed; the message says why
                and what to do.
        """

    @abc.abstractmethod
    def get_available_nodes(self, refresh: bool = False) -> list[str]:
        """The names of the nodes this driver manages, sorted.

        A hypervisor driver has one node (the host); a bare-metal driver
        one per machine.  With ``refresh`` re-read them from the source
        instead of a cached list.
        """

    def node_capabilities(self, nodename: str) -> NodeCapabilities:
        """What ``nodename`` is: its traits with evidence, and facts.

        The default (for drivers written as Nova's are) has neither: no
        trait report, no facts.

        Raises:
            NodeNotFoundError: ``nodename`` is not one of this driver's
                nodes.
        """
        self.require_node(nodename)
        return NodeCapabilities(nodename)

    @abc.abstractmethod
    def update_provider_tree(
            self, tree: ProviderTreeLike, nodename: str,
            allocations: Mapping[str, Any] | None = None) -> None:
        """Bring ``nodename``'s providers in ``tree`` up to date.

        The tracker has created the node's root provider (named
        ``nodename``, uuid :meth:`root_uuid_for`, trait ``COMPUTE_NODE``)
        unless :meth:`root_uuid_for` is ``None``: then create it here.
        Set its inventories, its traits and any children (NUMA cells,
        devices).  With a declared :attr:`ownership`, traits change only
        through the ownership rule: add asserted traits, remove owned ones
        that are unasserted, leave unknown and foreign traits exactly as
        they are (:func:`virtdriver.capabilities.traits.apply.apply_report`
        does this).  Without one, add and remove traits as Nova drivers
        do; only removals of traits the driver set itself stand.  Only the
        tree changes here; the tracker syncs it.

        Args:
            tree: the tracker's provider tree, changed in place.
            nodename: one of :meth:`get_available_nodes`.
            allocations: ``None`` on the ordinary call.  When the driver
                raised :class:`ReshapeNeeded` the tracker calls again with
                every consumer of the node's providers, as Nova passes
                them: consumer uuid → ``{"allocations": {provider uuid:
                {"resources": {class: amount}}}, "consumer_generation",
                "project_id", "user_id"}``; the driver changes the
                ``allocations`` of the consumers it moves, in place.

        Raises:
            NodeNotFoundError: ``nodename`` is not one of this driver's
                nodes.
            ReshapeNeeded: inventory must move and ``allocations`` is
                ``None``.
            HypervisorUnavailable: the hypervisor does not answer now.
        """

    def provider_traits(self, nodename: str) -> Mapping[str, TraitReport]:
        """The trait report each of ``nodename``'s providers follows, by
        provider name, the root (``nodename``) first — what ``virtdriver
        explain`` explains, provider by provider.

        The default: the root follows :meth:`node_capabilities`' report
        (nothing when it has none).  A driver that puts traits on child
        providers (NUMA cells, devices) overrides it with the split its
        :meth:`update_provider_tree` applies, each report with the
        evidence for that provider.

        Raises:
            NodeNotFoundError: ``nodename`` is not one of this driver's
                nodes.
        """
        report = self.node_capabilities(nodename).traits
        return {} if report is None else {nodename: report}

    def cleanup_host(self, host: str) -> None:
        """Release what :meth:`init_host` acquired; called at shutdown.

        The default does nothing.
        """
        return None

    def ownership_for(self, nodename: str) -> Ownership | None:
        """What the driver owns on ``nodename``'s providers; ``None``: not
        declared (the traits it set itself, class doc).

        The default is :attr:`ownership`, the same for every node; drivers
        whose ownership differs per node (a bare-metal driver whose nodes
        each name the traits they manage) override it.  The tracker
        reconciles a node's providers against this, never against another
        node's ownership.
        """
        return self.ownership

    def node_stamp(self, nodename: str) -> object | None:
        """A value that changes whenever anything the driver would write
        or report for ``nodename`` changes — or ``None``: unknown.

        The resource tracker's fast path (``docs/resource-tracker.md``):
        when a node's stamp compares equal (``==``) to the one it had when
        the tracker last left the node, and the node's providers, ledger
        entries and provider config are as the tracker left them too,
        ``update_all`` skips the node — no ``update_provider_tree``, no
        ``node_capabilities``.  So equal stamps promise that both calls,
        and :meth:`ownership_for`, would give what they gave then: same
        inventories, traits, report, ownership, children; and that
        ``update_provider_tree`` run again on the tree it left changes
        nothing.  Read the source cheaply (a ``stat``, a version counter)
        — the call is made for every node in every cycle.

        The default is ``None`` for every node: always the full update.
        Return ``None`` whenever unsure (the node is unknown, the source
        cannot be read); a subclass that changes what another driver's
        ``update_provider_tree`` writes must override this too.
        """
        return None

    def node_resources(self, nodename: str) -> HostResources | None:
        """What ``nodename``'s NUMA cells offer guests (CPUs dedicated and
        shared, siblings, memory, pages), for instance claims; ``None``
        when the driver has no NUMA host to claim on (bare metal: a node
        is taken whole).  The default is ``None``.

        Raises:
            NodeNotFoundError: ``nodename`` is not one of this driver's
                nodes.
        """
        self.require_node(nodename)
        return None

    def node_devices(self, nodename: str) -> Mapping[str, Any]:
        """``nodename``'s device providers → their units
        (:class:`~virtdriver.drivers.device_units.DeviceUnits`: which
        function, VF or mdev each unit is), for the claims to choose
        from; the default is none.

        Raises:
            NodeNotFoundError: not one of this driver's nodes.
        """
        self.require_node(nodename)
        return {}

    #: The :func:`~virtdriver.drivers.identity.root_uuid` scheme this
    #: driver derives its nodes' root uuids with (``"compute-node"`` for
    #: libvirt), or ``None`` when node uuids come from elsewhere (a
    #: bare-metal node's own uuid).
    root_uuid_kind: str | None = None

    def root_uuid_for(self, nodename: str) -> str | None:
        """The uuid the tracker gives ``nodename``'s root when it creates
        the root before :meth:`update_provider_tree` (as Nova's resource
        tracker does), or ``None``: the driver creates its roots itself.

        The default derives it (:func:`~virtdriver.drivers.identity.
        root_uuid`) with :attr:`root_uuid_kind`, or the ``compute-node``
        scheme when the driver names none — the same uuid on every run.
        A driver whose roots carry uuids from elsewhere (a bare-metal
        node's) returns ``None`` and creates them.
        """
        return root_uuid(self.root_uuid_kind or DEFAULT_ROOT_KIND, nodename)

    def recognizes_root(self, name: str, uuid: str) -> bool:
        """Whether a root provider ``name`` / ``uuid`` is one this driver
        would create for a node of that name — also for a node it no
        longer has, which is how the tracker proves a gone node's root is
        its own (``docs/resource-tracker.md``).  The default compares
        ``uuid`` with :meth:`root_uuid_for`; when that is ``None``,
        nothing is recognised (such roots are removed only by the tracker
        that saw the driver create them)."""
        return self.root_uuid_for(name) == uuid

    # -- transactions ---------------------------------------------------------

    def begin_update(self) -> object:
        """Open a transaction over the driver's own memory; return a token.

        The tracker calls it before an update and then exactly one of
        :meth:`commit_update` (the tree and the ledger were saved) or
        :meth:`rollback_update` (the update failed and the tree was put
        back).  Transactions nest.  A driver that remembers what it set
        (so it can remove it later) changes that memory only inside a
        transaction, undoably (:class:`virtdriver.drivers.undo.UndoLog`);
        a stateless driver keeps the defaults, which do nothing.
        """
        return None

    def commit_update(self, token: object) -> None:
        """Keep what the driver remembered since :meth:`begin_update`."""
        return None

    def rollback_update(self, token: object) -> None:
        """Forget what the driver remembered since :meth:`begin_update`:
        its memory is as it was then."""
        return None

    def require_node(self, nodename: str) -> None:
        """Raise :class:`NodeNotFoundError` unless ``nodename`` is ours."""
        nodes = self.get_available_nodes()
        if nodename not in nodes:
            raise NodeNotFoundError(nodename, nodes)
