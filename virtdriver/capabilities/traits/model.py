"""The vocabulary of trait derivation: states, evidence, results, inputs.

A derivation answers, for every trait a driver owns, one of three things —
asserted, unasserted, unknown — and says why with :class:`Evidence`.
"Unknown" means the source could not be read (or did not say); it is a
different fact from "the source says no", and the tracker leaves unknown
traits exactly as they are.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field

from virtdriver.capabilities.domain import DomainCapabilities
from virtdriver.capabilities.host import HostCapabilities
from virtdriver.capabilities.traits.config import TraitConfig


class TraitState(enum.Enum):
    """What a derivation says about one trait."""

    ASSERTED = "asserted"
    UNASSERTED = "unasserted"
    UNKNOWN = "unknown"


@dataclass(frozen=True, slots=True)
class Evidence:
    """Why a trait has its state: which document or option, which element.

    Attributes:
        document: the document or setting, in words — ``"host
            capabilities"``, ``"domain capabilities (x86_64, pc-q35-7.2,
            kvm)"``, ``"config [libvirt] cpu_mode"``.
        detail: what it says, completing a sentence that starts with
            ``document`` — ``"list disk bus 'virtio'"``.
        source: where the document came from (file path or libvirt URI and
            call), when known.
        element: the element or value inside it, e.g.
            ``"devices/disk/enum[@name='bus']/value"``.
    """

    document: str
    detail: str
    source: str | None = None
    element: str | None = None

    def sentence(self) -> str:
        """``document detail``, e.g. "host capabilities list 2 NUMA cells"."""
        return f"{self.document} {self.detail}"


@dataclass(frozen=True, slots=True)
class TraitResult:
    """One trait's state, the family that derived it, and the evidence.

    Evidence is ordered most decisive first: an explanation leads with it.
    """

    trait: str
    state: TraitState
    family: str
    evidence: tuple[Evidence, ...] = ()


@dataclass(frozen=True, slots=True)
class InvalidTrait:
    """A name a derivation produced that is not a valid trait name."""

    name: str
    reason: str
    family: str
    evidence: tuple[Evidence, ...] = ()


@dataclass(frozen=True, slots=True)
class DomainKey:
    """What to pass to ``getDomainCapabilities`` (machine ``None``: default)."""

    arch: str
    virt_type: str
    machine: str | None = None


@dataclass(frozen=True, slots=True)
class DomainReading:
    """One domain capabilities document the driver asked for, or failed to.

    Exactly one of ``caps`` and ``error`` is set.
    """

    key: DomainKey
    caps: DomainCapabilities | None = None
    error: str | None = None

    @property
    def label(self) -> str:
        """``domain capabilities (x86_64, pc-q35-7.2, kvm)``."""
        machine = (self.caps.machine if self.caps and self.caps.machine
                   else self.key.machine or "default machine")
        return (f"domain capabilities ({self.key.arch}, {machine}, "
                f"{self.key.virt_type})")

    @property
    def source(self) -> str | None:
        """Where the document came from, when it was read."""
        return self.caps.source if self.caps is not None else None


@dataclass(frozen=True, slots=True)
class DerivationInputs:
    """Everything trait derivation reads.  All of it is immutable.

    Attributes:
        host: host capabilities, or ``None`` when they could not be read.
        host_error: why ``host`` is missing.
        domains: the domain capabilities that count (see
            :func:`~.domain_selection.domain_keys`), read or failed.
        driver_capabilities: the driver's capabilities dict
            (``supports_multiattach`` → bool, …).
        config: the options that steer derivation.
        cpu_model_features: libvirt CPU model name → its features, from
            libvirt's CPU map; models missing here make their implied
            features unknown rather than absent.
        usable_cpus: CPU ids guests may use (``None``: every online CPU).
        online_cpus_note: set when libvirt did not report online CPUs, so
            ``usable_cpus`` counts every CPU the host capabilities list;
            evidence that names the usable CPUs says this too.
        libvirt_version: ``getLibVersion()`` (e.g. 9000000 for 9.0.0), or
            ``None`` when unknown.
        hypervisor_version: ``getVersion()`` (QEMU 7.2.0 is 7002000), or
            ``None`` when unknown.
    """

    host: HostCapabilities | None = None
    host_error: str | None = None
    domains: tuple[DomainReading, ...] = ()
    driver_capabilities: Mapping[str, bool] = field(default_factory=dict)
    config: TraitConfig = TraitConfig()
    cpu_model_features: Mapping[str, frozenset[str]] = field(
        default_factory=dict)
    usable_cpus: frozenset[int] | None = None
    online_cpus_note: str | None = None
    libvirt_version: int | None = None
    hypervisor_version: int | None = None


Derive = Callable[[DerivationInputs], "Iterator[TraitResult]"]


@dataclass(frozen=True, slots=True)
class TraitFamily:
    """A small, separately tested mapping from inputs to traits.

    Attributes:
        name: short name, shown in explanations (``"storage bus"``).
        traits: every standard or static trait the family can ever emit.
        prefixes: prefixes of dynamic names it may emit (``CUSTOM_…_``).
        derive: yields one :class:`TraitResult` for each trait in
            ``traits`` (and any dynamic ones it finds).
    """

    name: str
    traits: frozenset[str]
    derive: Derive
    prefixes: tuple[str, ...] = ()

    def result(self, trait: str, state: TraitState,
               *evidence: Evidence) -> TraitResult:
        """A :class:`TraitResult` of this family."""
        return TraitResult(trait, state, self.name, tuple(evidence))
