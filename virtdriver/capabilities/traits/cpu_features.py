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
  read, says nothing, or marks host-model unsupported or unreported leaves
  its traits unknown.  Several documents: asserted when any asserts, else
  unknown when any is unknown, else unasserted.
* **custom** — the union over ``[libvirt] cpu_models`` of each model's
  features (Nova picks, per instance, the first model that has what the
  flavor needs).  A model the domain capabilities mark ``usable='no'``
  contributes nothing and is named in the evidence; one whose usability is
  not reported counts, as the operator configured it.
* **none** — the hypervisor's default CPU, which libvirt does not describe:
  every trait of the family is unasserted, and ``cpu_model_extra_flags``
  are ignored (there is no ``<cpu>`` element to add them to).

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
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field

import os_traits

from virtdriver.capabilities.domain import DomainCapabilities
from virtdriver.capabilities.host import HostCapabilities
from virtdriver.capabilities.traits.config import (
    OPTION_CPU_EXTRA_FLAGS, OPTION_CPU_MODE, OPTION_CPU_MODELS)
from virtdriver.capabilities.traits.domain_facts import is_informative
from virtdriver.capabilities.traits.model import (
    DerivationInputs, DomainReading, Evidence, TraitFamily, TraitResult,
    TraitState)

X86_PREFIX = "HW_CPU_X86_"
AARCH64_PREFIX = "HW_CPU_AARCH64_"
PPC64LE_PREFIX = "HW_CPU_PPC64LE_"
X86_ARCHES = frozenset({"x86_64", "i686"})

#: Derived by other families (memory encryption).
_ELSEWHERE = frozenset({
    os_traits.HW_CPU_X86_AMD_SEV, os_traits.HW_CPU_X86_AMD_SEV_ES,
    os_traits.HW_CPU_X86_AMD_SEV_SNP, os_traits.HW_CPU_X86_INTEL_TDX})

X86_TRAITS = frozenset(os_traits.get_traits(X86_PREFIX)) - _ELSEWHERE
AARCH64_TRAITS = frozenset(os_traits.get_traits(AARCH64_PREFIX))
PPC64LE_TRAITS = frozenset(os_traits.get_traits(PPC64LE_PREFIX))

#: libvirt's spelling of features whose trait suffix differs (or that map to
#: two traits).  A trait listed here is reached only through this table.
X86_ALIASES: Mapping[str, tuple[str, ...]] = {
    "pclmuldq": (os_traits.HW_CPU_X86_CLMUL,),
    "pni": (os_traits.HW_CPU_X86_SSE3,),
    "sse4.1": (os_traits.HW_CPU_X86_SSE41,),
    "sse4.2": (os_traits.HW_CPU_X86_SSE42,),
    "aes": (os_traits.HW_CPU_X86_AESNI,),
    "fma": (os_traits.HW_CPU_X86_FMA3,),
    "sha-ni": (os_traits.HW_CPU_X86_SHA,),
    "bmi1": (os_traits.HW_CPU_X86_BMI,),
    "svm": (os_traits.HW_CPU_X86_SVM, os_traits.HW_CPU_X86_AMD_SVM),
    "vmx": (os_traits.HW_CPU_X86_VMX, os_traits.HW_CPU_X86_INTEL_VMX),
    "avx512-vpopcntdq": (os_traits.HW_CPU_X86_AVX512VPOPCNTDQ,),
    "vaes": (os_traits.HW_CPU_X86_AVX512VAES,),
    "gfni": (os_traits.HW_CPU_X86_AVX512GFNI,),
    "vpclmulqdq": (os_traits.HW_CPU_X86_AVX512VPCLMULQDQ,),
    "hle": (os_traits.HW_CPU_X86_TSX,),
    "rtm": (os_traits.HW_CPU_X86_TSX,),
    "amx-bf16": (os_traits.HW_CPU_X86_AMXBF16,),
    "amx-int8": (os_traits.HW_CPU_X86_AMXINT8,),
    "amx-tile": (os_traits.HW_CPU_X86_AMXTILE,),
    "ibpb": (os_traits.HW_CPU_X86_AMD_IBPB,),
    "amd-no-ssb": (os_traits.HW_CPU_X86_AMD_NO_SSB,),
    "amd-ssbd": (os_traits.HW_CPU_X86_AMD_SSBD,),
    "virt-ssbd": (os_traits.HW_CPU_X86_AMD_VIRT_SSBD,),
    "md-clear": (os_traits.HW_CPU_X86_INTEL_MD_CLEAR,),
    "pcid": (os_traits.HW_CPU_X86_INTEL_PCID,),
    "spec-ctrl": (os_traits.HW_CPU_X86_INTEL_SPEC_CTRL,),
    "ssbd": (os_traits.HW_CPU_X86_INTEL_SSBD,),
    "stibp": (os_traits.HW_CPU_X86_STIBP,),
    "amd-stibp": (os_traits.HW_CPU_X86_STIBP,),
}


