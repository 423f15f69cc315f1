"""The rebuild check against Placement: its facts, and its own answer.

:func:`rebuild_check_with_placement` runs
:func:`virtdriver.claims.rebuild.rebuild_conflicts` on what Placement holds
(the instance's allocations, each provider's traits and root), then asks
Placement the trait question the way its API supports and compares.

Placement's answer
------------------
The question is the one the rebuild rule checks: the traits the new image
requires or forbids that the current image did not (:func:`asked_traits`)
— its explicit ``trait:`` properties and the traits its other properties
and its disk format imply (``hw_disk_bus=ide`` →
``COMPUTE_STORAGE_BUS_IDE``, ``disk_format=qcow2`` →
``COMPUTE_IMAGE_TYPE_QCOW2``, :mod:`virtdriver.claims.image_traits`).
The instance's own disk format is not known, so a given one is always
asked.
For each tree the instance holds allocations in, one
``GET /resource_providers?in_tree=<root>&required=T1,!T2`` (microversion
1.14 for ``in_tree``, 1.22 for ``!``).  Placement applies ``required`` to
each provider **on its own**: it returns the providers of the tree that
have every required trait and none of the forbidden ones.  Placement
refuses a filter naming a trait it does not know; then one
``GET /traits`` finds which: a required one is on no provider (nothing is
returned), a forbidden one is left out of the filter.

* **Placement allows** the rebuild when every provider the instance holds
  allocations against is returned for its tree — and the instance holds
  at least one allocation.  A provider
  Placement does not have is never returned.
* **The rule allows** it when ``rebuild_conflicts`` reports no provider
  trait conflict (a required trait missing, a forbidden one present, or
  "cannot verify"); other conflicts (NUMA, resources, invalid, a flavor
  contradicting the image) are not Placement questions and take no part.
* **The answers differ** when those two verdicts differ, or when a
  provider's membership in Placement's answer contradicts the traits read
  for it (``mismatched``: the traits changed between the reads, or the
  provider facts did not come from this Placement).  Verdicts differ by
  design where the rule is wider than a per-provider filter: a required
  trait only on the root (host-level traits) or spread over several
  allocated providers — the rule allows, Placement does not; a forbidden
  trait on a root the instance holds nothing against — the rule refuses,
  Placement allows.  The rule decides; the answer only reports.

Requests, all reads: ``GET /allocations/{instance}`` only when the
instance carries none; one ``GET /resource_providers?in_tree=<uuid>`` per
tree (names and roots of its providers) and one ``GET …/traits`` per
provider the rule looks at (allocated ones and their roots); one filtered
listing per tree — again, after one ``GET /traits``, only if Placement
refused a trait name it does not know.  An instance on a NUMA cell and a
NIC of one host: six.  When the image asks no new trait nothing is sent;
a provider key that is not a UUID is not asked about (Placement cannot
have it).  Every failure is a
:class:`~virtdriver.placement.errors.PlacementError`
(``PlacementUnavailable`` when Placement cannot answer).
"""

from __future__ import annotations

import uuid as uuidlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, NamedTuple

from virtdriver.claims.image_traits import image_traits
from virtdriver.claims.model import Instance
from virtdriver.claims.rebuild import (
    TRAITS, Conflict, ProviderInfo, Providers, provider_lookup,
    rebuild_conflicts)
from virtdriver.placement.client import FEATURES, PlacementClient, version_text
from virtdriver.placement.consumer import read_consumer
from virtdriver.placement.errors import (
    MicroversionUnsupported, PlacementRequestError, ProviderNotFound,
    UnknownName)

#: The details keys of a ``traits`` conflict about providers (as opposed
#: to a flavor contradicting the image), see ``claims/rebuild.py``.
_PROVIDER_KEYS = frozenset({"missing", "forbidden_present", "unverified"})


