"""Guest CPU bookkeeping: what one guest CPU definition is known to contain.

:class:`GuestCPU` records, feature by feature, why guests get a CPU feature
or not, and which features are unknown; one is built per CPU mode from the
host capabilities (:func:`host_cpu`), a domain capabilities document's
host-model CPU (:func:`host_model_cpu`) or the configured custom models
(:func:`custom_cpu`), then :func:`apply_extra_flags` applies
``cpu_model_extra_flags``.  Feature names are libvirt's; turning them into
traits is :mod:`.cpu_features`' job.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from virtdriver.capabilities.domain import DomainCapabilities
from virtdriver.capabilities.host import HostCapabilities
from virtdriver.capabilities.traits.config import (
    OPTION_CPU_EXTRA_FLAGS, OPTION_CPU_MODELS)
from virtdriver.capabilities.traits.domain_facts import is_informative
from virtdriver.capabilities.traits.model import (
    DerivationInputs, DomainReading, Evidence, TraitState)

#: Evidence document name of the host capabilities.
HOST = "host capabilities"
_CPU_MAP = "libvirt CPU map"
#: Evidence document name of ``cpu_model_extra_flags``.
FLAGS_DOC = f"config {OPTION_CPU_EXTRA_FLAGS}"
_MODELS_DOC = f"config {OPTION_CPU_MODELS}"
_HM = "cpu/mode[@name='host-model']"

#: Evidence for features not listed, given their names in words.
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
        HOST, f"neither list {words} nor name a host CPU model that "
        "includes it", host.source, "host/cpu"))
    for feature in sorted(host.cpu.features):
        guest.add(feature, Evidence(
            HOST, f"list host CPU feature {feature!r}", host.source,
            f"host/cpu/feature[@name='{feature}']"))
    model = host.cpu.model
    if model is None:
        guest.gaps = (Evidence(
            HOST, "name no host CPU model, so features they do not list "
            "are unknown", host.source, "host/cpu"),)
        return guest
    found = lookup_model(model, table)
    if found is None:
        guest.gaps = (Evidence(
            HOST, f"name host CPU model {model}, which is not in the "
            f"{_CPU_MAP}, so features they do not list are unknown",
            host.source, "host/cpu/model"),)
        return guest
    name, features = found
    for feature in sorted(features - host.cpu.features):
        guest.add(feature, Evidence(
            HOST, f"name host CPU model {model}{_as(name, model)}, which "
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
        HOST, f"show a host CPU ({host.cpu.model} and the features listed) "
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
                FLAGS_DOC, f"{text!r} adds the feature to guests"))
    for name, text in removes.items():
        guest.remove(name, Evidence(
            FLAGS_DOC, f"{text!r} removes the feature from guests"))