def _feature_map(traits: Iterable[str], prefix: str,
                 aliases: Mapping[str, tuple[str, ...]]
                 ) -> dict[str, tuple[str, ...]]:
    """libvirt feature → traits: the aliases, then each other trait's
    lowercased suffix (``HW_CPU_X86_AVX2`` ← ``avx2``)."""
    aliased = {trait for found in aliases.values() for trait in found}
    mapping = dict(aliases)
    for trait in sorted(set(traits) - aliased):
        mapping[trait[len(prefix):].lower()] = (trait,)
    return mapping


#: libvirt x86 feature name → the traits it gives.
X86_FEATURE_TRAITS = _feature_map(X86_TRAITS, X86_PREFIX, X86_ALIASES)
#: libvirt (Linux hwcap) aarch64 feature name → the traits it gives.
AARCH64_FEATURE_TRAITS = _feature_map(AARCH64_TRAITS, AARCH64_PREFIX, {})


def _inverse(mapping: Mapping[str, tuple[str, ...]]
             ) -> dict[str, tuple[str, ...]]:
    found: dict[str, list[str]] = {}
    for feature, traits in mapping.items():
        for trait in traits:
            found.setdefault(trait, []).append(feature)
    return {trait: tuple(sorted(names)) for trait, names in found.items()}


_X86_SOURCES = _inverse(X86_FEATURE_TRAITS)
_AARCH64_SOURCES = _inverse(AARCH64_FEATURE_TRAITS)
_POWER_RE = re.compile(r"^power(\d+)", re.IGNORECASE)

_HOST = "host capabilities"
_CPU_MAP = "libvirt CPU map"
_MODE_DOC = f"config {OPTION_CPU_MODE}"
_FLAGS_DOC = f"config {OPTION_CPU_EXTRA_FLAGS}"
_MODELS_DOC = f"config {OPTION_CPU_MODELS}"
_HM = "cpu/mode[@name='host-model']"

Missing = Callable[[str], Evidence]


@dataclass(slots=True)
class GuestCPU:
    """What one guest CPU definition is known to contain.

    Attributes:
        present: feature → why guests get it.
        absent: feature → why guests do not (explicitly).
        missing: evidence for a feature that is simply not listed, given
            the feature names in words; used when nothing is unknown.
        gaps: why features not listed are unknown (empty: they are absent).
        ceiling: features guests could possibly get, when ``gaps`` is set,
            and the evidence for one outside it.
        notes: evidence every result from this definition carries.
        absent_notes: evidence every unasserted result carries.
    """

    present: dict[str, list[Evidence]] = field(default_factory=dict)
    absent: dict[str, list[Evidence]] = field(default_factory=dict)
    missing: Missing | None = None
    gaps: tuple[Evidence, ...] = ()
    ceiling: tuple[frozenset[str], Missing] | None = None
    notes: tuple[Evidence, ...] = ()
    absent_notes: tuple[Evidence, ...] = ()

    def add(self, feature: str, evidence: Evidence) -> None:
        """Record that guests get ``feature``."""
        self.absent.pop(feature, None)
        self.present.setdefault(feature, []).append(evidence)

    def remove(self, feature: str, evidence: Evidence) -> None:
        """Record that guests do not get ``feature``."""
        self.present.pop(feature, None)
        self.absent.setdefault(feature, []).append(evidence)

    def state(self, sources: tuple[str, ...]
              ) -> tuple[TraitState, list[Evidence]]:
        """The state of a trait any of ``sources`` gives, and why."""
        found = [ev for f in sources for ev in self.present.get(f, ())]
        if found:
            return TraitState.ASSERTED, [*found, *self.notes]
        open_ = [f for f in sources if f not in self.absent]
        beyond: list[str] = []
        if self.gaps and self.ceiling is not None:
            beyond = [f for f in open_ if f not in self.ceiling[0]]
            open_ = [f for f in open_ if f in self.ceiling[0]]
        if self.gaps and open_:
            return TraitState.UNKNOWN, [*self.gaps, *self.notes]
        why = [ev for f in sources for ev in self.absent.get(f, ())]
        if beyond and self.ceiling is not None:
            why.append(self.ceiling[1](_words(beyond)))
        elif not why and self.missing is not None:
            why.append(self.missing(_words(sources)))
        return TraitState.UNASSERTED, [*why, *self.absent_notes,
                                       *self.notes]