def placement_allocations(client: PlacementClient, instance_uuid: str
                          ) -> dict[str, dict[str, int]]:
    """``GET /allocations/{instance_uuid}`` as ``{rp uuid: {rc: amount}}``
    (empty when Placement holds none for that consumer).

    Raises:
        PlacementRequestError: the answer is not Placement's allocations.
        PlacementError: the request failed.
    """
    return read_consumer(client, instance_uuid).plain()


def placement_providers(client: PlacementClient, uuids: Iterable[str]
                        ) -> dict[str, ProviderInfo | None]:
    """What the rebuild rule needs of ``uuids`` and their roots, from
    Placement: a mapping ``uuid → ProviderInfo(traits, root_uuid, name)``
    (``root_uuid`` ``None`` for a root), or ``None`` for a provider
    Placement does not have.

    Each tree is listed once (``GET /resource_providers?in_tree=<uuid>``:
    names and roots) and each provider's traits read once, roots included.

    Raises:
        PlacementError: a request failed.
    """
    listed: dict[str, dict] = {}     # every provider of the trees listed
    absent: set[str] = set()
    result: dict[str, ProviderInfo | None] = {}

    def info(uuid: str) -> ProviderInfo | None:
        if uuid in result:
            return result[uuid]
        if not _is_uuid(uuid):
            absent.add(uuid)    # Placement names providers by uuid only
        if uuid not in listed and uuid not in absent:
            tree = client.list_providers(in_tree=uuid)
            listed.update({p["uuid"]: p for p in tree
                           if isinstance(p, dict) and "uuid" in p})
            if uuid not in listed:
                absent.add(uuid)
        found = None
        if uuid in listed:
            try:
                _, traits = client.get_part(uuid, "traits")
            except ProviderNotFound:
                traits = None       # deleted since the listing
            if traits is not None:
                root = listed[uuid].get("root_provider_uuid")
                found = ProviderInfo(frozenset(traits),
                                     None if root in (None, uuid) else root,
                                     listed[uuid].get("name"))
        result[uuid] = found
        return found

    for uuid in dict.fromkeys(uuids):
        found = info(uuid)
        if found is not None and found.root_uuid:
            info(found.root_uuid)
    return result


def asked_traits(instance: Instance, new_image_properties: Mapping[str, Any],
                 disk_format: str | None = None
                 ) -> tuple[frozenset[str], frozenset[str]]:
    """The traits the rebuild rule checks on providers: those the new image
    (its properties and ``disk_format``, when given) requires and forbids
    that the current image's properties did not (valid names)."""
    new = image_traits(new_image_properties, disk_format)
    old = image_traits(instance.image_properties)
    return new.required - old.required, new.forbidden - old.forbidden


@dataclass(frozen=True)
class PlacementAnswer:
    """Placement's own answer to the rebuild's trait question, compared
    with the rule's (the module docstring defines both).

    Attributes:
        asked: whether there was a question (new image traits).
        required, forbidden: the traits asked.
        query: the ``required=`` value sent (``""`` when none was).
        allocations: the allocations the check used.
        allocations_from: ``"instance"`` (given) or ``"placement"`` (read).
        returned: per tree root, the providers Placement returned.
        unknown_providers: allocated providers Placement does not have.
        unknown_traits: required traits Placement does not know.
        placement_allowed: Placement's verdict.
        rule_allowed: the rule's trait verdict.
        mismatched: providers whose membership in Placement's answer
            contradicts the traits read for them.
        differences: one line per way the answers differ, each ending
            with what to make of it.
    """

    asked: bool
    required: tuple[str, ...] = ()
    forbidden: tuple[str, ...] = ()
    query: str = ""
    allocations: Mapping[str, Mapping[str, int]] = field(
        default_factory=dict)
    allocations_from: str = "instance"
    returned: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    unknown_providers: tuple[str, ...] = ()
    unknown_traits: tuple[str, ...] = ()
    placement_allowed: bool = True
    rule_allowed: bool = True
    mismatched: tuple[str, ...] = ()
    differences: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "allocations", MappingProxyType(
            {u: MappingProxyType(dict(r))
             for u, r in dict(self.allocations).items()}))
        object.__setattr__(self, "returned",
                           MappingProxyType(dict(self.returned)))

    @property
    def agrees(self) -> bool:
        """The two answers are the same (no difference to report)."""
        return not self.differences

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready, for ``rebuild-check --format json``."""
        return {"asked": self.asked, "agrees": self.agrees,
                "placement_allowed": self.placement_allowed,
                "rule_allowed": self.rule_allowed,
                "required": list(self.required),
                "forbidden": list(self.forbidden), "query": self.query,
                "allocations_from": self.allocations_from,
                "allocations": {u: dict(r)
                                for u, r in self.allocations.items()},
                "returned": {r: list(u) for r, u in self.returned.items()},
                "unknown_providers": list(self.unknown_providers),
                "unknown_traits": list(self.unknown_traits),
                "mismatched": list(self.mismatched),
                "differences": list(self.differences)}


def rule_allows(conflicts: Iterable[Conflict]) -> bool:
    """The rule's trait verdict: no ``traits`` conflict about providers."""
    return not any(c.kind == TRAITS and _PROVIDER_KEYS & set(c.details)
                   for c in conflicts)


