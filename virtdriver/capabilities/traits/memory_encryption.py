"""Memory-encryption traits (AMD SEV, SEV-ES, SEV-SNP; Intel TDX).

From ``<features>`` of the domain capabilities that count:

* ``HW_CPU_X86_AMD_SEV`` — ``<sev supported='yes'>`` with room for SEV
  guests (``maxGuests`` absent, as in older libvirt, or above 0).
* ``HW_CPU_X86_AMD_SEV_ES`` — ``<sev supported='yes'>`` with
  ``maxESGuests`` above 0; unknown when libvirt does not report
  ``maxESGuests`` (before 8.0).
* ``HW_CPU_X86_AMD_SEV_SNP`` — ``<launchSecurity><enum name='sectype'>``
  lists ``sev-snp``.
* ``HW_CPU_X86_INTEL_TDX`` — ``<tdx supported='yes'>`` or ``sectype``
  lists ``tdx``; unasserted when either element is reported and neither
  shows TDX.

The evidence carries the platform's guest limits ("up to 59 SEV guests,
450 SEV-ES guests, C-bit position 51").
"""

from __future__ import annotations

from collections.abc import Iterator

import os_traits

from virtdriver.capabilities.domain import DomainCapabilities, SEVCaps
from virtdriver.capabilities.traits.domain_facts import (
    Finding, combine, enum_finding)
from virtdriver.capabilities.traits.model import (
    DerivationInputs, TraitFamily, TraitResult, TraitState)

A, U, K = TraitState.ASSERTED, TraitState.UNASSERTED, TraitState.UNKNOWN
_SEV_EL = "features/sev"
_LAUNCH_EL = "features/launchSecurity"


def sev_limits(sev: SEVCaps) -> str:
    """The reported limits in words, e.g. "up to 59 SEV guests, 450 SEV-ES
    guests, C-bit position 51, 1 reduced physical address bit"."""
    guests = [f"{count} {kind} guests" for count, kind in (
        (sev.max_guests, "SEV"), (sev.max_es_guests, "SEV-ES"))
        if count is not None]
    parts = [f"up to {', '.join(guests)}"] if guests else []
    if sev.cbitpos is not None:
        parts.append(f"C-bit position {sev.cbitpos}")
    if sev.reduced_phys_bits is not None:
        plural = "" if sev.reduced_phys_bits == 1 else "s"
        parts.append(f"{sev.reduced_phys_bits} reduced physical address "
                     f"bit{plural}")
    return ", ".join(parts) or "no guest limits"


def _sev_unsupported(sev: SEVCaps) -> Finding | None:
    if sev.supported is None:
        return Finding(K, "do not report <sev>", _SEV_EL)
    if not sev.supported:
        return Finding(U, "mark <sev> unsupported", _SEV_EL)
    return None


def sev_look(caps: DomainCapabilities) -> Finding:
    """AMD SEV: supported, with room for at least one SEV guest."""
    sev = caps.features.sev
    early = _sev_unsupported(sev)
    if early is not None:
        return early
    if sev.max_guests == 0:
        return Finding(U, f"mark <sev> supported but allow no SEV guests "
                       f"({sev_limits(sev)})", f"{_SEV_EL}/maxGuests")
    return Finding(A, f"mark <sev> supported: {sev_limits(sev)}", _SEV_EL)


def sev_es_look(caps: DomainCapabilities) -> Finding:
    """AMD SEV-ES: SEV supported and ``maxESGuests`` above 0."""
    sev = caps.features.sev
    early = _sev_unsupported(sev)
    if early is not None:
        return early
    element = f"{_SEV_EL}/maxESGuests"
    if sev.max_es_guests is None:
        return Finding(K, f"mark <sev> supported without maxESGuests "
                       f"({sev_limits(sev)})", element)
    if sev.max_es_guests == 0:
        return Finding(U, f"mark <sev> supported but allow no SEV-ES guests "
                       f"({sev_limits(sev)})", element)
    return Finding(A, f"mark <sev> supported: {sev_limits(sev)}", element)


def sev_snp_look(caps: DomainCapabilities) -> Finding:
    """AMD SEV-SNP: launch security type ``sev-snp``."""
    return enum_finding("launch_security", "launch security type", "sectype",
                        "sev-snp", caps, element_path=_LAUNCH_EL)


def tdx_look(caps: DomainCapabilities) -> Finding:
    """Intel TDX: ``<tdx supported='yes'>`` or launch security ``tdx``."""
    tdx = caps.features.tdx
    launch = enum_finding("launch_security", "launch security type",
                          "sectype", "tdx", caps, element_path=_LAUNCH_EL)
    if tdx.supported:
        also = (" and list launch security type 'tdx'"
                if launch.state is A else "")
        return Finding(A, f"mark <tdx> supported{also}", "features/tdx")
    if launch.state is A:
        return launch
    if tdx.supported is False:
        return Finding(U, f"mark <tdx> unsupported and {launch.detail}",
                       "features/tdx")
    if launch.state is K:
        return Finding(K, "report neither <tdx> nor <launchSecurity>",
                       "features/tdx")
    return launch


#: trait → how one document shows it.
_LOOKS = {
    os_traits.HW_CPU_X86_AMD_SEV: sev_look,
    os_traits.HW_CPU_X86_AMD_SEV_ES: sev_es_look,
    os_traits.HW_CPU_X86_AMD_SEV_SNP: sev_snp_look,
    os_traits.HW_CPU_X86_INTEL_TDX: tdx_look,
}


def _derive(inputs: DerivationInputs) -> Iterator[TraitResult]:
    for trait, look in _LOOKS.items():
        yield combine(FAMILY, trait, inputs.domains, look)


FAMILY = TraitFamily("memory encryption", frozenset(_LOOKS), _derive)