def _words(features: Iterable[str]) -> str:
    return " or ".join(repr(f) for f in features)


def lookup_model(name: str, table: Mapping[str, frozenset[str]]
                 ) -> tuple[str, frozenset[str]] | None:
    """``(name found, features)`` of CPU model ``name`` in ``table``.

    Exact name first, then ignoring case, then ``X-v1`` as ``X`` (QEMU
    defines the two as one model); ``None`` when the map lacks it.
    """
    if name in table:
        return name, table[name]
    folded = {key.lower(): key for key in table}
    candidates = [name]
    if name.lower().endswith("-v1"):
        candidates.append(name[:-3])
    for candidate in candidates:
        key = folded.get(candidate.lower())
        if key is not None:
            return key, table[key]
    return None


def _as(found: str, name: str) -> str:
    return "" if found == name else f" (as {found})"


# -- guest CPU definitions, one per mode ------------------------------------

def host_cpu(host: HostCapabilities, table: Mapping[str, frozenset[str]],
             ) -> GuestCPU:
    """The host CPU as the host capabilities describe it (model features
    from the CPU map, plus the listed features)."""
    guest = GuestCPU(missing=lambda words: Evidence(
        _HOST, f"neither list {words} nor name a host CPU model that "
        "includes it", host.source, "host/cpu"))
    for feature in sorted(host.cpu.features):
        guest.add(feature, Evidence(
            _HOST, f"list host CPU feature {feature!r}", host.source,
            f"host/cpu/feature[@name='{feature}']"))
    model = host.cpu.model
    if model is None:
        guest.gaps = (Evidence(
            _HOST, "name no host CPU model, so features they do not list "
            "are unknown", host.source, "host/cpu"),)
        return guest
    found = lookup_model(model, table)
    if found is None:
        guest.gaps = (Evidence(
            _HOST, f"name host CPU model {model}, which is not in the "
            f"{_CPU_MAP}, so features they do not list are unknown",
            host.source, "host/cpu/model"),)
        return guest
    name, features = found
    for feature in sorted(features - host.cpu.features):
        guest.add(feature, Evidence(
            _HOST, f"name host CPU model {model}{_as(name, model)}, which "
            f"includes {feature!r} ({_CPU_MAP})", host.source,
            "host/cpu/model"))
    return guest


def _host_known(host: HostCapabilities | None,
                table: Mapping[str, frozenset[str]]) -> frozenset[str] | None:
    """Every feature of the host CPU, or ``None`` when not fully known."""
    if host is None or host.cpu.model is None:
        return None
    found = lookup_model(host.cpu.model, table)
    return None if found is None else found[1] | host.cpu.features


