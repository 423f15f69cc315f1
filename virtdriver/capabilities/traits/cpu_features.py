"""CPU feature traits: ``HW_CPU_X86_*``, ``HW_CPU_AARCH64_*``, ``HW_CPU_PPC64LE_*``.

A trait says "a guest booted here gets this CPU feature", so the feature set
follows the guest CPU mode in force (``[libvirt] cpu_mode``):

* **host-passthrough** — the host CPU: the features libvirt's CPU map lists
  for the host capabilities' ``<model>``, plus every ``<feature>`` they list.
  The domain capabilities are not consulted.
* **host-model** — the domain capabilities' host-model CPU, per document
  that counts for the host arch: its model's features (CPU map), plus
  features with policy ``require``/``force``, minus ``disable``/``forbid``.
  The host capabilities' features are **not** added: they are the raw host
  CPU, including features the host-model CPU deliberately disables.  They
  are used only as a ceiling when the host-model CPU's model is not in the
  CPU map and the virt type is kvm: a feature neither listed by the
  host-model CPU nor present on the (fully known) host CPU is absent, since
  KVM cannot give guests what the host lacks.  A document that could not be
  read, says nothing, or does not report host-model leaves its traits
  unknown (one that marks it unsupported, too, unless every document does:
  see below).  Several documents: asserted when any asserts, else unknown
  when any is unknown, else unasserted.
* **custom** — the union over ``[libvirt] cpu_models`` of each model's
  features (Nova picks, per instance, the first model that has what the
  flavor needs).  A model the domain capabilities mark ``usable='no'``
  contributes nothing and is named in the evidence; one whose usability is
  not reported counts, as the operator configured it.
* **none** — the hypervisor's default CPU, which libvirt does not describe:
  every trait of the family is unasserted, and ``cpu_model_extra_flags``
  are ignored (there is no ``<cpu>`` element to add them to).

**A mode no document allows.**  When every domain capabilities document
that counts for the host arch was read and marks the mode in force
(host-passthrough, host-model or custom) ``supported='no'`` — as libvirt
does for host-passthrough with virt type qemu (TCG has no ``-cpu host``) —
no guest boots with that configuration: every x86 trait is unasserted, the
documents' ``<mode>`` first in the evidence, then ``[libvirt] cpu_mode``.
One document that allows the mode, or any that was not read, keeps the
rules above.

``[libvirt] cpu_model_extra_flags`` apply in every other mode: ``+flag`` or
a bare ``flag`` adds the feature, ``-flag`` removes it (a removal wins over
an addition of the same flag).  A trait several libvirt features map to
(``HW_CPU_X86_TSX`` from ``hle`` or ``rtm``) is asserted when any of them is
present, so ``-hle`` alone leaves TSX asserted while ``rtm`` remains.

Fail safe: a model that is not in the CPU map (Debian 12's map has no
EPYC-Turin) still gives the features listed explicitly, but every trait not
decided by a listed feature is unknown, not unasserted.  QEMU defines a
model ``X-v1`` as ``X``, so ``X-v1`` missing from an older map is read as
``X``.  Missing host capabilities, or a host arch they do not report, make
every trait unknown.

Arches: x86 traits apply to x86_64 and i686 hosts; aarch64 traits come
from an aarch64 host's ``<feature>`` list in every mode but none (libvirt's
arm models carry no features), and are unknown when the host capabilities
report neither a CPU model nor a feature; ``HW_CPU_PPC64LE_POWER<n>`` is
asserted on a ppc64le host whose CPU model is ``POWER<n>``.  Traits of the
arches the host is not are unasserted.  Traits other families derive —
``HW_CPU_X86_AMD_SEV*`` and ``HW_CPU_X86_INTEL_TDX`` (memory encryption),
``HW_CPU_HYPERTHREADING`` (host) — are not part of this family.

Modules: :mod:`.cpu_feature_names` maps libvirt feature names to traits;
:mod:`.guest_cpu` records what each guest CPU definition contains.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from virtdriver.capabilities.host import HostCapabilities
from virtdriver.capabilities.traits.config import (
    OPTION_CPU_MODE, OPTION_CPU_MODELS)
from virtdriver.capabilities.traits.cpu_feature_names import (
    AARCH64_PREFIX, AARCH64_SOURCES, AARCH64_TRAITS, POWER_RE,
    PPC64LE_PREFIX, PPC64LE_TRAITS, X86_ARCHES, X86_PREFIX, X86_SOURCES,
    X86_TRAITS)
from virtdriver.capabilities.traits.domain_facts import is_informative
from virtdriver.capabilities.traits.guest_cpu import (
    FLAGS_DOC, HOST, GuestCPU, apply_extra_flags, custom_cpu, host_cpu,
    host_model_cpu)
from virtdriver.capabilities.traits.model import (
    DerivationInputs, Evidence, TraitFamily, TraitResult, TraitState)

_MODE_DOC = f"config {OPTION_CPU_MODE}"


def _mode_evidence(inputs: DerivationInputs) -> Evidence:
    config = inputs.config
    mode = config.effective_cpu_mode
    said = (f"is {mode}" if config.cpu_mode else
            f"is unset, so {mode} for virt type {config.virt_type}")
    what = {
        "host-passthrough": "guests see the host CPU",
        "host-model": "guests get the host-model CPU of the domain "
                      "capabilities",
        "custom": f"guests get one of the models of {OPTION_CPU_MODELS}",
        "none": "guests get the hypervisor's default CPU, whose features "
                "libvirt does not describe",
    }[mode]
    return Evidence(_MODE_DOC, f"{said}: {what}")


def _all(traits: Iterable[str], state: TraitState,
         *evidence: Evidence) -> Iterator[TraitResult]:
    for trait in sorted(traits):
        yield FAMILY.result(trait, state, *evidence)


def _mode_none(traits: frozenset[str], inputs: DerivationInputs
               ) -> Iterator[TraitResult]:
    evidence = [_mode_evidence(inputs)]
    if inputs.config.cpu_model_extra_flags:
        evidence.append(Evidence(
            FLAGS_DOC, "are ignored: with cpu_mode none guests have no "
            "<cpu> element to add them to"))
    yield from _all(traits, TraitState.UNASSERTED, *evidence)


#: CPU mode → whether one document supports it (``None``: not reported).
_MODE_SUPPORT = {
    "host-passthrough": lambda caps: caps.cpu.host_passthrough.supported,
    "host-model": lambda caps: caps.cpu.host_model.supported,
    "custom": lambda caps: caps.cpu.custom.supported,
}


def mode_refusals(inputs: DerivationInputs, arch: str) -> list[Evidence]:
    """Evidence that every counted document for ``arch`` marks the CPU mode
    in force unsupported; empty when there is none, or any of them was not
    read, says nothing, or does not refuse the mode."""
    mode = inputs.config.effective_cpu_mode
    supported = _MODE_SUPPORT.get(mode)
    readings = [r for r in inputs.domains if r.key.arch == arch]
    refusals: list[Evidence] = []
    for reading in readings:
        caps = reading.caps
        if (supported is None or caps is None or not is_informative(caps)
                or supported(caps) is not False):
            return []
        refusals.append(Evidence(
            reading.label, f"mark the {mode} CPU mode unsupported, so no "
            f"guest boots with {OPTION_CPU_MODE} = {mode}", reading.source,
            f"cpu/mode[@name='{mode}']"))
    return refusals


def _merge(trait: str, guests: list[GuestCPU],
           sources: tuple[str, ...]) -> TraitResult:
    """Asserted when any definition asserts, else unknown when any is
    unknown, else unasserted."""
    states = [guest.state(sources) for guest in guests]
    for wanted in (TraitState.ASSERTED, TraitState.UNKNOWN):
        if any(state is wanted for state, _ in states):
            break
    else:
        wanted = TraitState.UNASSERTED
    evidence = [ev for state, found in states if state is wanted
                for ev in found]
    return FAMILY.result(trait, wanted, *dict.fromkeys(evidence))


def _x86_guests(inputs: DerivationInputs,
                host: HostCapabilities) -> list[GuestCPU]:
    mode = inputs.config.effective_cpu_mode
    readings = tuple(reading for reading in inputs.domains
                     if reading.key.arch == host.cpu.arch)
    if mode == "host-passthrough":
        return [host_cpu(host, inputs.cpu_model_features)]
    if mode == "custom":
        return [custom_cpu(inputs, readings)]
    if not readings:
        return [GuestCPU(gaps=(Evidence(
            "domain capabilities", f"were not read for {host.cpu.arch} "
            f"with virt type {inputs.config.virt_type}"),))]
    return [host_model_cpu(reading, inputs) for reading in readings]


def _x86(inputs: DerivationInputs,
         host: HostCapabilities) -> Iterator[TraitResult]:
    if inputs.config.effective_cpu_mode == "none":
        yield from _mode_none(X86_TRAITS, inputs)
        return
    refusals = mode_refusals(inputs, host.cpu.arch)
    if refusals:
        yield from _all(X86_TRAITS, TraitState.UNASSERTED, *refusals,
                        _mode_evidence(inputs))
        return
    guests = _x86_guests(inputs, host)
    for guest in guests:
        guest.notes = (_mode_evidence(inputs), *guest.notes)
        apply_extra_flags(guest, inputs.config.cpu_model_extra_flags)
    for trait in sorted(X86_TRAITS):
        yield _merge(trait, guests, X86_SOURCES[trait])


def _aarch64(inputs: DerivationInputs,
             host: HostCapabilities) -> Iterator[TraitResult]:
    if inputs.config.effective_cpu_mode == "none":
        yield from _mode_none(AARCH64_TRAITS, inputs)
        return
    guest = GuestCPU(missing=lambda words: Evidence(
        HOST, f"do not list host CPU feature {words}", host.source,
        "host/cpu"))
    for feature in sorted(host.cpu.features):
        guest.add(feature.lower(), Evidence(
            HOST, f"list host CPU feature {feature!r}", host.source,
            f"host/cpu/feature[@name='{feature}']"))
    if not host.cpu.features and host.cpu.model is None:
        guest.gaps = (Evidence(
            HOST, "report neither a CPU model nor CPU features for the "
            "aarch64 host", host.source, "host/cpu"),)
    apply_extra_flags(guest, inputs.config.cpu_model_extra_flags)
    for trait in sorted(AARCH64_TRAITS):
        yield _merge(trait, [guest], AARCH64_SOURCES[trait])


def _ppc64le(inputs: DerivationInputs,
             host: HostCapabilities) -> Iterator[TraitResult]:
    if inputs.config.effective_cpu_mode == "none":
        yield from _mode_none(PPC64LE_TRAITS, inputs)
        return
    model = host.cpu.model
    if model is None:
        yield from _all(PPC64LE_TRAITS, TraitState.UNKNOWN, Evidence(
            HOST, "name no host CPU model", host.source, "host/cpu"))
        return
    found = POWER_RE.match(model)
    for trait in sorted(PPC64LE_TRAITS):
        wanted = POWER_RE.match(trait[len(PPC64LE_PREFIX):])
        same = bool(found and wanted and found.group(1) == wanted.group(1))
        state = TraitState.ASSERTED if same else TraitState.UNASSERTED
        detail = (f"name host CPU model {model}" if same else
                  f"name host CPU model {model}, which is not "
                  f"{trait[len(PPC64LE_PREFIX):]}")
        yield FAMILY.result(trait, state, Evidence(
            HOST, detail, host.source, "host/cpu/model"))


_ARCH_GROUPS = (
    (X86_TRAITS, X86_ARCHES, X86_PREFIX, _x86),
    (AARCH64_TRAITS, frozenset({"aarch64"}), AARCH64_PREFIX, _aarch64),
    (PPC64LE_TRAITS, frozenset({"ppc64le"}), PPC64LE_PREFIX, _ppc64le),
)


def derive(inputs: DerivationInputs) -> Iterator[TraitResult]:
    """One result for every trait of :data:`FAMILY` (see module doc)."""
    host = inputs.host
    if host is None:
        yield from _all(FAMILY.traits, TraitState.UNKNOWN, Evidence(
            HOST, "could not be read: "
            f"{inputs.host_error or 'no reason recorded'}"))
        return
    arch = host.cpu.arch
    if not arch:
        yield from _all(FAMILY.traits, TraitState.UNKNOWN, Evidence(
            HOST, "do not report the host CPU arch", host.source,
            "host/cpu/arch"))
        return
    for traits, arches, prefix, derive_arch in _ARCH_GROUPS:
        if arch in arches:
            yield from derive_arch(inputs, host)
            continue
        yield from _all(traits, TraitState.UNASSERTED, Evidence(
            HOST, f"say the host arch is {arch}; {prefix}* traits describe "
            f"{' and '.join(sorted(arches))} hosts only", host.source,
            "host/cpu/arch"))


FAMILY = TraitFamily(name="cpu features",
                     traits=X86_TRAITS | AARCH64_TRAITS | PPC64LE_TRAITS,
                     derive=derive)
