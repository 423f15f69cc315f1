"""Device traits: storage buses, graphics and vIOMMU models, vTPM, NICs, sound.

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

Families read from a static table for the configured virt type and the
counted arches, because domain capabilities do not list them:

* **VIF model** — :func:`vif_models`; ``igb`` needs QEMU >= 8.0.0 and
  libvirt >= 9.3.0.
* **sound model** — :func:`sound_models`; ``virtio`` needs QEMU >= 8.2.0
  and libvirt >= 10.4.0.
* **virtio packed** — ``COMPUTE_NET_VIRTIO_PACKED`` with libvirt >= 6.3.0
  and QEMU >= 4.2.0 (kvm and qemu only).

A virt type without a table gives unknown, never unasserted.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping

import os_traits

from virtdriver.capabilities.domain import DomainCapabilities
from virtdriver.capabilities.traits.config import OPTION_VIRT_TYPE
from virtdriver.capabilities.traits.domain_facts import (
    Finding, Look, combine, enum_finding)
from virtdriver.capabilities.traits.model import (
    DerivationInputs, Evidence, TraitFamily, TraitResult, TraitState)

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
_QEMU_VIRT_TYPES = ("kvm", "qemu")
#: Virt types whose documents describe a QEMU emulator (vIOMMU fallback).
_QEMU_DOCUMENT_TYPES = _QEMU_VIRT_TYPES + ("hvf",)

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

# ------------------------------------------------- static per-virt-type tables

#: Model → (minimum libvirt, minimum QEMU), as getLibVersion/getVersion ints.
Gates = Mapping[str, tuple[int, int]]

#: NICs QEMU offers as PCI devices: usable on every arch with PCI.
_QEMU_PCI_NICS = frozenset({"virtio", "e1000", "e1000e", "ne2k_pci", "pcnet",
                            "rtl8139", "vmxnet3", "igb"})
_QEMU_NICS = {"x86_64": _QEMU_PCI_NICS, "i686": _QEMU_PCI_NICS,
              "aarch64": _QEMU_PCI_NICS, "armv7l": _QEMU_PCI_NICS,
              "riscv64": _QEMU_PCI_NICS, "loongarch64": _QEMU_PCI_NICS,
              "ppc64": _QEMU_PCI_NICS | {"spapr-vlan"},
              "ppc64le": _QEMU_PCI_NICS | {"spapr-vlan"},
              "s390x": frozenset({"virtio"})}
_XEN_NICS = frozenset({"netfront", "ne2k_pci", "pcnet", "rtl8139", "e1000"})
#: virt type → arch → VIF models (``None`` arch key: every arch).
_VIF_TABLE: Mapping[str, Mapping[str | None, frozenset[str]]] = {
    "kvm": _QEMU_NICS, "qemu": _QEMU_NICS,
    "xen": {"x86_64": _XEN_NICS, "i686": _XEN_NICS,
            "aarch64": frozenset({"netfront"})},
    "lxc": {None: frozenset()},
}
VIF_GATES: Gates = {"igb": (9_003_000, 8_000_000)}
_VIF_TRAITS = {
    "e1000": os_traits.COMPUTE_NET_VIF_MODEL_E1000,
    "e1000e": os_traits.COMPUTE_NET_VIF_MODEL_E1000E,
    "igb": os_traits.COMPUTE_NET_VIF_MODEL_IGB,
    "ne2k_pci": os_traits.COMPUTE_NET_VIF_MODEL_NE2K_PCI,
    "netfront": os_traits.COMPUTE_NET_VIF_MODEL_NETFRONT,
    "pcnet": os_traits.COMPUTE_NET_VIF_MODEL_PCNET,
    "rtl8139": os_traits.COMPUTE_NET_VIF_MODEL_RTL8139,
    "spapr-vlan": os_traits.COMPUTE_NET_VIF_MODEL_SPAPR_VLAN,
    "virtio": os_traits.COMPUTE_NET_VIF_MODEL_VIRTIO,
    "vmxnet3": os_traits.COMPUTE_NET_VIF_MODEL_VMXNET3,
}

_SOUND_PCI = frozenset({"es1370", "ac97", "ich6", "ich9", "usb", "virtio"})
_SOUND_X86 = _SOUND_PCI | {"sb16", "pcspk"}
_QEMU_SOUND = {"x86_64": _SOUND_X86, "i686": _SOUND_X86,
               "aarch64": _SOUND_PCI, "armv7l": _SOUND_PCI,
               "riscv64": _SOUND_PCI, "loongarch64": _SOUND_PCI,
               "ppc64": _SOUND_PCI, "ppc64le": _SOUND_PCI,
               "s390x": frozenset()}
_SOUND_TABLE: Mapping[str, Mapping[str | None, frozenset[str]]] = {
    "kvm": _QEMU_SOUND, "qemu": _QEMU_SOUND, "lxc": {None: frozenset()},
}
SOUND_GATES: Gates = {"virtio": (10_004_000, 8_002_000)}
_SOUND_TRAITS = {
    "ac97": os_traits.COMPUTE_SOUND_MODEL_AC97,
    "es1370": os_traits.COMPUTE_SOUND_MODEL_ES1370,
    "ich6": os_traits.COMPUTE_SOUND_MODEL_ICH6,
    "ich9": os_traits.COMPUTE_SOUND_MODEL_ICH9,
    "pcspk": os_traits.COMPUTE_SOUND_MODEL_PCSPK,
    "sb16": os_traits.COMPUTE_SOUND_MODEL_SB16,
    "usb": os_traits.COMPUTE_SOUND_MODEL_USB,
    "virtio": os_traits.COMPUTE_SOUND_MODEL_VIRTIO,
}

#: COMPUTE_NET_VIRTIO_PACKED: (minimum libvirt, minimum QEMU), Nova's.
VIRTIO_PACKED_GATE = (6_003_000, 4_002_000)


def _lookup(table: Mapping[str, Mapping[str | None, frozenset[str]]],
            virt_type: str, arch: str) -> frozenset[str] | None:
    by_arch = table.get(virt_type)
    if by_arch is None:
        return None
    return by_arch.get(arch, by_arch.get(None))


def vif_models(virt_type: str, arch: str) -> frozenset[str] | None:
    """VIF models guests of ``virt_type`` on ``arch`` can use, before
    version gates (:data:`VIF_GATES`); ``None`` when virtdriver has no
    table for them."""
    return _lookup(_VIF_TABLE, virt_type, arch)


def sound_models(virt_type: str, arch: str) -> frozenset[str] | None:
    """Sound models guests of ``virt_type`` on ``arch`` can use, before
    version gates (:data:`SOUND_GATES`); ``None`` without a table."""
    return _lookup(_SOUND_TABLE, virt_type, arch)


def version_text(version: int) -> str:
    """``9003000`` → ``"9.3.0"``."""
    return f"{version // 1_000_000}.{version // 1000 % 1000}.{version % 1000}"


def _gate(inputs: DerivationInputs, gate: tuple[int, int]
          ) -> tuple[TraitState, str]:
    """Whether libvirt and QEMU are new enough, and the words for it."""
    need_lv, need_qemu = gate
    have_lv, have_qemu = inputs.libvirt_version, inputs.hypervisor_version
    need = (f"libvirt >= {version_text(need_lv)} and QEMU >= "
            f"{version_text(need_qemu)}")
    if have_lv is None or have_qemu is None:
        return K, f"needs {need}, and the versions are unknown"
    have = f"libvirt {version_text(have_lv)}, QEMU {version_text(have_qemu)}"
    if have_lv >= need_lv and have_qemu >= need_qemu:
        return A, f"needs {need}: {have}"
    return U, f"needs {need}, but this host has {have}"


def guest_arches(inputs: DerivationInputs) -> tuple[str, ...]:
    """Arches guests run as: those of the counted domain capabilities, or
    the host's own arch when none were counted."""
    arches = [reading.key.arch for reading in inputs.domains]
    if not arches and inputs.host is not None and inputs.host.cpu.arch:
        arches = [inputs.host.cpu.arch]
    return tuple(dict.fromkeys(arches))


