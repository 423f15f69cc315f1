"""Frozen model of libvirt domain capabilities.

One :class:`DomainCapabilities` describes what one emulator offers guests of
one (arch, machine type, virt type), as ``virConnectGetDomainCapabilities``
reports it.  ``supported=None`` means the element was absent (libvirt did
not say); ``False`` means libvirt said "not supported".
"""

from __future__ import annotations

from dataclasses import dataclass

EnumValues = tuple[tuple[str, tuple[str, ...]], ...]


@dataclass(frozen=True, slots=True)
class Support:
    """An element with a ``supported`` flag and ``<enum>`` children.

    Used for every device (``<disk>``, ``<video>``, …) and for the simpler
    features (``<gic>``, ``<launchSecurity>``, …).
    """

    supported: bool | None = None
    enums: EnumValues = ()

    def values(self, name: str) -> tuple[str, ...]:
        """Values of the ``<enum name=...>`` of this element (may be empty)."""
        for enum_name, values in self.enums:
            if enum_name == name:
                return values
        return ()

    @property
    def reported(self) -> bool:
        """Whether the document has this element at all."""
        return self.supported is not None


#: The value of every element a document does not have.  Models are
#: immutable, so one shared instance serves as the default everywhere.
NOT_REPORTED = Support()


@dataclass(frozen=True, slots=True)
class LoaderCaps:
    """Firmware loader: supported, known paths, types, readonly, secure."""

    supported: bool | None = None
    paths: tuple[str, ...] = ()
    types: tuple[str, ...] = ()
    readonly: tuple[str, ...] = ()
    secure: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class OSCaps:
    """The ``<os>`` element: firmware values, firmware features, loader."""

    supported: bool | None = None
    firmware: tuple[str, ...] = ()
    firmware_features: Support = NOT_REPORTED
    loader: LoaderCaps = LoaderCaps()


@dataclass(frozen=True, slots=True)
class CPUFeaturePolicy:
    """A feature of the host-model CPU and its policy (require, disable…)."""

    name: str
    policy: str


@dataclass(frozen=True, slots=True)
class HostModelCPU:
    """The ``host-model`` CPU mode: the CPU libvirt would give a guest."""

    supported: bool | None = None
    model: str | None = None
    fallback: str | None = None
    vendor: str | None = None
    features: tuple[CPUFeaturePolicy, ...] = ()

    def features_with(self, policy: str) -> frozenset[str]:
        """Names of features with ``policy`` (e.g. ``"require"``)."""
        return frozenset(f.name for f in self.features if f.policy == policy)


@dataclass(frozen=True, slots=True)
class CPUModel:
    """A named CPU model of the ``custom`` mode."""

    name: str
    usable: bool | None = None
    vendor: str | None = None
    deprecated: bool = False
    canonical: str | None = None


@dataclass(frozen=True, slots=True)
class CustomCPUModes:
    """The ``custom`` CPU mode and its named models."""

    supported: bool | None = None
    models: tuple[CPUModel, ...] = ()

    @property
    def usable_models(self) -> tuple[str, ...]:
        """Names of models libvirt marks usable on this host."""
        return tuple(m.name for m in self.models if m.usable)


@dataclass(frozen=True, slots=True)
class CPUCaps:
    """The four CPU modes."""

    host_passthrough: Support = NOT_REPORTED
    maximum: Support = NOT_REPORTED
    host_model: HostModelCPU = HostModelCPU()
    custom: CustomCPUModes = CustomCPUModes()


@dataclass(frozen=True, slots=True)
class Devices:
    """Device support, one :class:`Support` per device element."""

    disk: Support = NOT_REPORTED
    graphics: Support = NOT_REPORTED
    video: Support = NOT_REPORTED
    hostdev: Support = NOT_REPORTED
    rng: Support = NOT_REPORTED
    filesystem: Support = NOT_REPORTED
    tpm: Support = NOT_REPORTED
    redirdev: Support = NOT_REPORTED
    channel: Support = NOT_REPORTED
    crypto: Support = NOT_REPORTED
    interface: Support = NOT_REPORTED
    panic: Support = NOT_REPORTED
    console: Support = NOT_REPORTED
    #: ``<iommu>`` with ``<enum name='model'>``, in newer libvirt only.
    iommu: Support = NOT_REPORTED


@dataclass(frozen=True, slots=True)
class SEVCaps:
    """AMD SEV: support and the platform's guest limits."""

    supported: bool | None = None
    cbitpos: int | None = None
    reduced_phys_bits: int | None = None
    max_guests: int | None = None
    max_es_guests: int | None = None


@dataclass(frozen=True, slots=True)
class SGXSection:
    """An SGX EPC section on a NUMA node."""

    node: int | None
    size_kib: int


@dataclass(frozen=True, slots=True)
class SGXCaps:
    """Intel SGX: support, flags and EPC sections."""

    supported: bool | None = None
    flc: bool | None = None
    sgx1: bool | None = None
    sgx2: bool | None = None
    section_size_kib: int | None = None
    sections: tuple[SGXSection, ...] = ()


@dataclass(frozen=True, slots=True)
class Features:
    """The ``<features>`` element."""

    gic: Support = NOT_REPORTED
    vmcoreinfo: Support = NOT_REPORTED
    genid: Support = NOT_REPORTED
    backing_store_input: Support = NOT_REPORTED
    backup: Support = NOT_REPORTED
    async_teardown: Support = NOT_REPORTED
    s390_pv: Support = NOT_REPORTED
    ps2: Support = NOT_REPORTED
    tdx: Support = NOT_REPORTED
    sev: SEVCaps = SEVCaps()
    sgx: SGXCaps = SGXCaps()
    hyperv: Support = NOT_REPORTED
    launch_security: Support = NOT_REPORTED


@dataclass(frozen=True, slots=True)
class DomainCapabilities:
    """Everything read from one domain capabilities document."""

    source: str
    path: str | None = None
    virt_type: str | None = None
    machine: str | None = None
    arch: str | None = None
    vcpu_max: int | None = None
    iothreads: bool | None = None
    os: OSCaps = OSCaps()
    cpu: CPUCaps = CPUCaps()
    memory_backing: Support = NOT_REPORTED
    devices: Devices = Devices()
    features: Features = Features()

    @property
    def key(self) -> tuple[str | None, str | None, str | None]:
        """(arch, machine type, virt type): what this document is about."""
        return (self.arch, self.machine, self.virt_type)

    @property
    def disk_buses(self) -> tuple[str, ...]:
        """Disk buses (``<disk><enum name='bus'>``), empty if unsupported."""
        return _if_supported(self.devices.disk, "bus")

    @property
    def video_models(self) -> tuple[str, ...]:
        """Video model types (``<video><enum name='modelType'>``)."""
        return _if_supported(self.devices.video, "modelType")

    @property
    def graphics_types(self) -> tuple[str, ...]:
        """Graphics types (``<graphics><enum name='type'>``)."""
        return _if_supported(self.devices.graphics, "type")

    @property
    def tpm_models(self) -> tuple[str, ...]:
        """TPM device models (``<tpm><enum name='model'>``)."""
        return _if_supported(self.devices.tpm, "model")

    @property
    def tpm_backend_versions(self) -> tuple[str, ...]:
        """TPM backend versions (``<tpm><enum name='backendVersion'>``)."""
        return _if_supported(self.devices.tpm, "backendVersion")


def _if_supported(support: Support, enum: str) -> tuple[str, ...]:
    return support.values(enum) if support.supported else ()
