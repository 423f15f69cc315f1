"""The no-op rebuild claim's checks: may this instance run the new image here?

A rebuild keeps the host, the flavor and the allocations; only the image
changes.  :func:`rebuild_conflicts` returns every reason the new image
cannot be used that way (an empty list means it can):

1. **invalid** — the new image's properties are invalid with this flavor
   (one conflict per problem), or the current ones are, so nothing can be
   proved unchanged.
2. **numa** — the NUMA constraints differ; one conflict naming each
   differing field, old → new.
3. **resources** — what the instance consumes in Placement differs
   (VCPU → PCPU, a page size, an isolated emulator thread's PCPU).
4. **traits** — a trait the new image requires is on none of the providers
   the instance holds allocations against nor on their trees' roots (an
   unallocated sibling does not count); a trait it forbids is on one of
   them; the flavor forbids (requires) a trait the image requires
   (forbids); or a provider's traits cannot be known ("cannot verify"),
   as when the instance holds no allocations at all (a required trait is
   then missing, a forbidden one unverifiable).
   The image's traits are its explicit ``trait:`` properties and those its
   other properties imply (``hw_disk_bus=ide`` →
   ``COMPUTE_STORAGE_BUS_IDE``, :mod:`virtdriver.claims.image_traits`),
   checked alike; each refusal names the property behind each trait.
   Traits the current image already requires or forbids are not checked
   again: they were honoured when the instance was placed.

An image with the same properties as the current one always passes (when
no ``disk_format`` is given: the instance's own disk format is not
known, so a given one is always checked).
Providers come from a small protocol (a mapping or a callable, see
:data:`Providers`), so Placement, a provider tree or a report file can
answer; :func:`providers_from_tree_json` reads ``virtdriver report
--format json``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, NamedTuple

from virtdriver.claims.device_request import affinity_policy, asks_devices
from virtdriver.claims.constraints import numa_constraints
from virtdriver.claims.consumption import consumption
from virtdriver.claims.extra_specs import cpus_text, flavor_traits
from virtdriver.claims.image_traits import ImageTraits, image_traits
from virtdriver.claims.model import (
    ClaimError, Instance, InvalidRequest, NUMARequest)

NUMA, RESOURCES, TRAITS, INVALID = "numa", "resources", "traits", "invalid"
KINDS = (NUMA, RESOURCES, TRAITS, INVALID)


@dataclass(frozen=True)
class Conflict:
    """One reason a rebuild is refused.

    Attributes:
        kind: one of :data:`KINDS`.
        message: one line: what differs or is missing, then "; " and what
            to do.
        details: JSON-ready facts behind the message (which fields, which
            traits on which providers).
    """

    kind: str
    message: str
    details: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "details", MappingProxyType(
            dict(self.details)))

    def as_dict(self) -> dict[str, Any]:
        """``{"kind", "message", **details}``, as the CLI prints it."""
        return {"kind": self.kind, "message": self.message,
                **dict(self.details)}


class RebuildRefused(ClaimError):
    """A rebuild refused, with every reason.

    Attributes:
        instance_uuid: the instance.
        conflicts: every :class:`Conflict` (never empty).
    """

    def __init__(self, instance_uuid: str, conflicts: list[Conflict]) -> None:
        self.instance_uuid = instance_uuid
        self.conflicts = tuple(conflicts)
        if not self.conflicts:
            raise ValueError("RebuildRefused needs at least one conflict")
        super().__init__(
            f"rebuild of instance {instance_uuid} refused "
            f"({len(self.conflicts)} reason"
            f"{'s' if len(self.conflicts) > 1 else ''}):\n"
            + "\n".join(f"  {c.kind}: {c.message}" for c in self.conflicts))


class ProviderInfo(NamedTuple):
    """What the trait check needs to know about one resource provider.

    Attributes:
        traits: its traits.
        root_uuid: the root of its tree; ``None`` (or its own uuid) when it
            is a root.
        name: its name, for messages (optional).
    """

    traits: frozenset[str]
    root_uuid: str | None = None
    name: str | None = None


#: Where provider facts come from: a mapping ``uuid -> ProviderInfo`` (or
#: a ``(traits, root_uuid[, name])`` tuple), or a callable taking a uuid
#: and returning one, or ``None`` / raising ``LookupError`` when the
#: provider is not known.  A provider not known is never a crash: it is a
#: "cannot verify" conflict when its traits matter.
Providers = Mapping[str, Any] | Callable[[str], Any]


class ProviderDocumentError(ClaimError):
    """A provider tree document (``report --format json``) is unusable."""


def rebuild_conflicts(instance: Instance,
                      new_image_properties: Mapping[str, Any],
                      providers: Providers, *,
                      disk_format: str | None = None) -> list[Conflict]:
    """Every reason ``instance`` may not be rebuilt with the new image.

    ``disk_format`` is the new image's (``qcow2``…), when known: its
    ``COMPUTE_IMAGE_TYPE_*`` trait is then checked like the others.
    Pure: reads its arguments (and calls ``providers`` if it is callable),
    changes nothing.  An empty list means the rebuild may go ahead.
    """
    old_props = dict(instance.image_properties)
    new_props = dict(new_image_properties or {})
    if new_props == old_props and disk_format is None:
        return []
    conflicts: list[Conflict] = []
    flavor = instance.flavor
    old = _constraints(flavor, old_props, "current", conflicts)
    new = _constraints(flavor, new_props, "new", conflicts)
    if old is not _BAD and new is not _BAD:
        conflicts.extend(_numa_conflicts(old, new))
        conflicts.extend(_resource_conflicts(flavor, old, new))
        conflicts.extend(_device_policy(flavor, old_props, new_props))
    conflicts.extend(_trait_conflicts(instance, old_props, new_props,
                                      providers, disk_format))
    return conflicts


def check_rebuild(instance: Instance, new_image_properties: Mapping[str, Any],
                  providers: Providers, *,
                  disk_format: str | None = None) -> None:
    """Raise :class:`RebuildRefused` unless the rebuild may go ahead."""
    conflicts = rebuild_conflicts(instance, new_image_properties, providers,
                                  disk_format=disk_format)
    if conflicts:
        raise RebuildRefused(instance.uuid, conflicts)


_BAD = object()


def _constraints(flavor, props, which: str, conflicts: list[Conflict]):
    try:
        return numa_constraints(flavor, props)
    except InvalidRequest as exc:
        for problem in exc.problems:
            message = (f"new image: {problem.message}" if which == "new" else
                       f"current image (the instance's constraints cannot "
                       f"be compared): {problem.message}")
            conflicts.append(Conflict(INVALID, message, {
                "image": which, "keys": dict(problem.keys)}))
        return _BAD


# -- NUMA --------------------------------------------------------------------

def _device_policy(flavor, old_props, new_props) -> list[Conflict]:
    """The devices the instance holds were chosen for its image's
    ``hw_pci_numa_affinity_policy``: a new one is a NUMA change."""
    if not asks_devices(flavor.extra_specs):
        return []
    try:
        old = affinity_policy(flavor.extra_specs, old_props)
        new = affinity_policy(flavor.extra_specs, new_props)
    except InvalidRequest as exc:
        return [Conflict(INVALID, f"new image: {p.message}", {
            "image": "new", "keys": dict(p.keys)}) for p in exc.problems]
    if old == new:
        return []
    change = {"field": "device NUMA affinity policy",
              "old": old or "alias's", "new": new or "alias's"}
    return [Conflict(NUMA, (
        f"the new image changes the device NUMA affinity policy: "
        f"{change['old']} → {change['new']}; the devices the instance "
        "holds were chosen for the old one: rebuild with the same "
        "hw_pci_numa_affinity_policy"), {"changes": [change]})]


def _numa_conflicts(old: NUMARequest | None, new: NUMARequest | None
                    ) -> list[Conflict]:
    changes = numa_changes(old, new)
    if not changes:
        return []
    listed = ", ".join(f"{c['field']} {c['old']} → {c['new']}"
                       for c in changes)
    return [Conflict(NUMA, (
        f"the new image changes the instance's NUMA constraints: {listed}; "
        "rebuild with an image whose NUMA properties give the same "
        "constraints with this flavor, or resize to change them"),
        {"changes": changes})]


def numa_changes(old: NUMARequest | None, new: NUMARequest | None
                 ) -> list[dict[str, str]]:
    """Each field that differs between two requests: ``{"field", "old",
    "new"}`` with values as text (``none`` for no topology or no value)."""
    before, after = _fields(old), _fields(new)
    if old is None or new is None or len(old.cells) != len(new.cells):
        # Different node counts: per-node fields would only repeat that.
        before = {k: v for k, v in before.items() if not k.startswith("node")}
        after = {k: v for k, v in after.items() if not k.startswith("node")}
    return [{"field": k, "old": before.get(k, "none"),
             "new": after.get(k, "none")}
            for k in dict.fromkeys([*before, *after])
            if before.get(k, "none") != after.get(k, "none")]


_DEFAULTS = {"cpu_policy": "shared", "cpu_thread_policy": "none",
             "emulator_threads_policy": "none", "page_size": "none",
             "realtime_cpus": "none", "locked_memory": "false"}


def _fields(request: NUMARequest | None) -> dict[str, str]:
    if request is None:
        # No topology: the guest floats on shared CPUs and small pages.
        return {"numa_nodes": "none", **_DEFAULTS}
    fields = {"numa_nodes": str(len(request.cells))}
    for cell in request.cells:
        fields[f"node{cell.id}.cpus"] = cpus_text(cell.cpus)
        fields[f"node{cell.id}.memory_mb"] = str(cell.memory_mb)
        fields[f"node{cell.id}.dedicated_cpus"] = cpus_text(
            cell.dedicated_cpus)
    page = request.page_size
    fields.update({
        "cpu_policy": request.cpu_policy,
        "cpu_thread_policy": request.cpu_thread_policy or "none",
        "emulator_threads_policy": request.emulator_threads_policy or "none",
        "page_size": (f"{page} KiB" if isinstance(page, int)
                      else page or "none"),
        "realtime_cpus": cpus_text(request.realtime_cpus),
        "locked_memory": "true" if request.locked_memory else "false"})
    return fields


# -- resources ---------------------------------------------------------------

def _resource_conflicts(flavor, old, new) -> list[Conflict]:
    try:
        before, after = consumption(flavor, old), consumption(flavor, new)
    except InvalidRequest as exc:
        return [Conflict(INVALID, f"flavor: {p.message}",
                         {"image": "both", "keys": dict(p.keys)})
                for p in exc.problems]
    changes = [{"resource_class": rc, "old": before.get(rc, 0),
                "new": after.get(rc, 0)}
               for rc in sorted(set(before) | set(after))
               if before.get(rc, 0) != after.get(rc, 0)]
    if not changes:
        return []
    listed = ", ".join(f"{c['resource_class']} {c['old']} → {c['new']}"
                       for c in changes)
    return [Conflict(RESOURCES, (
        f"the new image changes what the instance consumes in Placement: "
        f"{listed}; a rebuild keeps the allocations as they are, so resize "
        "(or rebuild with an image that keeps them) instead"),
        {"changes": changes})]


# -- traits ------------------------------------------------------------------

def _trait_conflicts(instance: Instance, old_props, new_props,
                     providers: Providers, disk_format: str | None
                     ) -> list[Conflict]:
    new = image_traits(new_props, disk_format)
    conflicts = [Conflict(INVALID, f"new image: {p.message}",
                          {"image": "new", "keys": dict(p.keys)})
                 for p in new.problems]
    old = image_traits(old_props)
    required = new.required - old.required
    forbidden = new.forbidden - old.forbidden
    flavor_required, flavor_forbidden = flavor_traits(
        instance.flavor.extra_specs)
    for trait in sorted(required & flavor_forbidden):
        conflicts.append(Conflict(TRAITS, (
            f"the new image requires {trait} ({new.implied_by(trait)}) but "
            f"the flavor forbids it (trait:{trait}=forbidden); remove the "
            "requirement from the image or use another flavor"),
            {"trait": trait, "image": "required", "flavor": "forbidden"}))
    for trait in sorted(forbidden & flavor_required):
        conflicts.append(Conflict(TRAITS, (
            f"the new image forbids {trait} ({new.implied_by(trait)}) but "
            f"the flavor requires it (trait:{trait}=required); remove the "
            "prohibition from the image or use another flavor"),
            {"trait": trait, "image": "forbidden", "flavor": "required"}))
    if required or forbidden:
        conflicts.extend(_provider_conflicts(instance, required, forbidden,
                                             providers, new))
    return conflicts


def _provider_conflicts(instance: Instance, required: frozenset[str],
                        forbidden: frozenset[str], providers: Providers,
                        asked: ImageTraits) -> list[Conflict]:
    """Check image traits against the allocated providers and their roots."""
    lookup = provider_lookup(providers)
    roles: dict[str, str] = {}     # uuid -> how it counts
    known: dict[str, ProviderInfo] = {}
    for uuid in instance.allocations:
        roles[uuid] = "allocated " + ", ".join(
            f"{rc}={n}" for rc, n in sorted(instance.allocations[uuid].items()))
    for uuid in list(roles):
        info = lookup(uuid)
        if info is None:
            continue
        known[uuid] = info
        root = info.root_uuid
        if root and root != uuid and root not in roles:
            roles[root] = f"root of {info.name or uuid}"
            root_info = lookup(root)
            if root_info is not None:
                known[root] = root_info
    unknown = [u for u in roles if u not in known]
    have = frozenset().union(*(i.traits for i in known.values()))
    missing = sorted(required - have)
    present = {u: sorted(forbidden & i.traits) for u, i in known.items()
               if forbidden & i.traits}
    conflicts = []
    implied_by = {t: asked.implied_by(t) for t in sorted(required | forbidden)}
    if missing and not unknown:
        where = "; ".join(f"{_label(u, known[u])} ({roles[u]}) lacks "
                          + ", ".join(sorted(set(missing) - known[u].traits))
                          for u in known) or "the instance holds no allocations"
        wanted = ", ".join(f"{t} ({implied_by[t]})" for t in missing)
        conflicts.append(Conflict(TRAITS, (
            f"the new image requires {wanted}, which none of the "
            "providers the instance holds allocations against nor their "
            f"roots has: {where}; rebuild "
            "with an image those providers satisfy, or move the instance "
            "to a host that has the traits"),
            {"missing": missing,
             "implied_by": {t: implied_by[t] for t in missing},
             "providers": {
                u: {"name": known[u].name, "role": roles[u],
                    "missing": sorted(set(missing) - known[u].traits)}
                for u in known}}))
    if present:
        where = "; ".join(f"{_label(u, known[u])} ({roles[u]}) has "
                          + ", ".join(t) for u, t in present.items())
        named = sorted(set().union(*present.values()))
        conflicts.append(Conflict(TRAITS, (
            f"the new image forbids trait(s) the instance's providers have: "
            f"{where} (forbidden by "
            + ", ".join(implied_by[t] for t in named)
            + "); rebuild with an image that does not forbid them, or "
            "move the instance to a host without them"),
            {"forbidden_present": named,
             "implied_by": {t: implied_by[t] for t in named},
             "providers": {u: {"name": known[u].name, "role": roles[u],
                               "present": t} for u, t in present.items()}}))
    if forbidden and not instance.allocations:
        conflicts.append(_no_allocations(sorted(forbidden), implied_by))
    for uuid in unknown:
        if not (missing or forbidden):
            break
        wanted = [*(f"{t} (required)" for t in missing),
                  *(f"{t} (forbidden)" for t in sorted(forbidden))]
        conflicts.append(Conflict(TRAITS, (
            f"cannot verify {', '.join(wanted)} on provider {uuid} "
            f"({roles[uuid]}): its traits are not known; give them (e.g. "
            "--providers with a tree that has this provider) or read them "
            "from Placement"),
            {"provider": uuid, "role": roles[uuid], "unverified": {
                "required": missing, "forbidden": sorted(forbidden)}}))
    return conflicts


def _no_allocations(forbidden: list[str], implied_by: Mapping[str, str]
                    ) -> Conflict:
    """A forbidden trait cannot be checked on no provider at all."""
    listed = ", ".join(f"{t} ({implied_by[t]})" for t in forbidden)
    return Conflict(TRAITS, (
        f"cannot verify that the instance's providers lack {listed}: the "
        "instance holds no allocations, so which providers it runs on is "
        "not known; give the allocations it holds (\"allocations\" in the "
        "instance document, or its consumer's in Placement with "
        "--placement-url)"),
        {"provider": None, "role": "no allocations", "unverified": {
            "required": [], "forbidden": forbidden}})


def provider_lookup(providers: Providers
                    ) -> Callable[[str], ProviderInfo | None]:
    """``providers`` (any :data:`Providers` form) as one callable uuid →
    :class:`ProviderInfo` or ``None`` (not known)."""

    def lookup(uuid: str) -> ProviderInfo | None:
        try:
            value = (providers.get(uuid) if isinstance(providers, Mapping)
                     else providers(uuid))
        except LookupError:
            return None
        return None if value is None else _info(value)
    return lookup


def _info(value: Any) -> ProviderInfo:
    if isinstance(value, ProviderInfo):
        return value._replace(traits=frozenset(value.traits))
    if isinstance(value, Mapping):
        return ProviderInfo(frozenset(value.get("traits", ())),
                            value.get("root_uuid"), value.get("name"))
    traits, root, *rest = value
    return ProviderInfo(frozenset(traits), root, rest[0] if rest else None)


def _label(uuid: str, info: ProviderInfo) -> str:
    return f"provider {info.name!r} ({uuid})" if info.name \
        else f"provider {uuid}"


# -- provider documents ------------------------------------------------------

def providers_from_tree_json(document: Mapping[str, Any] | str | bytes
                             ) -> dict[str, ProviderInfo]:
    """Provider facts from ``virtdriver report --format json`` output.

    Reads ``providers[].uuid``, ``name``, ``traits`` and the root
    (``root_provider_uuid``, else found through ``parent_provider_uuid``);
    other keys are ignored.

    Raises:
        ProviderDocumentError: not JSON, no ``providers`` list, or a
            provider without a string ``uuid`` or with ``traits`` that are
            not a list of strings; the message names the provider.
    """
    if isinstance(document, (str, bytes)):
        try:
            document = json.loads(document)
        except ValueError as exc:
            raise ProviderDocumentError(
                f"provider tree document is not JSON ({exc}); give the "
                "output of 'virtdriver report --format json'") from None
    entries = document.get("providers") if isinstance(document, Mapping) \
        else None
    if not isinstance(entries, list):
        raise ProviderDocumentError(
            'provider tree document has no "providers" list; give the '
            "output of 'virtdriver report --format json'")
    parents: dict[str, str | None] = {}
    facts: dict[str, tuple] = {}
    for position, entry in enumerate(entries):
        where = f"providers[{position}]"
        if not isinstance(entry, Mapping) or not isinstance(
                entry.get("uuid"), str):
            raise ProviderDocumentError(
                f"provider tree document: {where} has no string \"uuid\"; "
                "give each provider its uuid")
        uuid, traits = entry["uuid"], entry.get("traits", [])
        if not isinstance(traits, list) or not all(
                isinstance(t, str) for t in traits):
            raise ProviderDocumentError(
                f"provider tree document: {where} ({uuid}) \"traits\" is not "
                "a list of strings; list the trait names")
        parents[uuid] = entry.get("parent_provider_uuid")
        facts[uuid] = (frozenset(traits), entry.get("root_provider_uuid"),
                       entry.get("name"))
    result = {}
    for uuid, (traits, root, name) in facts.items():
        if not root:
            root, seen = uuid, {uuid}
            while parents.get(root) and parents[root] not in seen:
                root = parents[root]
                seen.add(root)
        result[uuid] = ProviderInfo(traits, None if root == uuid else root,
                                    name if isinstance(name, str) else None)
    return result