def placement_answer(client: PlacementClient, instance: Instance,
                     new_image_properties: Mapping[str, Any], *,
                     providers: Providers | None = None,
                     conflicts: Sequence[Conflict] | None = None,
                     allocations_from: str = "instance",
                     disk_format: str | None = None) -> PlacementAnswer:
    """Ask Placement the rebuild's trait question and compare its answer
    with ``rebuild_conflicts``' verdict.

    Args:
        instance: with the allocations to check (as Placement holds them).
        providers: the provider facts the rule used; default: read with
            :func:`placement_providers`.
        conflicts: ``rebuild_conflicts``' result for the same arguments, if
            already computed (else it is computed here).
        allocations_from: recorded in the answer.
        disk_format: the new image's, when known: its
            ``COMPUTE_IMAGE_TYPE_*`` trait is asked like the others.

    Raises:
        MicroversionUnsupported: forbidden traits asked of a Placement
            older than 1.22.
        PlacementError: a request failed.
    """
    required, forbidden = asked_traits(instance, new_image_properties,
                                       disk_format)
    allocations = dict(instance.allocations)
    if not (required or forbidden):
        return PlacementAnswer(False, allocations=allocations,
                               allocations_from=allocations_from)
    _need(client, "in_tree")
    if forbidden:
        _need(client, "forbidden_traits")
    if providers is None:
        providers = placement_providers(client, allocations)
    lookup = provider_lookup(providers)
    if conflicts is None:
        conflicts = rebuild_conflicts(instance, new_image_properties,
                                      providers, disk_format=disk_format)
    infos = {u: lookup(u) for u in allocations}
    root_of = {u: (i.root_uuid or u) for u, i in infos.items() if i}
    for root in set(root_of.values()):
        infos.setdefault(root, lookup(root))
    query, returned, unknown_traits = _ask(
        client, list(dict.fromkeys(root_of.values())), required, forbidden)
    passes = {u: root in returned and u in returned[root]
              for u, root in root_of.items()}
    # No allocation: no provider to pass, whatever the traits asked.
    placement_ok = (all(passes.get(u, False) for u in allocations)
                    and bool(allocations))
    rule_ok = rule_allows(conflicts)
    mismatched = []
    for uuid, info in infos.items():
        root = root_of.get(uuid, uuid)
        if info is None or root not in returned:
            continue
        predicted = required <= info.traits and not forbidden & info.traits
        if predicted != (uuid in returned[root]):
            mismatched.append(uuid)
    answer = _Facts(required, forbidden, query, allocations, infos,
                    root_of, returned)
    differences = [answer.mismatch(u) for u in mismatched]
    if placement_ok != rule_ok:
        differences.insert(0, answer.verdicts(placement_ok, conflicts))
    return PlacementAnswer(
        True, tuple(sorted(required)), tuple(sorted(forbidden)), query,
        allocations, allocations_from,
        {r: tuple(sorted(u)) for r, u in returned.items()},
        tuple(u for u in allocations if infos[u] is None),
        tuple(unknown_traits), placement_ok, rule_ok, tuple(mismatched),
        tuple(differences))