def _merge(family: TraitFamily, trait: str,
           found: list[tuple[TraitState, Evidence]]) -> TraitResult:
    """Asserted if any arch says so, else unknown if any, else unasserted."""
    for state in (A, K, U):
        evidence = [ev for s, ev in found if s is state]
        if evidence:
            return family.result(trait, state, *evidence)
    raise ValueError(f"no finding for {trait}")  # pragma: no cover


def _table_family(name: str, what: str, table_name: str,
                  traits: Mapping[str, str],
                  models: Callable[[str, str], frozenset[str] | None],
                  gates: Gates) -> TraitFamily:
    """A family asserting ``traits[model]`` for each model the static
    table offers guests of the configured virt type on a counted arch."""
    document = f"config {OPTION_VIRT_TYPE}"

    def finding(inputs: DerivationInputs, arch: str,
                model: str) -> tuple[TraitState, Evidence]:
        virt = inputs.config.virt_type
        offered = models(virt, arch)
        head = f"= {virt}:"
        if offered is None:
            return K, Evidence(document, f"{head} virtdriver has no table of "
                               f"{what}s for {virt} guests on {arch}")
        if model not in offered:
            return U, Evidence(document, f"{head} {arch} guests cannot use "
                               f"{what} {model!r} ({table_name})")
        if model in gates:
            state, words = _gate(inputs, gates[model])
            return state, Evidence(
                document, f"{head} {arch} guests can use {what} {model!r} "
                f"({table_name}), which {words}")
        return A, Evidence(document, f"{head} {arch} guests can use {what} "
                           f"{model!r} ({table_name})")

    def derive(inputs: DerivationInputs) -> Iterator[TraitResult]:
        arches = guest_arches(inputs)
        for model, trait in sorted(traits.items()):
            if not arches:
                yield family.result(trait, K, Evidence(
                    document, f"= {inputs.config.virt_type}, but no guest "
                    "arch is known (no host or domain capabilities)"))
                continue
            yield _merge(family, trait,
                         [finding(inputs, arch, model) for arch in arches])

    family = TraitFamily(name, frozenset(traits.values()), derive)
    return family