def host_model_cpu(reading: DomainReading, inputs: DerivationInputs
                   ) -> GuestCPU:
    """The host-model CPU one domain capabilities document describes."""
    label, source = reading.label, reading.source
    caps = reading.caps
    if caps is None:
        return GuestCPU(gaps=(Evidence(
            label, f"could not be read: {reading.error}"),))
    problem = _host_model_problem(caps)
    if problem:
        return GuestCPU(gaps=(Evidence(label, problem, source, _HM),))
    mode = caps.cpu.host_model
    model = mode.model or ""
    guest = GuestCPU(missing=lambda words: Evidence(
        label, f"host-model CPU {model} neither includes ({_CPU_MAP}) nor "
        f"requires {words}", source, _HM))
    found = lookup_model(model, inputs.cpu_model_features)
    if found is None:
        guest.gaps = (Evidence(
            label, f"name host-model CPU {model}, which is not in the "
            f"{_CPU_MAP}, so features it does not list are unknown",
            source, f"{_HM}/model"),)
        guest.ceiling = _kvm_ceiling(inputs)
    else:
        name, features = found
        for feature in sorted(features):
            guest.add(feature, Evidence(
                label, f"host-model CPU {model}{_as(name, model)} includes "
                f"{feature!r} ({_CPU_MAP})", source, f"{_HM}/model"))
    for item in mode.features:
        element = f"{_HM}/feature[@name='{item.name}']"
        if item.policy in ("require", "force"):
            guest.add(item.name, Evidence(
                label, f"host-model CPU {model} requires feature "
                f"{item.name!r}", source, element))
        elif item.policy in ("disable", "forbid"):
            guest.remove(item.name, Evidence(
                label, f"host-model CPU {model} disables feature "
                f"{item.name!r}", source, element))
    return guest


def _host_model_problem(caps: DomainCapabilities) -> str | None:
    mode = caps.cpu.host_model
    if not is_informative(caps):
        return "report nothing about guests (no os, devices or CPU modes)"
    if mode.supported is None:
        return "do not report the host-model CPU mode"
    if not mode.supported:
        return "mark the host-model CPU mode unsupported"
    if not mode.model:
        return "name no host-model CPU model"
    return None


def _kvm_ceiling(inputs: DerivationInputs
                 ) -> tuple[frozenset[str], Missing] | None:
    host = inputs.host
    known = _host_known(host, inputs.cpu_model_features)
    if known is None or inputs.config.virt_type != "kvm":
        return None
    assert host is not None
    return known, lambda words: Evidence(
        _HOST, f"show a host CPU ({host.cpu.model} and the features listed) "
        f"without {words}, which KVM therefore cannot give host-model "
        "guests", host.source, "host/cpu")


def custom_cpu(inputs: DerivationInputs, readings: tuple[DomainReading, ...]
               ) -> GuestCPU:
    """The union of the configured custom models' features."""
    models = inputs.config.cpu_models
    listed = ", ".join(models)
    guest = GuestCPU(missing=lambda words: Evidence(
        _MODELS_DOC, f"names CPU models {listed}; none that guests can use "
        f"includes {words}"))
    gaps: list[Evidence] = []
    unusable: list[Evidence] = []
    for model in models:
        refusal = _unusable(model, readings)
        if refusal is not None:
            unusable.append(refusal)
            continue
        found = lookup_model(model, inputs.cpu_model_features)
        if found is None:
            gaps.append(Evidence(
                _CPU_MAP, f"has no CPU model {model} (named in "
                f"{OPTION_CPU_MODELS}), so which features it includes is "
                "unknown"))
            continue
        name, features = found
        for feature in sorted(features):
            guest.add(feature, Evidence(
                _MODELS_DOC, f"names CPU model {model}{_as(name, model)}, "
                f"which includes {feature!r} ({_CPU_MAP})"))
    guest.gaps = tuple(gaps)
    guest.absent_notes = tuple(unusable)
    return guest


def _unusable(model: str, readings: tuple[DomainReading, ...]
              ) -> Evidence | None:
    """Evidence that ``model`` is unusable, when every document that
    lists it says so."""
    verdicts: list[tuple[DomainReading, bool | None]] = []
    for reading in readings:
        if reading.caps is None:
            continue
        for entry in reading.caps.cpu.custom.models:
            if entry.name.lower() == model.lower():
                verdicts.append((reading, entry.usable))
    if not verdicts or any(usable is not False for _, usable in verdicts):
        return None
    reading = verdicts[0][0]
    return Evidence(
        reading.label, f"mark CPU model {model} (named in "
        f"{OPTION_CPU_MODELS}) unusable on this host", reading.source,
        f"cpu/mode[@name='custom']/model[.='{model}']")


