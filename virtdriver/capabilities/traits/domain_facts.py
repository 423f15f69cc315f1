"""Combine what several domain capabilities documents say about one trait.

Which documents count is decided by :mod:`.domain_selection`; this module
only merges their answers, with one rule for every domain-derived family:

* **asserted** when any document that counts shows the capability;
* otherwise **unknown** when any of them could not be read, did not report
  the element, or carries no information at all (libvirt's empty
  document) — the unread one might have shown it;
* otherwise **unasserted**: every document was read and none shows it.
  With no documents at all the trait is unknown.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from virtdriver.capabilities.domain import DomainCapabilities
from virtdriver.capabilities.traits.model import (
    DomainReading, Evidence, TraitFamily, TraitResult, TraitState)


@dataclass(frozen=True, slots=True)
class Finding:
    """What one document says about one trait.

    ``detail`` completes the sentence "<document> ..." — e.g. ``"list disk
    bus 'virtio'"`` or ``"do not report TPM devices"``.
    """

    state: TraitState
    detail: str
    element: str | None = None


Look = Callable[[DomainCapabilities], Finding]


def is_informative(caps: DomainCapabilities) -> bool:
    """Whether a document says anything about guests at all.

    libvirt answers some drivers (and its "empty" test document) with
    nothing but a header: no ``<os>``, no devices, no supported CPU mode.
    Such a document is treated as unread, so nothing is asserted or
    unasserted from it.
    """
    cpu = caps.cpu
    return (caps.os.supported is not None
            or any(getattr(caps.devices, name).supported is not None
                   for name in caps.devices.__dataclass_fields__)
            or any(mode.supported for mode in (
                cpu.host_passthrough, cpu.maximum, cpu.host_model,
                cpu.custom)))


def combine(family: TraitFamily, trait: str,
            readings: Sequence[DomainReading], look: Look) -> TraitResult:
    """The trait's state over ``readings``, by the rule in the module doc."""
    found: dict[TraitState, list[Evidence]] = {state: [] for state in
                                               TraitState}
    for reading in readings:
        if reading.caps is None:
            found[TraitState.UNKNOWN].append(Evidence(
                reading.label, f"could not be read: {reading.error}"))
            continue
        if not is_informative(reading.caps):
            found[TraitState.UNKNOWN].append(Evidence(
                reading.label, "report nothing about guests (no os, devices "
                "or CPU modes)", reading.source))
            continue
        finding = look(reading.caps)
        found[finding.state].append(Evidence(
            reading.label, finding.detail, reading.source, finding.element))
    if not readings:
        return family.result(trait, TraitState.UNKNOWN, Evidence(
            "domain capabilities", "were not read for any arch and machine "
            "type"))
    for state in (TraitState.ASSERTED, TraitState.UNKNOWN):
        if found[state]:
            return family.result(trait, state, *found[state])
    return family.result(trait, TraitState.UNASSERTED,
                         *found[TraitState.UNASSERTED])


def enum_finding(support_name: str, what: str, enum: str, value: str,
                 caps: DomainCapabilities, *, element_path: str) -> Finding:
    """Finding for "does ``<support_name>``'s ``<enum name=enum>`` list
    ``value``?" — e.g. ("disk", "disk bus", "bus", "virtio").

    Asserted when the element is supported and lists the value; unasserted
    when it is supported without the value or explicitly unsupported;
    unknown when the document does not have the element.
    """
    support = getattr(caps.devices, support_name, None)
    if support is None:
        support = getattr(caps.features, support_name)
    element = f"{element_path}/enum[@name='{enum}']"
    if support.supported is None:
        return Finding(TraitState.UNKNOWN,
                       f"do not report <{element_path.split('/')[-1]}>",
                       element_path)
    if support.supported is False:
        return Finding(TraitState.UNASSERTED,
                       f"mark <{element_path.split('/')[-1]}> unsupported",
                       element_path)
    values = support.values(enum)
    if value in values:
        return Finding(TraitState.ASSERTED, f"list {what} {value!r}",
                       f"{element}/value")
    listed = ", ".join(values) or "none"
    plural = what + ("es" if what.endswith("s") else "s")
    return Finding(TraitState.UNASSERTED,
                   f"list {plural} {listed} but not {value!r}", element)
