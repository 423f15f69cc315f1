"""Traits read from host capabilities: architecture, emulation, SMT, NUMA.

* ``HW_ARCH_<arch>``: the host CPU's architecture; every other
  ``HW_ARCH_*`` is unasserted.
* ``COMPUTE_ARCH_<arch>``: each architecture the host can run guests of
  (a ``<guest>`` with an emulator); one whose emulator disappears becomes
  unasserted at the next derivation.
* ``HW_CPU_HYPERTHREADING``: some NUMA-cell CPU has more than one sibling
  among the CPUs guests may use.
* ``HW_NUMA_ROOT``: carried by NUMA-cell providers only; on the compute
  node root it is unasserted (see :func:`numa_cell_result`).
* ``COMPUTE_NODE``: every host a compute driver reports is a compute node.
"""

from __future__ import annotations

from collections.abc import Iterator

import os_traits

from virtdriver.capabilities.host import HostCapabilities, NUMACell
from virtdriver.capabilities.traits.model import (
    DerivationInputs, Evidence, TraitFamily, TraitResult, TraitState)
from virtdriver.cpuset import format_cpuset

HOST_DOCUMENT = "host capabilities"

# libvirt arch names whose os-traits spelling is not simply upper-cased.
_ARCH_ALIASES = {
    "armv6l": os_traits.HW_ARCH_ARMV6,
    "armv7l": os_traits.HW_ARCH_ARMV7,
    "armv7b": os_traits.HW_ARCH_ARMV7B,
}
_HW_ARCH = frozenset(os_traits.get_traits("HW_ARCH_"))
_COMPUTE_ARCH = frozenset(os_traits.get_traits("COMPUTE_ARCH_"))


def hw_arch_trait(arch: str) -> str | None:
    """The ``HW_ARCH_*`` trait for a libvirt arch name, if os-traits has one."""
    trait = _ARCH_ALIASES.get(arch) or f"HW_ARCH_{arch.upper()}"
    return trait if trait in _HW_ARCH else None


def compute_arch_trait(arch: str) -> str | None:
    """The ``COMPUTE_ARCH_*`` trait for a libvirt arch name, if any."""
    trait = f"COMPUTE_ARCH_{arch.upper()}"
    return trait if trait in _COMPUTE_ARCH else None


def _unknown_host(family: TraitFamily, traits, inputs: DerivationInputs
                  ) -> Iterator[TraitResult]:
    why = Evidence(HOST_DOCUMENT, f"could not be read: {inputs.host_error}")
    for trait in sorted(traits):
        yield family.result(trait, TraitState.UNKNOWN, why)


def _derive_arch(inputs: DerivationInputs) -> Iterator[TraitResult]:
    host = inputs.host
    if host is None:
        yield from _unknown_host(ARCH, ARCH.traits, inputs)
        return
    arch = host.cpu.arch
    mine = hw_arch_trait(arch) if arch else None
    emulated = {compute_arch_trait(g.arch): g for g in host.guests
                if g.emulator or any(d.emulator for d in g.domains)}
    for trait in sorted(_HW_ARCH):
        if not arch:
            yield ARCH.result(trait, TraitState.UNKNOWN, Evidence(
                HOST_DOCUMENT, "do not name the host CPU arch", host.source,
                "host/cpu/arch"))
        else:
            state = (TraitState.ASSERTED if trait == mine
                     else TraitState.UNASSERTED)
            yield ARCH.result(trait, state, Evidence(
                HOST_DOCUMENT, f"give the host CPU arch as {arch!r}",
                host.source, "host/cpu/arch"))
    for trait in sorted(_COMPUTE_ARCH):
        guest = emulated.get(trait)
        if guest is not None:
            emulator = guest.emulator or next(
                d.emulator for d in guest.domains if d.emulator)
            yield ARCH.result(trait, TraitState.ASSERTED, Evidence(
                HOST_DOCUMENT, f"list {guest.arch!r} guests with emulator "
                f"{emulator}", host.source,
                f"guest/arch[@name='{guest.arch}']/emulator"))
        else:
            listed = ", ".join(host.guest_arches) or "none"
            yield ARCH.result(trait, TraitState.UNASSERTED, Evidence(
                HOST_DOCUMENT, f"list guest arches {listed}, with no "
                "emulator for this one", host.source, "guest/arch"))


def _derive_smt(inputs: DerivationInputs) -> Iterator[TraitResult]:
    host = inputs.host
    trait = os_traits.HW_CPU_HYPERTHREADING
    if host is None:
        yield from _unknown_host(SMT, SMT.traits, inputs)
        return
    if not host.cells:
        yield SMT.result(trait, TraitState.UNKNOWN, Evidence(
            HOST_DOCUMENT, "list no NUMA cells, so no CPU siblings",
            host.source, "host/topology/cells"))
        return
    usable = inputs.usable_cpus
    scope = ("" if usable is None
             else f" among usable CPUs {format_cpuset(usable)}")
    if usable is not None and inputs.online_cpus_note:
        scope += f" ({inputs.online_cpus_note})"
    for cell in host.cells:
        for cpu in cell.cpus:
            siblings = (cpu.siblings if usable is None
                        else cpu.siblings & usable)
            if len(siblings) > 1 and (usable is None or cpu.id in usable):
                yield SMT.result(trait, TraitState.ASSERTED, Evidence(
                    HOST_DOCUMENT, f"list CPU {cpu.id} of NUMA cell "
                    f"{cell.id} with siblings {format_cpuset(siblings)}"
                    f"{scope}", host.source,
                    f"host/topology/cells/cell[@id='{cell.id}']/cpus/"
                    f"cpu[@id='{cpu.id}']/@siblings"))
                return
    yield SMT.result(trait, TraitState.UNASSERTED, Evidence(
        HOST_DOCUMENT, f"list no CPU with more than one sibling{scope}",
        host.source, "host/topology/cells/cell/cpus/cpu/@siblings"))


def _derive_numa_root(inputs: DerivationInputs) -> Iterator[TraitResult]:
    trait = os_traits.HW_NUMA_ROOT
    yield NUMA.result(trait, TraitState.UNASSERTED, Evidence(
        "the provider tree", f"puts {trait} on NUMA-cell providers, never on "
        "the compute node root"))


def numa_cell_result(host: HostCapabilities, cell: NUMACell) -> TraitResult:
    """``HW_NUMA_ROOT`` for the provider of ``cell``: asserted."""
    return NUMA.result(os_traits.HW_NUMA_ROOT, TraitState.ASSERTED, Evidence(
        HOST_DOCUMENT, f"list NUMA cell {cell.id}", host.source,
        f"host/topology/cells/cell[@id='{cell.id}']"))


def _derive_node(inputs: DerivationInputs) -> Iterator[TraitResult]:
    yield NODE.result(os_traits.COMPUTE_NODE, TraitState.ASSERTED, Evidence(
        "the driver", "reports this host as a compute node"))


ARCH = TraitFamily("architecture", _HW_ARCH | _COMPUTE_ARCH, _derive_arch)
SMT = TraitFamily("hyperthreading",
                  frozenset({os_traits.HW_CPU_HYPERTHREADING}), _derive_smt)
NUMA = TraitFamily("NUMA", frozenset({os_traits.HW_NUMA_ROOT}),
                   _derive_numa_root)
NODE = TraitFamily("compute node", frozenset({os_traits.COMPUTE_NODE}),
                   _derive_node)
FAMILIES = (ARCH, SMT, NUMA, NODE)
