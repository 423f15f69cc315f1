"""Build ``getDomainCapabilities()`` documents for one (arch, machine, virt type).

:class:`DomainCapsBuilder` renders the ``<domainCapabilities>`` element
order of libvirt 9.0's QEMU driver (path, domain, machine, arch, vcpu,
iothreads, os, cpu, memoryBacking, devices, features; devices and features
in libvirt's formatter order), with knobs for what the driver and traits
read: disk buses, video models, graphics types, firmware and secure boot,
TPM models and versions, SEV limits, the host-model CPU and custom models.

Elements newer than libvirt 9.0 (Debian 12) are off by default, because
9.0's RelaxNG schema refuses them: ``tdx`` (``<tdx>``, libvirt 11),
``sev_snp``/``launchSecurity`` (libvirt 10/11) and ``firmware_features``
(``<firmwareFeatures>``, libvirt 10).  Turn them on to model a newer host;
such documents parse but do not validate against the 9.0 schema.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from lxml import etree

from virtdriver.fakelibvirt._builder_xml import sub, to_xml, yes_no

_X86 = ("i686", "x86_64")
_ARM = ("aarch64", "armv7l")
_HYPERV_FEATURES = ("relaxed", "vapic", "spinlocks", "vpindex", "runtime",
                    "synic", "stimer", "reset", "vendor_id", "frequencies",
                    "reenlightenment", "tlbflush", "ipi", "evmcs", "avic")
_FIRMWARE_PATHS = {
    "x86_64": ("/usr/share/OVMF/OVMF_CODE_4M.fd",
               "/usr/share/OVMF/OVMF_CODE_4M.ms.fd"),
    "aarch64": ("/usr/share/AAVMF/AAVMF_CODE.fd",
                "/usr/share/AAVMF/AAVMF_CODE.ms.fd"),
}


@dataclass(frozen=True)
class SEV:
    """AMD SEV platform limits (``<features><sev supported='yes'>``)."""

    max_guests: int = 15
    max_es_guests: int = 0
    cbitpos: int = 47
    reduced_phys_bits: int = 1


@dataclass(frozen=True)
class HostModel:
    """The ``host-model`` CPU: model, vendor and required features.

    ``features`` items are names (policy ``require``) or ``(name,
    policy)`` pairs.
    """

    model: str
    vendor: str | None = None
    features: tuple = ()
    fallback: str = "forbid"


@dataclass(frozen=True)
class CPUModelSpec:
    """A named model of the ``custom`` CPU mode."""

    name: str
    usable: bool | None = True
    vendor: str = "unknown"
    deprecated: bool = False


@dataclass(frozen=True)
class DomainCapsBuilder:
    """One domain capabilities document.

    ``machine`` is the resolved machine type named inside the document.
    ``firmware`` lists ``<os><enum name='firmware'>`` values; with
    ``efi`` in it, the loader lists ``loader_paths`` (``None``: the arch's
    usual OVMF/AAVMF paths) and ``secure_boot`` decides whether its
    ``secure`` enum offers ``yes``.  Empty ``disk_buses``, ``video_models``
    or ``tpm_models`` write the device as ``supported='no'``.  ``sev``
    ``None`` writes ``<sev supported='no'/>``.  ``host_model`` takes a
    :class:`HostModel` or ``(model, vendor, features)``; ``custom_models``
    takes :class:`CPUModelSpec` items or names.
    """

    arch: str = "x86_64"
    machine: str = "pc-q35-7.2"
    virt_type: str = "kvm"
    emulator: str | None = None
    vcpu_max: int = 288
    disk_buses: Sequence[str] | None = None
    video_models: Sequence[str] | None = None
    graphics_types: Sequence[str] = ("sdl", "vnc", "spice", "egl-headless",
                                     "dbus")
    firmware: Sequence[str] | None = None
    loader_paths: Sequence[str] | None = None
    secure_boot: bool = True
    tpm_models: Sequence[str] | None = None
    tpm_versions: Sequence[str] = ("2.0",)
    sev: SEV | None = None
    host_model: HostModel | tuple | None = None
    custom_models: Sequence[CPUModelSpec | str] = ()
    gic_versions: Sequence[str] | None = None
    tdx: bool | None = None
    sev_snp: bool = False
    firmware_features: bool = False

    def __post_init__(self) -> None:
        x86 = self.arch in _X86
        defaults = {
            "disk_buses": (("ide", "fdc", "scsi", "virtio", "usb", "sata")
                           if x86 else ("scsi", "virtio", "usb", "sata")),
            "video_models": (("vga", "cirrus", "vmvga", "qxl", "virtio",
                              "none", "bochs", "ramfb")
                             if x86 else ("vga", "virtio", "none", "bochs",
                                          "ramfb")),
            "firmware": ("bios", "efi") if x86 else ("efi",),
            "tpm_models": (("tpm-tis", "tpm-crb") if x86
                           else ("tpm-tis",) if self.arch == "aarch64"
                           else ()),
            "gic_versions": ("2", "3") if self.arch in _ARM else (),
        }
        for name, value in defaults.items():
            if getattr(self, name) is None:
                object.__setattr__(self, name, value)
        if self.emulator is None:
            binary = {"i686": "i386", "armv7l": "arm"}.get(self.arch,
                                                           self.arch)
            object.__setattr__(self, "emulator",
                               f"/usr/bin/qemu-system-{binary}")
        if self.loader_paths is None:
            paths = _FIRMWARE_PATHS.get(self.arch, ())
            object.__setattr__(self, "loader_paths",
                               paths if self.secure_boot else paths[:1])
        if isinstance(self.host_model, tuple):
            object.__setattr__(self, "host_model", HostModel(*self.host_model))
        object.__setattr__(self, "custom_models", tuple(
            CPUModelSpec(m) if isinstance(m, str) else m
            for m in self.custom_models))

    def to_xml(self) -> str:
        """The ``<domainCapabilities>`` document."""
        root = etree.Element("domainCapabilities")
        sub(root, "path", self.emulator)
        sub(root, "domain", self.virt_type)
        sub(root, "machine", self.machine)
        sub(root, "arch", self.arch)
        sub(root, "vcpu", max=self.vcpu_max)
        sub(root, "iothreads", supported="yes")
        self._os(sub(root, "os", supported="yes"))
        self._cpu(sub(root, "cpu"))
        _enum(sub(root, "memoryBacking", supported="yes"), "sourceType",
              ("file", "anonymous", "memfd"))
        self._devices(sub(root, "devices"))
        self._features(sub(root, "features"))
        return to_xml(root)

    def _os(self, os_el: etree._Element) -> None:
        _enum(os_el, "firmware", self.firmware)
        efi = "efi" in self.firmware
        secure = ("yes", "no") if self.secure_boot and efi else ("no",)
        if self.firmware_features:
            features = sub(os_el, "firmwareFeatures", supported="yes")
            _enum(features, "secureBoot", secure)
            _enum(features, "enrolledKeys", secure)
        loader = sub(os_el, "loader", supported=yes_no(efi))
        if efi:
            for path in self.loader_paths:
                sub(loader, "value", path)
            _enum(loader, "type", ("rom", "pflash"))
            _enum(loader, "readonly", ("yes", "no"))
            _enum(loader, "secure", secure)

    def _cpu(self, cpu: etree._Element) -> None:
        native = self.virt_type != "qemu"
        passthrough = sub(cpu, "mode", name="host-passthrough",
                          supported=yes_no(native))
        if native:
            _enum(passthrough, "hostPassthroughMigratable", ("on", "off"))
        maximum = sub(cpu, "mode", name="maximum", supported="yes")
        _enum(maximum, "maximumMigratable", ("on", "off"))
        host = self.host_model
        mode = sub(cpu, "mode", name="host-model",
                   supported=yes_no(host is not None))
        if host is not None:
            sub(mode, "model", host.model, fallback=host.fallback)
            if host.vendor:
                sub(mode, "vendor", host.vendor)
            for feature in host.features:
                name, policy = ((feature, "require")
                                if isinstance(feature, str) else feature)
                sub(mode, "feature", policy=policy, name=name)
        custom = sub(cpu, "mode", name="custom",
                     supported=yes_no(bool(self.custom_models)))
        for model in self.custom_models:
            usable = ("unknown" if model.usable is None
                      else yes_no(model.usable))
            sub(custom, "model", model.name, usable=usable,
                deprecated="yes" if model.deprecated else None,
                vendor=model.vendor)

    def _devices(self, devices: etree._Element) -> None:
        _device(devices, "disk",
                ("diskDevice", ("disk", "cdrom", "floppy", "lun")),
                ("bus", self.disk_buses),
                ("model", ("virtio", "virtio-transitional",
                           "virtio-non-transitional")), key="bus")
        _device(devices, "graphics", ("type", self.graphics_types))
        _device(devices, "video", ("modelType", self.video_models))
        _device(devices, "hostdev", ("mode", ("subsystem",)),
                ("startupPolicy", ("default", "mandatory", "requisite",
                                   "optional")),
                ("subsysType", ("usb", "pci", "scsi")), ("capsType", ()),
                ("pciBackend", ("default", "vfio")), key="mode")
        _device(devices, "rng",
                ("model", ("virtio", "virtio-transitional",
                           "virtio-non-transitional")),
                ("backendModel", ("random", "egd", "builtin")))
        _device(devices, "filesystem",
                ("driverType", ("path", "handle", "virtiofs")))
        _device(devices, "tpm", ("model", self.tpm_models),
                ("backendModel", ("passthrough", "emulator")),
                ("backendVersion", self.tpm_versions))
        _device(devices, "redirdev", ("bus", ("usb",)))
        _device(devices, "channel", ("type", ("pty", "unix", "spicevmc")))

    def _features(self, features: etree._Element) -> None:
        gic = sub(features, "gic", supported=yes_no(bool(self.gic_versions)))
        if self.gic_versions:
            _enum(gic, "version", self.gic_versions)
        # vmcoreinfo needs fw_cfg (x86, Arm); genid is x86 ACPI only.
        sub(features, "vmcoreinfo", supported=yes_no(self.arch in _X86 + _ARM))
        sub(features, "genid", supported=yes_no(self.arch in _X86))
        sub(features, "backingStoreInput", supported="yes")
        sub(features, "backup", supported="yes")
        sub(features, "s390-pv", supported="no")
        if self.tdx is not None:
            sub(features, "tdx", supported=yes_no(self.tdx))
        sev = sub(features, "sev", supported=yes_no(self.sev is not None))
        if self.sev is not None:
            sub(sev, "cbitpos", self.sev.cbitpos)
            sub(sev, "reducedPhysBits", self.sev.reduced_phys_bits)
            sub(sev, "maxGuests", self.sev.max_guests)
            sub(sev, "maxESGuests", self.sev.max_es_guests)
        sub(features, "sgx", supported="no")
        x86_kvm = self.arch in _X86 and self.virt_type == "kvm"
        hyperv = sub(features, "hyperv", supported=yes_no(x86_kvm))
        if x86_kvm:
            _enum(hyperv, "features", _HYPERV_FEATURES)
        if self.tdx is not None or self.sev_snp:
            sectypes = tuple(name for name, on in (
                ("sev", self.sev is not None), ("sev-snp", self.sev_snp),
                ("tdx", bool(self.tdx))) if on)
            launch = sub(features, "launchSecurity",
                         supported=yes_no(bool(sectypes)))
            if sectypes:
                _enum(launch, "sectype", sectypes)


def _enum(parent: etree._Element, name: str, values: Sequence[str]) -> None:
    enum = sub(parent, "enum", name=name)
    for value in values:
        sub(enum, "value", value)


def _device(devices: etree._Element, tag: str,
            *enums: tuple[str, Sequence[str]], key: str | None = None) -> None:
    """A device element: unsupported (bare) when its key enum is empty.

    The key enum is the first one unless ``key`` names another.
    """
    values = dict(enums)[key] if key else enums[0][1]
    el = sub(devices, tag, supported=yes_no(bool(values)))
    if values:
        for name, enum_values in enums:
            _enum(el, name, enum_values)