class RebuildCheck(NamedTuple):
    """What ``rebuild-check --placement-url`` reports."""

    conflicts: list[Conflict]
    answer: PlacementAnswer


def rebuild_check_with_placement(client: PlacementClient, instance: Instance,
                                 new_image_properties: Mapping[str, Any], *,
                                 disk_format: str | None = None
                                 ) -> RebuildCheck:
    """The rebuild check on Placement's facts, and Placement's own answer.

    ``instance`` is read from INSTANCE.json: its uuid, flavor and current
    image are used as given; its allocations too, unless it has none —
    then they are read from Placement (``GET /allocations/{uuid}``).  The
    providers' traits and roots always come from Placement.  ``disk_format``
    is the new image's (IMAGE.json's), when known: its
    ``COMPUTE_IMAGE_TYPE_*`` trait is checked and asked like the traits
    the properties imply.  When the new image asks no new trait, no
    provider is consulted and nothing is sent.

    Returns:
        ``(conflicts, answer)``: ``rebuild_conflicts``' list (empty: the
        rebuild may go ahead) and the :class:`PlacementAnswer`.

    Raises:
        PlacementError: a request failed (``PlacementUnavailable`` when
            Placement cannot answer).
    """
    required, forbidden = asked_traits(instance, new_image_properties,
                                       disk_format)
    if not (required or forbidden):
        conflicts = rebuild_conflicts(instance, new_image_properties, {},
                                      disk_format=disk_format)
        return RebuildCheck(conflicts, PlacementAnswer(
            False, allocations=instance.allocations))
    source = "instance"
    if not instance.allocations:
        source = "placement"
        instance = Instance(instance.uuid, instance.flavor,
                            instance.image_properties,
                            placement_allocations(client, instance.uuid))
    providers = placement_providers(client, instance.allocations)
    conflicts = rebuild_conflicts(instance, new_image_properties, providers,
                                  disk_format=disk_format)
    return RebuildCheck(conflicts, placement_answer(
        client, instance, new_image_properties, providers=providers,
        conflicts=conflicts, allocations_from=source,
        disk_format=disk_format))


# -- asking ------------------------------------------------------------------

def _ask(client: PlacementClient, roots: list[str], required: frozenset[str],
         forbidden: frozenset[str]
         ) -> tuple[str, dict[str, frozenset[str]], list[str]]:
    """One filtered listing per tree: ``(query, {root: uuids}, unknown
    required traits)``; a trait Placement does not know is found out from
    its refusal and ``GET /traits``, then the trees are asked again."""
    known: frozenset[str] | None = None
    while True:
        want = required if known is None else required & known
        unknown = sorted(required - want)
        drop = frozenset() if known is None else forbidden - known
        query = ",".join([*sorted(want),
                          *(f"!{t}" for t in sorted(forbidden - drop))])
        if unknown:         # nothing has a trait Placement does not know
            return query, {r: frozenset() for r in roots}, unknown
        try:
            returned = {}
            for root in roots:
                filters = {"in_tree": root}
                if query:
                    filters["required"] = query
                returned[root] = frozenset(
                    p["uuid"] for p in client.list_providers(**filters)
                    if isinstance(p, dict) and "uuid" in p)
            return query, returned, []
        except UnknownName:
            if known is not None:
                raise
            known = _existing_traits(client, required | forbidden)


def _existing_traits(client: PlacementClient, names: frozenset[str]
                     ) -> frozenset[str]:
    body = client.request("GET", "/traits",
                          params={"name": "in:" + ",".join(sorted(names))})
    traits = body.get("traits") if isinstance(body, dict) else None
    if not isinstance(traits, list):
        raise _bad_answer("/traits", "no traits list")
    return frozenset(t for t in traits if isinstance(t, str))


