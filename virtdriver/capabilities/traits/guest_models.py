"""Guest device traits from static tables: NIC and sound models, virtio packed.

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

from virtdriver.capabilities.traits.config import OPTION_VIRT_TYPE
from virtdriver.capabilities.traits.model import (
    DerivationInputs, Evidence, TraitFamily, TraitResult, TraitState)

A, U, K = TraitState.ASSERTED, TraitState.UNASSERTED, TraitState.UNKNOWN
#: Virt types that run guests with QEMU.
QEMU_VIRT_TYPES = ("kvm", "qemu")

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
    if virt not in QEMU_VIRT_TYPES:
        yield VIRTIO_PACKED.result(trait, K, Evidence(
            document, f"= {virt}: virtdriver has a rule for packed "
            "virtqueues only for QEMU (kvm, qemu)"))
        return
    state, words = _gate(inputs, VIRTIO_PACKED_GATE)
    yield VIRTIO_PACKED.result(trait, state, Evidence(
        document, f"= {virt}: packed virtqueues {words}"))


VIRTIO_PACKED = TraitFamily("virtio packed", frozenset(
    {os_traits.COMPUTE_NET_VIRTIO_PACKED}), _derive_virtio_packed)

FAMILIES = (VIF_MODEL, SOUND_MODEL, VIRTIO_PACKED)