def apply_extra_flags(guest: GuestCPU, flags: Iterable[str]) -> None:
    """Apply ``cpu_model_extra_flags`` to ``guest`` (see module doc)."""
    adds: dict[str, str] = {}
    removes: dict[str, str] = {}
    for raw in flags:
        text = raw.strip()
        name = text.lstrip("+-").strip().lower()
        if name:
            (removes if text.startswith("-") else adds)[name] = text
    for name, text in adds.items():
        if name not in removes:
            guest.add(name, Evidence(
                _FLAGS_DOC, f"{text!r} adds the feature to guests"))
    for name, text in removes.items():
        guest.remove(name, Evidence(
            _FLAGS_DOC, f"{text!r} removes the feature from guests"))


# -- derivation ------------------------------------------------------------

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
            _FLAGS_DOC, "are ignored: with cpu_mode none guests have no "
            "<cpu> element to add them to"))
    yield from _all(traits, TraitState.UNASSERTED, *evidence)


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
    guests = _x86_guests(inputs, host)
    for guest in guests:
        guest.notes = (_mode_evidence(inputs), *guest.notes)
        apply_extra_flags(guest, inputs.config.cpu_model_extra_flags)
    for trait in sorted(X86_TRAITS):
        yield _merge(trait, guests, _X86_SOURCES[trait])


def _aarch64(inputs: DerivationInputs,
             host: HostCapabilities) -> Iterator[TraitResult]:
    if inputs.config.effective_cpu_mode == "none":
        yield from _mode_none(AARCH64_TRAITS, inputs)
        return
    guest = GuestCPU(missing=lambda words: Evidence(
        _HOST, f"do not list host CPU feature {words}", host.source,
        "host/cpu"))
    for feature in sorted(host.cpu.features):
        guest.add(feature.lower(), Evidence(
            _HOST, f"list host CPU feature {feature!r}", host.source,
            f"host/cpu/feature[@name='{feature}']"))
    if not host.cpu.features and host.cpu.model is None:
        guest.gaps = (Evidence(
            _HOST, "report neither a CPU model nor CPU features for the "
            "aarch64 host", host.source, "host/cpu"),)
    apply_extra_flags(guest, inputs.config.cpu_model_extra_flags)
    for trait in sorted(AARCH64_TRAITS):
        yield _merge(trait, [guest], _AARCH64_SOURCES[trait])


def _ppc64le(inputs: DerivationInputs,
             host: HostCapabilities) -> Iterator[TraitResult]:
    if inputs.config.effective_cpu_mode == "none":
        yield from _mode_none(PPC64LE_TRAITS, inputs)
        return
    model = host.cpu.model
    if model is None:
        yield from _all(PPC64LE_TRAITS, TraitState.UNKNOWN, Evidence(
            _HOST, "name no host CPU model", host.source, "host/cpu"))
        return
    found = _POWER_RE.match(model)
    for trait in sorted(PPC64LE_TRAITS):
        wanted = _POWER_RE.match(trait[len(PPC64LE_PREFIX):])
        same = bool(found and wanted and found.group(1) == wanted.group(1))
        state = TraitState.ASSERTED if same else TraitState.UNASSERTED
        detail = (f"name host CPU model {model}" if same else
                  f"name host CPU model {model}, which is not "
                  f"{trait[len(PPC64LE_PREFIX):]}")
        yield FAMILY.result(trait, state, Evidence(
            _HOST, detail, host.source, "host/cpu/model"))


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
            _HOST, "could not be read: "
            f"{inputs.host_error or 'no reason recorded'}"))
        return
    arch = host.cpu.arch
    if not arch:
        yield from _all(FAMILY.traits, TraitState.UNKNOWN, Evidence(
            _HOST, "do not report the host CPU arch", host.source,
            "host/cpu/arch"))
        return
    for traits, arches, prefix, derive_arch in _ARCH_GROUPS:
        if arch in arches:
            yield from derive_arch(inputs, host)
            continue
        yield from _all(traits, TraitState.UNASSERTED, Evidence(
            _HOST, f"say the host arch is {arch}; {prefix}* traits describe "
            f"{' and '.join(sorted(arches))} hosts only", host.source,
            "host/cpu/arch"))


FAMILY = TraitFamily(name="cpu features",
                     traits=X86_TRAITS | AARCH64_TRAITS | PPC64LE_TRAITS,
                     derive=derive)
