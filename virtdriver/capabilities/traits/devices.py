"""Device traits read from domain capabilities: storage buses, graphics and
vIOMMU models, vTPM.

Families read from the domain capabilities that count (merged by
:func:`~.domain_facts.combine`):

* **storage bus** — ``COMPUTE_STORAGE_BUS_<BUS>`` for each value of
  ``<disk><enum name='bus'>`` that os-traits knows (``nvme``, ``sd`` have
  no trait and are ignored).  The ``usb`` of ``<redirdev>`` is not a disk
  bus.
* **graphics model** — ``COMPUTE_GRAPHICS_MODEL_<MODEL>`` from
  ``<video><enum name='modelType'>`` (``ramfb`` has no trait).
* **TPM** — a vTPM is QEMU's TPM device backed by swtpm, which libvirt
  drives as the ``emulator`` backend and lists in ``backendModel`` only
  when swtpm is installed (it then also lists the TPM versions swtpm
  offers).  So every TPM trait requires ``emulator`` among the backend
  models; ``passthrough`` hands one host TPM to one guest and is no
  schedulable capability.  ``COMPUTE_SECURITY_TPM_TIS``/``_CRB`` then come
  from ``model`` (``tpm-tis``, ``tpm-crb``), ``_1_2``/``_2_0`` from
  ``backendVersion``.  A document with the emulator backend but no versions
  (libvirt before 8.6) leaves the version traits unknown.
* **vIOMMU** — ``<devices><iommu><enum name='model'>`` when the document
  has it.  Older libvirt does not report ``<iommu>``; then virtdriver's
  fallback rule, after Nova's, applies to QEMU documents (kvm, qemu,
  hvf): ``intel`` on x86 ``q35`` machines, ``smmuv3`` on aarch64 ``virt``
  machines, and ``virtio`` on both with libvirt >= 8.3.0 (unknown libvirt
  version: unknown).  ``COMPUTE_VIOMMU_MODEL_AUTO`` (``hw_viommu_model=auto``, the
  driver picks a model) is asserted by a document that offers any model.

The families of NIC and sound models and packed virtqueues, which domain
capabilities do not list, are in :mod:`.guest_models`.
"""

from __future__ import annotations

from collections.abc import Iterator

import os_traits

from virtdriver.capabilities.domain import DomainCapabilities
from virtdriver.capabilities.traits.domain_facts import (
    Finding, Look, combine, enum_finding)
from virtdriver.capabilities.traits.guest_models import (
    QEMU_VIRT_TYPES, version_text)
from virtdriver.capabilities.traits.model import (
    DerivationInputs, TraitFamily, TraitResult, TraitState)

A, U, K = TraitState.ASSERTED, TraitState.UNASSERTED, TraitState.UNKNOWN

# ---------------------------------------------------- enums of one device


def _enum_traits(prefix: str) -> dict[str, str]:
    """libvirt enum value → trait, for every os-traits name with ``prefix``."""
    return {trait[len(prefix):].lower(): trait
            for trait in os_traits.get_traits(prefix)}


def _enum_family(name: str, prefix: str, device: str, what: str,
                 enum: str) -> TraitFamily:
    """A family asserting ``prefix + VALUE`` for each value of a device
    enum, e.g. ``<disk><enum name='bus'>`` → ``COMPUTE_STORAGE_BUS_*``."""
    by_value = _enum_traits(prefix)

    def derive(inputs: DerivationInputs) -> Iterator[TraitResult]:
        for value, trait in sorted(by_value.items()):
            yield combine(family, trait, inputs.domains, _enum_look(
                device, what, enum, value))

    family = TraitFamily(name, frozenset(by_value.values()), derive)
    return family


def _enum_look(device: str, what: str, enum: str, value: str) -> Look:
    def look(caps: DomainCapabilities) -> Finding:
        return enum_finding(device, what, enum, value, caps,
                            element_path=f"devices/{device}")
    return look


STORAGE_BUS = _enum_family("storage bus", "COMPUTE_STORAGE_BUS_", "disk",
                           "disk bus", "bus")
GRAPHICS_MODEL = _enum_family("graphics model", "COMPUTE_GRAPHICS_MODEL_",
                              "video", "video model", "modelType")

# ------------------------------------------------------------------- TPM

#: The libvirt TPM backend that is a vTPM (swtpm).
TPM_EMULATOR = "emulator"
#: trait → (enum of ``<tpm>``, words for it, value).
_TPM = {
    os_traits.COMPUTE_SECURITY_TPM_TIS: ("model", "TPM model", "tpm-tis"),
    os_traits.COMPUTE_SECURITY_TPM_CRB: ("model", "TPM model", "tpm-crb"),
    os_traits.COMPUTE_SECURITY_TPM_1_2: (
        "backendVersion", "TPM version", "1.2"),
    os_traits.COMPUTE_SECURITY_TPM_2_0: (
        "backendVersion", "TPM version", "2.0"),
}