def _need(client: PlacementClient, feature: str) -> None:
    if not client.has(feature):
        version, why = FEATURES[feature]
        raise MicroversionUnsupported(
            f"Placement at {client.endpoint} speaks microversion "
            f"{client.microversion}; asking it the rebuild's trait question "
            f"needs {version_text(version)} ({why}); upgrade Placement",
            method="GET", path="/resource_providers")


def _is_uuid(text: str) -> bool:
    try:
        uuidlib.UUID(text)
    except (ValueError, TypeError, AttributeError):
        return False
    return True


def _bad_answer(path: str, what: str) -> PlacementRequestError:
    return PlacementRequestError(
        f"GET {path}: Placement's answer has {what}; check that the URL is "
        "Placement's", method="GET", path=path)


# -- explaining --------------------------------------------------------------

@dataclass(frozen=True)
class _Facts:
    """What one comparison saw, for its messages."""

    required: frozenset[str]
    forbidden: frozenset[str]
    query: str
    allocations: Mapping[str, Mapping[str, int]]
    infos: Mapping[str, ProviderInfo | None]
    root_of: Mapping[str, str]
    returned: Mapping[str, frozenset[str]]

    def label(self, uuid: str) -> str:
        info = self.infos.get(uuid)
        return f"provider {info.name!r} ({uuid})" if info and info.name \
            else f"provider {uuid}"

    def why_left_out(self, uuid: str) -> str:
        info = self.infos.get(uuid)
        if info is None:
            return "Placement does not have it"
        lacks = sorted(self.required - info.traits)
        has = sorted(self.forbidden & info.traits)
        return "; ".join([*(["lacks " + ", ".join(lacks)] if lacks else []),
                          *(["has " + ", ".join(has)] if has else [])]) \
            or "Placement left it out"

    def verdicts(self, placement_ok: bool,
                 conflicts: Sequence[Conflict]) -> str:
        filtered = f"required={self.query}" if self.query else \
            "the trait filter"
        if not placement_ok:
            out = [u for u in self.allocations
                   if not (u in self.root_of
                           and u in self.returned.get(self.root_of[u], ()))]
            listed = "; ".join(f"{self.label(u)} ({self.why_left_out(u)})"
                               for u in out) or \
                "the instance holds no allocation"
            roots = [self.label(r) for r in sorted(self.returned)
                     if r in self.returned[r]]
            also = (f" (roots it returns: {', '.join(roots)})"
                    if roots else "")
            advice = ("check the allocations the instance document gives"
                      if any(self.infos.get(u) is None for u in out) else
                      "put the traits on the allocated providers if "
                      "Placement's filter must agree")
            return (f"Placement's answer differs: {filtered} leaves out "
                    f"allocated {listed}{also}, while the rebuild rule "
                    "finds the required traits among the allocated "
                    "providers and their roots; the rule's answer stands "
                    f"(Placement's filter judges each provider alone) — "
                    f"{advice}")
        reasons = " / ".join(c.message.split("; ")[0] for c in conflicts
                             if c.kind == TRAITS
                             and _PROVIDER_KEYS & set(c.details))
        return (f"Placement's answer differs: every allocated provider "
                f"passes {filtered}, but the rebuild rule refuses ("
                f"{reasons}); the rule's answer stands (Placement's filter "
                "does not look at roots the instance holds nothing "
                "against)")

    def mismatch(self, uuid: str) -> str:
        info = self.infos[uuid]
        root = self.root_of.get(uuid, uuid)
        said = "returns" if uuid in self.returned[root] else "leaves out"
        traits = ", ".join(sorted(info.traits)) or "no traits"
        return (f"Placement {said} {self.label(uuid)} for "
                f"required={self.query}, which its traits as read ("
                f"{traits}) contradict; they changed between the reads or "
                "were not read from this Placement — run the check again")
