"""The ``GET /allocation_candidates`` request for an instance on this tree.

Pure: flavor + image properties (+ the image's disk format) in, a frozen
:class:`PlacementRequest` out; nothing here speaks HTTP.  The tree it asks
of is the nested one :mod:`virtdriver.drivers.host_tree` publishes: the
compute node root holds ``DISK_GB`` and the host traits; each NUMA cell is
a child with ``HW_NUMA_ROOT``, ``VCPU``, ``PCPU``, ``MEMORY_MB``, one
``CUSTOM_MEM_PAGE_SIZE_<KiB>`` per huge page size and the CPU feature
traits.  The request (rules and microversions in ``docs/claims.md``):

* **With a NUMA topology**, one numbered group per guest node (suffix
  ``N+1`` for guest node ``N``): its shared vCPUs as ``VCPU``, its
  dedicated ones as ``PCPU`` (guest node 0 adds the isolated emulator
  threads' CPU, where the claim puts it), and its memory: ``MEMORY_MB``
  for small pages, a huge page size's pages alone (a cell's ``MEMORY_MB``
  is its small-page memory), nothing for ``large``/``any`` (the claim
  chooses); ``required<N>=HW_NUMA_ROOT`` plus the
  CPU feature traits the flavor and image ask for.  More than one guest
  node: ``group_policy=isolate``, every node on a cell of its own.
* **Without one**, the flavor's ``VCPU`` and ``MEMORY_MB`` float in the
  unnumbered group.
* **Devices** (:mod:`~.device_request`): each request a group of its
  own, suffix ``_DEV1``, ``_DEV2``…, with its class, count and traits.
  With a NUMA topology and policy ``required`` the group shares a subtree
  with guest node 0's group (``same_subtree=1,_DEV1``, microversion 1.36:
  the device provider is a child of that node's cell); ``legacy``,
  ``preferred`` and ``socket`` cannot be said exactly (an "or", a
  preference, a socket Placement has no provider for): the group floats
  and the claim checks (:data:`DEVICE_LEGACY`, :data:`DEVICE_PREFERRED`,
  :data:`DEVICE_SOCKET`).  Without a NUMA topology devices float.
* ``DISK_GB`` (root + ephemeral + swap) is in the unnumbered group;
  every other required or forbidden trait is on the root
  (``root_required``), where the drivers put them.

What the tree cannot express is listed in :attr:`PlacementRequest.
unexpressed`, one :class:`Unexpressed` per case: the claim checks those.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

import os_resource_classes as orc
import os_traits

from virtdriver.capabilities.traits.cpu_features import FAMILY as CPU_FEATURES
from virtdriver.claims.constraints import numa_constraints
from virtdriver.claims.device_request import (
    LEGACY, PREFERRED, REQUIRED, SOCKET, DeviceRequest, PciAlias,
    device_requests)
from virtdriver.claims.extra_specs import flavor_traits
from virtdriver.claims.image_traits import image_traits_or_raise
from virtdriver.claims.model import (
    PAGE_ANY, PAGE_LARGE, PAGE_SMALL, THREAD_ISOLATE, THREAD_REQUIRE,
    CellRequest, Flavor, NUMARequest)
from virtdriver.drivers.host_tree import page_resource_class

#: The microversion every request needs (``root_required``, 1.35, is the
#: newest feature used; granular groups and ``group_policy`` are 1.25,
#: nested candidates 1.29, group ``mappings`` in the answer 1.34).
MICROVERSION = "1.35"
#: With a device group that must share its guest node's cell
#: (``same_subtree``, 1.36).
SAME_SUBTREE_MICROVERSION = "1.36"

#: Cases the tree cannot express (``Unexpressed.case``).
THREAD_SIBLINGS_ISOLATE = "thread-policy-isolate"
THREAD_SIBLINGS_REQUIRE = "thread-policy-require"
REALTIME_MASK = "realtime-mask"
PAGE_SIZE_CHOICE = "page-size-choice"
FLOATING_SPLIT = "floating-instance"
DEVICE_LEGACY = "device-numa-legacy"
DEVICE_PREFERRED = "device-numa-preferred"
DEVICE_SOCKET = "device-numa-socket"
DEVICES_ISOLATED = "devices-isolated"
CASES = (THREAD_SIBLINGS_ISOLATE, THREAD_SIBLINGS_REQUIRE, REALTIME_MASK,
         PAGE_SIZE_CHOICE, FLOATING_SPLIT, DEVICE_LEGACY, DEVICE_PREFERRED,
         DEVICE_SOCKET, DEVICES_ISOLATED)
#: The prefix of a device group's suffix (``_DEV1``).
DEVICE_SUFFIX = "_DEV"
#: The page size (KiB) that means small pages when named as a number: the
#: base page of x86 and most hosts, which no page class offers.
SMALL_PAGE_KIB = 4


@dataclass(frozen=True)
class Unexpressed:
    """A constraint Placement is not asked; the claim checks it.

    Attributes:
        case: one of :data:`CASES`.
        message: what is not expressed and what the claim does instead.
    """

    case: str
    message: str

    def to_json(self) -> dict[str, str]:
        """``{"case", "message"}``."""
        return {"case": self.case, "message": self.message}


@dataclass(frozen=True)
class RequestGroup:
    """One request group.

    Attributes:
        suffix: ``""`` for the unnumbered group, else ``"1"``, ``"2"``…
        resources: resource class → amount (classes of 0 left out).
        required: traits its provider must have.
        forbidden: traits its provider must not have.
        guest_node: the guest NUMA node it stands for (``None`` for the
            unnumbered group).
    """

    suffix: str
    resources: Mapping[str, int]
    required: frozenset[str] = frozenset()
    forbidden: frozenset[str] = frozenset()
    guest_node: int | None = None
    device: DeviceRequest | None = None

    def params(self) -> list[tuple[str, str]]:
        """Its query parameters (none when it asks for nothing)."""
        out = []
        if self.resources:
            out.append((f"resources{self.suffix}", ",".join(
                f"{rc}:{n}" for rc, n in sorted(self.resources.items()))))
        traits = _traits_value(self.required, self.forbidden)
        if traits:
            out.append((f"required{self.suffix}", traits))
        return out

    def to_json(self) -> dict[str, Any]:
        """The group as JSON."""
        found = {"suffix": self.suffix, "guest_node": self.guest_node,
                 "resources": dict(sorted(self.resources.items())),
                 "required": sorted(self.required),
                 "forbidden": sorted(self.forbidden)}
        if self.device is not None:
            found["device"] = self.device.to_json()
        return found


@dataclass(frozen=True)
class PlacementRequest:
    """The granular ``GET /allocation_candidates`` request (module doc).

    Attributes:
        groups: the unnumbered group first (it may ask for nothing), then
            the numbered ones in guest node order.
        group_policy: ``"isolate"`` with more than one numbered group,
            else ``None`` (not sent).
        root_required: traits the compute node (root) must have.
        root_forbidden: traits it must not have.
        same_subtree: groups of suffixes that must share a subtree (a
            ``required`` device and its guest node's cell).
        numa: the NUMA request the groups were made from (``None``: the
            instance floats).
        unexpressed: what the request leaves to the claim.
        microversion: the Placement microversion to send it with.
        limit: at most this many candidates (``None``: Placement's
            default, all of them).
    """

    groups: tuple[RequestGroup, ...]
    group_policy: str | None = None
    root_required: frozenset[str] = frozenset()
    root_forbidden: frozenset[str] = frozenset()
    same_subtree: tuple[tuple[str, ...], ...] = ()
    numa: NUMARequest | None = None
    unexpressed: tuple[Unexpressed, ...] = ()
    microversion: str = MICROVERSION
    limit: int | None = None

    def params(self) -> list[tuple[str, str]]:
        """The query parameters, in a stable order."""
        out = [p for group in self.groups for p in group.params()]
        if self.group_policy:
            out.append(("group_policy", self.group_policy))
        root = _traits_value(self.root_required, self.root_forbidden)
        if root:
            out.append(("root_required", root))
        out.extend(("same_subtree", ",".join(s)) for s in self.same_subtree)
        if self.limit is not None:
            out.append(("limit", str(self.limit)))
        return out

    def query_string(self) -> str:
        """``resources=…&resources1=…&group_policy=isolate…``."""
        return urlencode(self.params(), safe=",:!")

    def group_of(self, guest_node: int) -> RequestGroup:
        """The numbered group of ``guest_node``."""
        return next(g for g in self.groups if g.guest_node == guest_node)

    @property
    def devices(self) -> tuple[DeviceRequest, ...]:
        """The device requests, in group order."""
        return tuple(g.device for g in self.groups if g.device is not None)

    def to_json(self) -> dict[str, Any]:
        """Everything, with the query string and the microversion."""
        return {"microversion": self.microversion,
                "query": self.query_string(),
                "groups": [g.to_json() for g in self.groups],
                "group_policy": self.group_policy,
                "root_required": sorted(self.root_required),
                "root_forbidden": sorted(self.root_forbidden),
                "same_subtree": [list(s) for s in self.same_subtree],
                "unexpressed": [u.to_json() for u in self.unexpressed]}


def placement_request(flavor: Flavor, image_properties: Mapping[str, Any],
                      disk_format: Any = None, *, limit: int | None = None,
                      aliases: Mapping[str, PciAlias] | None = None
                      ) -> PlacementRequest:
    """The request a scheduler sends for ``flavor`` with this image;
    ``aliases`` are ``[pci] alias``'s (:func:`~.device_request.
    parse_aliases`).

    Raises:
        InvalidRequest: the flavor and image NUMA or device settings are
            invalid (an unknown alias among them).
        InvalidImage: an image property names no trait.
    """
    numa = numa_constraints(flavor, image_properties)
    devices = device_requests(flavor.extra_specs, image_properties, aliases)
    image = image_traits_or_raise(image_properties, disk_format)
    flavor_required, flavor_forbidden = flavor_traits(flavor.extra_specs)
    required = set(image.required | flavor_required)
    forbidden = set(image.forbidden | flavor_forbidden)
    cpu_required = {t for t in required if t in CPU_FEATURES.traits}
    cpu_forbidden = {t for t in forbidden if t in CPU_FEATURES.traits}
    root: dict[str, int] = {}
    if flavor.disk_gb:
        root[orc.DISK_GB] = flavor.disk_gb
    if numa is None:
        groups = [RequestGroup("", {**root, orc.VCPU: flavor.vcpus,
                                    orc.MEMORY_MB: flavor.memory_mb},
                               frozenset(cpu_required),
                               frozenset(cpu_forbidden))]
    else:
        groups = [RequestGroup("", root)]
        for cell in numa.cells:
            groups.append(RequestGroup(
                str(cell.id + 1), node_resources(numa, cell),
                frozenset({os_traits.HW_NUMA_ROOT, *cpu_required}),
                frozenset(cpu_forbidden), cell.id))
    groups.extend(device_groups(devices))
    numbered = sum(1 for g in groups if g.suffix)
    policy = None
    if numbered > 1:
        policy = "isolate" if numa is not None and len(numa.cells) > 1 \
            else "none"
    subtree = tuple(("1", g.suffix) for g in groups if g.device is not None
                    and numa is not None and g.device.policy == REQUIRED)
    return PlacementRequest(
        tuple(groups), policy,
        frozenset(required - cpu_required),
        frozenset(forbidden - cpu_forbidden), subtree, numa=numa,
        unexpressed=unexpressed(numa) + device_unexpressed(
            numa, devices, policy), limit=limit,
        microversion=SAME_SUBTREE_MICROVERSION if subtree else MICROVERSION)


def device_groups(devices: tuple[DeviceRequest, ...]
                  ) -> list[RequestGroup]:
    """One group per device request, ``_DEV1``, ``_DEV2``…"""
    return [RequestGroup(f"{DEVICE_SUFFIX}{n}", {d.resource_class: d.count},
                         d.required, d.forbidden, None, d)
            for n, d in enumerate(devices, 1)]


def device_unexpressed(numa: NUMARequest | None,
                       devices: tuple[DeviceRequest, ...],
                       group_policy: str | None) -> tuple[Unexpressed, ...]:
    """What the device groups leave to the claim."""
    if not devices or numa is None:
        return ()
    found = []
    policies = {d.policy for d in devices}
    if LEGACY in policies:
        found.append(Unexpressed(
            DEVICE_LEGACY,
            "device NUMA policy legacy: 'on guest node 0's cell, or on no "
            "cell' is an 'or' Placement cannot ask; the device floats and "
            "the claim refuses one on another cell"))
    if PREFERRED in policies:
        found.append(Unexpressed(
            DEVICE_PREFERRED,
            "device NUMA policy preferred: Placement does not rank "
            "candidates; the device floats and the claim takes it wherever "
            "the allocation puts it"))
    if SOCKET in policies:
        found.append(Unexpressed(
            DEVICE_SOCKET,
            "device NUMA policy socket: Placement has no socket providers; "
            "the device floats and the claim refuses one whose cell is on "
            "another socket than guest node 0's (or on no cell)"))
    classes = [d.resource_class for d in devices]
    if group_policy == "isolate" and len(set(classes)) < len(classes):
        found.append(Unexpressed(
            DEVICES_ISOLATED,
            "several devices of one class with group_policy=isolate: "
            "Placement takes each from a provider of its own; the claim "
            "may take two from one pool, so a host whose free devices sit "
            "on fewer providers gets no candidate though it fits"))
    return tuple(found)


def node_resources(numa: NUMARequest, cell: CellRequest) -> dict[str, int]:
    """What guest node ``cell`` asks of its host cell (its group's
    resources): shared vCPUs as VCPU, dedicated ones as PCPU (plus the
    isolated emulator CPU on node 0), MEMORY_MB, and its pages."""
    extra = 1 if numa.emulator_threads_isolated and cell.id == 0 else 0
    resources = {orc.VCPU: len(cell.shared_cpus),
                 orc.PCPU: len(cell.dedicated_cpus) + extra}
    resources.update(memory_resources(numa.page_size, cell.memory_mb))
    return {rc: n for rc, n in resources.items() if n}


def memory_resources(page_size: Any, memory_mb: int) -> dict[str, int]:
    """What ``memory_mb`` of a guest node takes in Placement: small pages
    (no page size, ``small`` or :data:`SMALL_PAGE_KIB`) as ``MEMORY_MB``,
    a huge page size as its pages only (a cell's ``MEMORY_MB`` is its
    small-page memory: huge pages are never sold twice), and ``large`` or
    ``any`` as nothing (no class means "some page size": the claim
    chooses, :data:`PAGE_SIZE_CHOICE`)."""
    if page_size in (None, PAGE_SMALL, SMALL_PAGE_KIB):
        return {orc.MEMORY_MB: memory_mb}
    if isinstance(page_size, int):
        return {page_resource_class(page_size):
                memory_mb * 1024 // page_size}
    return {}


_FLOATING = Unexpressed(
    FLOATING_SPLIT,
    "no NUMA topology: Placement takes VCPU and MEMORY_MB each from one "
    "cell, while the claim may spread them over the whole host; a "
    "flavor larger than any one cell gets no candidate though it fits")


def unexpressed(numa: NUMARequest | None) -> tuple[Unexpressed, ...]:
    """What a request for ``numa`` leaves to the claim (``None``: the
    floating instance's case)."""
    if numa is None:
        return (_FLOATING,)
    found = []
    if numa.cpu_thread_policy == THREAD_ISOLATE:
        found.append(Unexpressed(
            THREAD_SIBLINGS_ISOLATE,
            "thread policy isolate: Placement counts one PCPU per vCPU; the "
            "claim also keeps each used core's other threads idle, and "
            "refuses a cell without enough wholly free cores"))
    elif numa.cpu_thread_policy == THREAD_REQUIRE:
        found.append(Unexpressed(
            THREAD_SIBLINGS_REQUIRE,
            "thread policy require: Placement cannot ask for thread sibling "
            "pairs; the claim refuses a cell without enough free pairs"))
    if numa.realtime_cpus:
        found.append(Unexpressed(
            REALTIME_MASK,
            "realtime mask: which vCPUs run realtime is no resource; the "
            "claim checks they are dedicated"))
    if numa.page_size in (PAGE_LARGE, PAGE_ANY):
        found.append(Unexpressed(
            PAGE_SIZE_CHOICE,
            f"page size {numa.page_size}: no resource class means 'some "
            + ("huge page size" if numa.page_size == PAGE_LARGE else
               "page size, huge or small")
            + "', so no memory is asked; the claim chooses the pages and "
            "refuses a cell without enough"))
    return tuple(found)


def _traits_value(required, forbidden) -> str:
    return ",".join([*sorted(required), *(f"!{t}" for t in sorted(forbidden))])
