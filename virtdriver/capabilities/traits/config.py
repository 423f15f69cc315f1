"""The configuration trait derivation reads, with the option behind each."""

from __future__ import annotations

from dataclasses import dataclass, replace

from virtdriver.capabilities.host import HostCapabilities

#: Option names, as an operator writes them; named in evidence.
OPTION_VIRT_TYPE = "[libvirt] virt_type"
OPTION_CPU_MODE = "[libvirt] cpu_mode"
OPTION_CPU_MODELS = "[libvirt] cpu_models"
OPTION_CPU_EXTRA_FLAGS = "[libvirt] cpu_model_extra_flags"
OPTION_MACHINE_TYPE = "[libvirt] hw_machine_type"
OPTION_IMAGE_TYPE_EXCLUDE = "[compute] image_type_exclude_list"

CPU_MODES = ("host-model", "host-passthrough", "custom", "none")


@dataclass(frozen=True, slots=True)
class TraitConfig:
    """Options that steer trait derivation (OpenStack-shaped names).

    Attributes:
        virt_type: ``kvm``, ``qemu``, … — which domain capabilities count;
            ``None`` chooses from the host (see :meth:`resolved`).
        cpu_mode: guest CPU mode; ``None`` means the default for the virt
            type (see :attr:`effective_cpu_mode`).
        cpu_models: named models for ``custom`` mode, in preference order.
        cpu_model_extra_flags: ``+flag`` adds a CPU feature to guests,
            ``-flag`` removes it; a bare ``flag`` adds.
        machine_types: (arch, machine type) pairs guests of that arch boot
            on, besides the arch's default machine.
        image_type_exclude_list: image formats not offered even when the
            driver supports them (``raw``, ``qcow2``, …).
    """

    virt_type: str | None = None
    cpu_mode: str | None = None
    cpu_models: tuple[str, ...] = ()
    cpu_model_extra_flags: tuple[str, ...] = ()
    machine_types: tuple[tuple[str, str], ...] = ()
    image_type_exclude_list: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.cpu_mode is not None and self.cpu_mode not in CPU_MODES:
            raise ValueError(
                f"{OPTION_CPU_MODE} = {self.cpu_mode!r} is not one of "
                f"{', '.join(CPU_MODES)}")
        if self.cpu_models and self.effective_cpu_mode != "custom":
            raise ValueError(
                f"{OPTION_CPU_MODELS} is set but {OPTION_CPU_MODE} is "
                f"{self.effective_cpu_mode!r}; set cpu_mode = custom or "
                "drop cpu_models")
        if self.cpu_mode == "custom" and not self.cpu_models:
            raise ValueError(f"{OPTION_CPU_MODE} = custom needs "
                             f"{OPTION_CPU_MODELS}")

    @property
    def effective_cpu_mode(self) -> str:
        """The CPU mode in force: ``cpu_mode``, or host-model for kvm/qemu
        and none for other virt types when it is unset."""
        if self.cpu_mode is not None:
            return self.cpu_mode
        return ("host-model" if self.virt_type in (None, "kvm", "qemu")
                else "none")

    def resolved(self, host: HostCapabilities | None) -> TraitConfig:
        """This config with ``virt_type`` chosen when it is unset: ``kvm``
        when libvirt offers kvm guests of the host's arch, else ``qemu``."""
        if self.virt_type is not None or host is None:
            return self
        kvm = any(guest.arch == host.cpu.arch and "kvm" in guest.domain_types
                  for guest in host.guests)
        return replace(self, virt_type="kvm" if kvm else "qemu")

    def machine_types_for(self, arch: str) -> tuple[str, ...]:
        """Configured machine types for ``arch``."""
        return tuple(machine for a, machine in self.machine_types
                     if a == arch)