def _tpm_look(enum: str, what: str, value: str) -> Look:
    """Look for ``value`` in ``<tpm><enum name=enum>``, with swtpm."""
    def look(caps: DomainCapabilities) -> Finding:
        tpm = caps.devices.tpm
        if tpm.supported is None:
            return Finding(K, "do not report <tpm>", "devices/tpm")
        if not tpm.supported:
            return Finding(U, "mark <tpm> unsupported", "devices/tpm")
        backends = tpm.values("backendModel")
        backend_el = "devices/tpm/enum[@name='backendModel']"
        if TPM_EMULATOR not in backends:
            if not backends:
                return Finding(K, "list no TPM backend models", backend_el)
            return Finding(U, f"list TPM backends {', '.join(backends)} but "
                           f"not {TPM_EMULATOR!r} (swtpm is missing)",
                           backend_el)
        values = tpm.values(enum)
        element = f"devices/tpm/enum[@name='{enum}']"
        if value in values:
            return Finding(A, f"list {what} {value!r} with the "
                           f"{TPM_EMULATOR!r} (swtpm) backend",
                           f"{element}/value")
        if not values:
            return Finding(K, f"list the {TPM_EMULATOR!r} backend but no "
                           f"{what}s", element)
        return Finding(U, f"list {what}s {', '.join(values)} but not "
                       f"{value!r}", element)
    return look


def _derive_tpm(inputs: DerivationInputs) -> Iterator[TraitResult]:
    for trait, (enum, what, value) in _TPM.items():
        yield combine(TPM, trait, inputs.domains, _tpm_look(enum, what, value))


TPM = TraitFamily("TPM", frozenset(_TPM), _derive_tpm)

# ---------------------------------------------------------------- vIOMMU

#: Model → trait, for the concrete models (``auto`` is handled apart).
_VIOMMU = {
    "intel": os_traits.COMPUTE_VIOMMU_MODEL_INTEL,
    "smmuv3": os_traits.COMPUTE_VIOMMU_MODEL_SMMUV3,
    "virtio": os_traits.COMPUTE_VIOMMU_MODEL_VIRTIO,
}
#: libvirt that knows ``<iommu model='virtio'>`` (Nova's minimum).
MIN_LIBVIRT_VIOMMU_VIRTIO = 8_003_000
_X86 = ("x86_64", "i686")
#: Virt types whose documents describe a QEMU emulator (vIOMMU fallback).
_QEMU_DOCUMENT_TYPES = QEMU_VIRT_TYPES + ("hvf",)

#: Model → the machines virtdriver's fallback rule gives it.
_VIOMMU_FALLBACK = {
    "intel": "x86 q35 machines have it",
    "smmuv3": "aarch64 virt machines have it",
    "virtio": "x86 q35 and aarch64 virt machines have it with libvirt >= "
              "8.3.0",
}


def _viommu_fallback(caps: DomainCapabilities, model: str,
                     libvirt_version: int | None) -> Finding:
    """virtdriver's rule for a document without ``<iommu>`` (module doc)."""
    element = "devices/iommu"
    if caps.virt_type not in _QEMU_DOCUMENT_TYPES:
        return Finding(K, "do not report <iommu>, and virtdriver has no "
                       f"fallback rule for virt type {caps.virt_type!r}",
                       element)
    arch, machine = caps.arch or "", caps.machine or ""
    q35 = arch in _X86 and "q35" in machine
    arm_virt = arch == "aarch64" and machine.startswith("virt")
    rule = _VIOMMU_FALLBACK[model]
    head = (f"do not report <iommu>; by virtdriver's fallback rule "
            f"{machine or 'default machine'} guests on {arch}")
    ok = {"intel": q35, "smmuv3": arm_virt, "virtio": q35 or arm_virt}[model]
    if ok and model == "virtio":
        if libvirt_version is None:
            return Finding(K, f"{head} get vIOMMU model 'virtio' only with "
                           "libvirt >= 8.3.0, and the libvirt version is "
                           "unknown", element)
        ok = libvirt_version >= MIN_LIBVIRT_VIOMMU_VIRTIO
        rule += f"; libvirt is {version_text(libvirt_version)}"
    if ok:
        return Finding(A, f"{head} can use vIOMMU model {model!r} ({rule})",
                       element)
    return Finding(U, f"{head} cannot use vIOMMU model {model!r} (only "
                   f"{rule})", element)


def _viommu_look(model: str, libvirt_version: int | None) -> Look:
    def look(caps: DomainCapabilities) -> Finding:
        if caps.devices.iommu.reported:
            return enum_finding("iommu", "vIOMMU model", "model", model, caps,
                                element_path="devices/iommu")
        return _viommu_fallback(caps, model, libvirt_version)
    return look


def _auto_look(libvirt_version: int | None) -> Look:
    """Asserted when the document offers any concrete vIOMMU model."""
    def look(caps: DomainCapabilities) -> Finding:
        found = {model: _viommu_look(model, libvirt_version)(caps)
                 for model in _VIOMMU}
        offered = [model for model, f in found.items() if f.state is A]
        if offered:
            return Finding(A, "offer vIOMMU models "
                           f"{', '.join(offered)}, so 'auto' has one to pick",
                           "devices/iommu")
        unknown = [f.detail for f in found.values() if f.state is K]
        if unknown:
            return Finding(K, unknown[0], "devices/iommu")
        return Finding(U, "offer no vIOMMU model for 'auto' to pick",
                       "devices/iommu")
    return look


def _derive_viommu(inputs: DerivationInputs) -> Iterator[TraitResult]:
    version = inputs.libvirt_version
    for model, trait in _VIOMMU.items():
        yield combine(VIOMMU, trait, inputs.domains,
                      _viommu_look(model, version))
    yield combine(VIOMMU, os_traits.COMPUTE_VIOMMU_MODEL_AUTO, inputs.domains,
                  _auto_look(version))


VIOMMU = TraitFamily(
    "vIOMMU model",
    frozenset(_VIOMMU.values()) | {os_traits.COMPUTE_VIOMMU_MODEL_AUTO},
    _derive_viommu)

FAMILIES = (STORAGE_BUS, GRAPHICS_MODEL, TPM, VIOMMU)