VIF_MODEL = _table_family("VIF model", "VIF model",
                          "virtdriver's table of NIC models", _VIF_TRAITS,
                          vif_models, VIF_GATES)
SOUND_MODEL = _table_family("sound model", "sound model",
                            "virtdriver's table of sound models",
                            _SOUND_TRAITS, sound_models, SOUND_GATES)


def _derive_virtio_packed(inputs: DerivationInputs
                          ) -> Iterator[TraitResult]:
    trait = os_traits.COMPUTE_NET_VIRTIO_PACKED
    virt = inputs.config.virt_type
    document = f"config {OPTION_VIRT_TYPE}"
    if virt == "lxc":
        yield VIRTIO_PACKED.result(trait, U, Evidence(
            document, "= lxc: containers have no virtio devices"))
        return
    if virt not in _QEMU_VIRT_TYPES:
        yield VIRTIO_PACKED.result(trait, K, Evidence(
            document, f"= {virt}: virtdriver has a rule for packed "
            "virtqueues only for QEMU (kvm, qemu)"))
        return
    state, words = _gate(inputs, VIRTIO_PACKED_GATE)
    yield VIRTIO_PACKED.result(trait, state, Evidence(
        document, f"= {virt}: packed virtqueues {words}"))


VIRTIO_PACKED = TraitFamily("virtio packed", frozenset(
    {os_traits.COMPUTE_NET_VIRTIO_PACKED}), _derive_virtio_packed)

FAMILIES = (STORAGE_BUS, GRAPHICS_MODEL, TPM, VIOMMU, VIF_MODEL, SOUND_MODEL,
            VIRTIO_PACKED)
