"""Memory-encryption traits (AMD SEV, SEV-ES, SEV-SNP; Intel TDX).

Each trait says "a guest booted with this configuration can be launched
encrypted this way", so the configuration is checked first:

* every one needs ``[libvirt] virt_type = kvm``: SEV and TDX guests are
  launched through KVM ioctls, QEMU's TCG accelerator refuses confidential
  guests, and no other libvirt driver launches them.  Any other virt type
  makes all four unasserted, naming the option.
* ``HW_CPU_X86_INTEL_TDX`` also needs ``[libvirt] cpu_mode =
  host-passthrough``: QEMU's TDX documentation launches a trust domain
  with the host CPU (``-cpu host``) and Nova's TDX support requires
  host-passthrough; that host-model works is not established.  So every
  other mode (host-model, also when ``cpu_mode`` is unset; custom; none)
  makes it unasserted, naming the option.  An unset ``cpu_mode`` with no
  virt type known (the host was not read) decides nothing.

A trait the configuration rules out is unasserted even when the documents
show the hardware; their evidence follows the option's.  Otherwise, from
``<features>`` of the domain capabilities that count:

* ``HW_CPU_X86_AMD_SEV`` — ``<sev supported='yes'>`` with room for SEV
  guests (``maxGuests`` absent, as in older libvirt, or above 0).
* ``HW_CPU_X86_AMD_SEV_ES`` — ``<sev supported='yes'>`` with
  ``maxESGuests`` above 0; unknown when libvirt does not report
  ``maxESGuests`` (before 8.0).
* ``HW_CPU_X86_AMD_SEV_SNP`` — SEV-SNP builds on SEV and runs in the
  SEV-ES ASID range (``maxESGuests``), so ``<sev supported='no'>`` or
  ``maxESGuests`` 0 makes it unasserted; otherwise ``<launchSecurity><enum
  name='sectype'>`` decides: ``sev-snp`` listed (with ``<sev>`` supported)
  asserts it, a list without it unasserts it, no ``<launchSecurity>``
  (libvirt before 10.5) leaves it unknown.
* ``HW_CPU_X86_INTEL_TDX`` — ``<tdx supported='yes'>`` or ``sectype``
  lists ``tdx``; unasserted when either element is reported and neither
  shows TDX.

The evidence carries the platform's guest limits ("up to 59 SEV guests,
450 SEV-ES guests, C-bit position 51").  Not checked, for want of an
input: whether KVM has SEV-SNP or TDX enabled (``kvm_amd.sev_snp``,
``kvm_intel.tdx``), and whether SNP or TDX firmware is installed.
"""

from __future__ import annotations

from collections.abc import Iterator

import os_traits

from virtdriver.capabilities.domain import DomainCapabilities, SEVCaps
from virtdriver.capabilities.traits.config import (
    OPTION_CPU_MODE, OPTION_VIRT_TYPE, TraitConfig)
from virtdriver.capabilities.traits.domain_facts import (
    Finding, combine, enum_finding)
from virtdriver.capabilities.traits.model import (
    DerivationInputs, Evidence, TraitFamily, TraitResult, TraitState)

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
    """AMD SEV-SNP: SEV supported with SEV-ES ASIDs, and launch security
    type ``sev-snp``."""
    sev = caps.features.sev
    if sev.supported is False:
        return Finding(U, "mark <sev> unsupported, and SEV-SNP builds on "
                       "SEV", _SEV_EL)
    if sev.supported and sev.max_es_guests == 0:
        return Finding(U, "mark <sev> supported but allow no SEV-ES guests, "
                       "whose ASIDs SEV-SNP guests use "
                       f"({sev_limits(sev)})", f"{_SEV_EL}/maxESGuests")
    launch = enum_finding("launch_security", "launch security type",
                          "sectype", "sev-snp", caps,
                          element_path=_LAUNCH_EL)
    if launch.state is not A:
        return launch
    if not sev.supported:
        return Finding(K, f"{launch.detail} but do not report <sev>, which "
                       "SEV-SNP builds on", _SEV_EL)
    return Finding(A, f"{launch.detail} and mark <sev> supported: "
                   f"{sev_limits(sev)}", launch.element)


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


#: trait → its name in evidence.
_NAMES = {
    os_traits.HW_CPU_X86_AMD_SEV: "SEV",
    os_traits.HW_CPU_X86_AMD_SEV_ES: "SEV-ES",
    os_traits.HW_CPU_X86_AMD_SEV_SNP: "SEV-SNP",
    os_traits.HW_CPU_X86_INTEL_TDX: "TDX",
}
#: The one CPU mode TDX guests are counted for (module doc).
TDX_CPU_MODE = "host-passthrough"


def config_refusals(trait: str, config: TraitConfig) -> list[Evidence]:
    """Why guests of ``config`` cannot use ``trait`` at all (module doc);
    empty when the configuration allows it."""
    name = _NAMES[trait]
    refusals = []
    virt = config.virt_type
    if virt is not None and virt != "kvm":
        refusals.append(Evidence(
            f"config {OPTION_VIRT_TYPE}", f"= {virt}: {name} guests run only "
            "under KVM (virt type kvm); QEMU's TCG refuses confidential "
            "guests and no other libvirt driver launches them"))
    # An unset mode's default follows the virt type: unknown without it.
    mode = (config.effective_cpu_mode if config.cpu_mode or virt else None)
    if (trait == os_traits.HW_CPU_X86_INTEL_TDX and mode is not None
            and mode != TDX_CPU_MODE):
        said = (f"is {mode}" if config.cpu_mode else
                f"is unset, so {mode} for virt type {virt}")
        refusals.append(Evidence(
            f"config {OPTION_CPU_MODE}", f"{said}: a TDX guest needs "
            f"{TDX_CPU_MODE} (the host CPU, -cpu host)"))
    return refusals


def _derive(inputs: DerivationInputs) -> Iterator[TraitResult]:
    for trait, look in _LOOKS.items():
        found = combine(FAMILY, trait, inputs.domains, look)
        refusals = config_refusals(trait, inputs.config)
        if not refusals:
            yield found
            continue
        # What the documents offer stays in the evidence, after the reason.
        offered = found.evidence if found.state is A else ()
        yield FAMILY.result(trait, U, *refusals, *offered)


FAMILY = TraitFamily("memory encryption", frozenset(_LOOKS), _derive)
