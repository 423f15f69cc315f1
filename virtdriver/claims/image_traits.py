"""Image properties as required (and forbidden) traits: one table, one place.

:func:`image_traits` turns an image's properties (and its disk format) into
the traits a host must have — or must not have — to run it, each with the
property and value that asked for it.  It is the image side of the traits
the drivers publish from domain capabilities, and follows what OpenStack's
scheduler derives from an image before it asks Placement (Nova's image
metadata prefilter, image type, packed virtqueue, secure boot, vTPM and
memory encryption translations); docs/claims.md lists every row, one
example each, and where virtdriver differs from Nova and why.

Pure: no I/O.  Nothing raises for a bad value: each is a
:class:`~virtdriver.claims.model.Problem` naming the property and the
valid values, so a typo is never silently ignored.  Every name comes from
os-traits (the rows are built from its own lists) or is an explicit
``trait:CUSTOM_*`` property.
"""

from __future__ import annotations

import functools

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import os_traits

from virtdriver.capabilities.traits.names import invalid_reason
from virtdriver.claims.model import ClaimError, Problem

REQUIRED, FORBIDDEN = "required", "forbidden"
#: The image key of the disk format (a Glance image field, not a property).
DISK_FORMAT = "disk_format"
TRAIT_PREFIX = "trait:"

_TRUE = frozenset({"1", "t", "true", "on", "y", "yes"})
_FALSE = frozenset({"0", "f", "false", "off", "n", "no"})


def normalise(value: str) -> str:
    """A value as the table keys it: trimmed, lower case, ``-``, ``.`` and
    spaces as ``_`` (``VirtIO`` → ``virtio``, ``spapr-vlan`` →
    ``spapr_vlan``, ``2.0`` → ``2_0``)."""
    text = value.strip().lower()
    for separator in "-. ":
        text = text.replace(separator, "_")
    return text


@dataclass(frozen=True)
class Choice:
    """One row of the table: a property whose value names one trait.

    Attributes:
        key: the image property (or :data:`DISK_FORMAT`).
        prefix: the os-traits prefix its traits share.
        spellings: normalised suffix → how users write it (messages and
            docs); default: the suffix in lower case.
        aliases: other normalised spellings → the normalised suffix they
            mean (``amd64`` → ``x86_64``).
        nova: how Nova reads the property (for docs/claims.md).
    """

    key: str
    prefix: str
    spellings: Mapping[str, str] = field(default_factory=dict)
    aliases: Mapping[str, str] = field(default_factory=dict)
    nova: str = ""

    def traits(self) -> dict[str, str]:
        """Normalised value → trait, from os-traits' list for the prefix."""
        return _by_prefix(self.prefix)

    def valid(self) -> list[str]:
        """Every accepted value, as users write it."""
        return sorted(self.spellings.get(v, v) for v in self.traits())

    def trait_of(self, value: str) -> str | None:
        """The trait ``value`` names, or ``None``."""
        key = normalise(value)
        return self.traits().get(self.aliases.get(key, key))


@functools.cache
def _by_prefix(prefix: str) -> dict[str, str]:
    return {normalise(trait[len(prefix):]): trait
            for trait in os_traits.get_traits(prefix)}


_NOVA_PREFILTER = ("Nova's image metadata prefilter ([scheduler] "
                   "image_metadata_prefilter) requires it on the root "
                   "provider")
_ARCH_ALIASES = {"i386": "i686", "i486": "i686", "i586": "i686",
                 "x86_32": "i686", "x86_32p": "i686", "amd64": "x86_64",
                 "armv6l": "armv6", "armv7l": "armv7"}

#: The properties whose value names a trait, in the order docs list them.
CHOICES = (
    Choice("hw_disk_bus", "COMPUTE_STORAGE_BUS_", nova=_NOVA_PREFILTER),
    Choice("hw_cdrom_bus", "COMPUTE_STORAGE_BUS_", nova=_NOVA_PREFILTER),
    Choice("hw_video_model", "COMPUTE_GRAPHICS_MODEL_",
           nova=_NOVA_PREFILTER),
    Choice("hw_vif_model", "COMPUTE_NET_VIF_MODEL_",
           spellings={"spapr_vlan": "spapr-vlan"},
           # Nova's legacy VMware spellings, canonicalised as Nova does.
           aliases={"virtuale1000": "e1000", "virtuale1000e": "e1000e",
                    "virtualpcnet32": "pcnet", "virtualvmxnet": "vmxnet",
                    "virtualvmxnet3": "vmxnet3",
                    "virtualsriovethernetcard": "sriov"},
           nova=_NOVA_PREFILTER),
    Choice("hw_viommu_model", "COMPUTE_VIOMMU_MODEL_",
           nova="Nova's prefilter builds COMPUTE_VIOMMU_<MODEL>, a name "
                "os-traits lacks, and then drops every prefilter trait"),
    Choice("hw_architecture", "HW_ARCH_", aliases=_ARCH_ALIASES,
           nova=_NOVA_PREFILTER + " (armv7l: HW_ARCH_ARMV7L, a name "
                "os-traits lacks, so Nova drops every prefilter trait)"),
    Choice("hw_emulation_architecture", "COMPUTE_ARCH_",
           aliases={"amd64": "x86_64"}, nova=_NOVA_PREFILTER),
    Choice("hw_sound_model", "COMPUTE_SOUND_MODEL_",
           nova="Nova requires COMPUTE_SOUND_MODEL_VIRTIO for virtio only"),
    Choice(DISK_FORMAT, "COMPUTE_IMAGE_TYPE_",
           nova="Nova's image type filter ([scheduler] "
                "query_placement_for_image_type_support), not when "
                "booting from a volume"),
)
CHOICE_KEYS = frozenset(c.key for c in CHOICES)

#: Booleans that require one trait when true.
FLAGS = {
    "hw_virtio_packed_ring": os_traits.COMPUTE_NET_VIRTIO_PACKED,
}

SECURE_BOOT = "os_secure_boot"
SECURE_BOOT_VALUES = ("required", "disabled", "optional")
FIRMWARE = Choice("hw_firmware_type", "COMPUTE_FIRMWARE_",
                  nova="not a trait in Nova")
TPM_VERSION = Choice("hw_tpm_version", "COMPUTE_SECURITY_TPM_",
                     spellings={"1_2": "1.2", "2_0": "2.0"},
                     aliases={"2": "2_0", "v2_0": "2_0", "v1_2": "1_2"})
TPM_MODEL = Choice("hw_tpm_model", "COMPUTE_SECURITY_TPM_",
                   spellings={"tis": "tpm-tis", "crb": "tpm-crb"},
                   aliases={"tpm_tis": "tis", "tpm_crb": "crb"})
#: Nova's default vTPM model when an image asks a version only.
TPM_DEFAULT_MODEL = "tpm-tis"
MEM_ENCRYPTION = "hw_mem_encryption"
MEM_ENCRYPTION_MODEL = "hw_mem_encryption_model"
#: ``hw_mem_encryption_model`` value → trait (Nova's spellings).
MEM_ENCRYPTION_MODELS = {
    "amd-sev": os_traits.HW_CPU_X86_AMD_SEV,
    "amd-sev-es": os_traits.HW_CPU_X86_AMD_SEV_ES,
    "amd-sev-snp": os_traits.HW_CPU_X86_AMD_SEV_SNP,
    "intel-tdx": os_traits.HW_CPU_X86_INTEL_TDX,
}
#: Nova's model when ``hw_mem_encryption`` is true and no model is named.
MEM_ENCRYPTION_DEFAULT = "amd-sev"

#: Every key :func:`image_traits` reads (besides ``trait:*``).
KEYS = frozenset({*CHOICE_KEYS, *FLAGS, SECURE_BOOT, FIRMWARE.key,
                  TPM_VERSION.key, TPM_MODEL.key, MEM_ENCRYPTION,
                  MEM_ENCRYPTION_MODEL})


@dataclass(frozen=True)
class Source:
    """The image property (and value) that asked for a trait.

    Attributes:
        key: the property (``hw_disk_bus``, ``trait:CUSTOM_X``,
            ``disk_format``).
        value: its value as given.
        note: what else the answer rests on (a default), if anything.
    """

    key: str
    value: Any
    note: str = ""

    def __str__(self) -> str:
        return f"{self.key}={self.value!r}" + (
            f" ({self.note})" if self.note else "")


@dataclass(frozen=True)
class ImageTrait:
    """One trait an image requires or forbids, and why.

    Attributes:
        trait: the trait name.
        requirement: :data:`REQUIRED` or :data:`FORBIDDEN`.
        sources: every property that asked for it (at least one).
    """

    trait: str
    requirement: str
    sources: tuple[Source, ...]

    @property
    def implied_by(self) -> str:
        """The sources in one phrase: ``hw_disk_bus='ide'``."""
        return ", ".join(str(s) for s in self.sources)

    def to_json(self) -> dict[str, Any]:
        """``{"trait", "requirement", "implied_by": [{key, value, note}]}``."""
        return {"trait": self.trait, "requirement": self.requirement,
                "implied_by": [{"property": s.key, "value": s.value,
                                **({"note": s.note} if s.note else {})}
                               for s in self.sources]}


@dataclass(frozen=True)
class ImageTraits:
    """What :func:`image_traits` found.

    Attributes:
        traits: every required and forbidden trait, sorted by
            requirement (required first), then name.
        problems: every property whose value names no trait.
    """

    traits: tuple[ImageTrait, ...] = ()
    problems: tuple[Problem, ...] = ()

    @property
    def required(self) -> frozenset[str]:
        """The required trait names."""
        return frozenset(t.trait for t in self.traits
                         if t.requirement == REQUIRED)

    @property
    def forbidden(self) -> frozenset[str]:
        """The forbidden trait names."""
        return frozenset(t.trait for t in self.traits
                         if t.requirement == FORBIDDEN)

    def get(self, trait: str) -> ImageTrait | None:
        """The entry for ``trait``, if the image asks for it."""
        return next((t for t in self.traits if t.trait == trait), None)

    def implied_by(self, trait: str) -> str:
        """What asked for ``trait`` (``""`` when nothing did)."""
        found = self.get(trait)
        return found.implied_by if found else ""

    def query(self) -> str:
        """Placement's filter: ``required=A,B,!C`` (``""`` for none)."""
        names = [*sorted(self.required),
                 *(f"!{t}" for t in sorted(self.forbidden))]
        return f"required={','.join(names)}" if names else ""

    def to_json(self) -> dict[str, Any]:
        """Required and forbidden names, each trait's sources, the query
        and the problems."""
        return {"required": sorted(self.required),
                "forbidden": sorted(self.forbidden),
                "query": self.query(),
                "traits": [t.to_json() for t in self.traits],
                "problems": [p.message for p in self.problems]}


class InvalidImage(ClaimError):
    """An image asks for what no trait can express; one problem per
    line."""

    def __init__(self, problems: Iterable[Problem]) -> None:
        self.problems = tuple(problems)
        super().__init__("\n".join(p.message for p in self.problems))


def image_traits(image_properties: Mapping[str, Any] | None,
                 disk_format: Any = None) -> ImageTraits:
    """The traits an image requires and forbids, each with its sources.

    ``image_properties`` are Glance's (values as text; JSON numbers and
    booleans are read as their text); ``disk_format`` is the image's
    (``qcow2``, ``raw``, ``iso``…), ``None`` when not known.  See the
    module docstring and docs/claims.md for the table.
    """
    found = _Found()
    props = dict(image_properties or {})
    if disk_format is not None:
        props[DISK_FORMAT] = disk_format
    texts = {k: found.text(k, v) for k, v in sorted(props.items())
             if isinstance(k, str) and (k in KEYS or k.startswith(
                 TRAIT_PREFIX))}
    for choice in CHOICES:
        found.choice(choice, texts.get(choice.key))
    for key, trait in FLAGS.items():
        if found.boolean(key, texts.get(key)):
            found.add(trait, REQUIRED, Source(key, props[key]))
    _secure_boot(found, texts, props)
    found.choice(FIRMWARE, texts.get(FIRMWARE.key))
    _tpm(found, texts, props)
    _mem_encryption(found, texts, props)
    _explicit(found, texts, props)
    return found.result()


def image_traits_or_raise(image_properties: Mapping[str, Any] | None,
                          disk_format: Any = None) -> ImageTraits:
    """:func:`image_traits`, raising :class:`InvalidImage` on a problem."""
    result = image_traits(image_properties, disk_format)
    if result.problems:
        raise InvalidImage(result.problems)
    return result


class _Found:
    """Traits and problems being collected."""

    def __init__(self) -> None:
        self.traits: dict[tuple[str, str], list[Source]] = {}
        self.problems: list[Problem] = []

    def refuse(self, key: str, value: Any, what: str, valid: Iterable[str]
               ) -> None:
        self.problems.append(Problem(
            f"image {key}={value!r} is not {what}; use one of "
            f"{', '.join(valid)}", {key: value}))

    def add(self, trait: str, requirement: str, source: Source) -> None:
        self.traits.setdefault((trait, requirement), []).append(source)

    def text(self, key: str, value: Any) -> str | None:
        if isinstance(value, bool):
            return "true" if value else "false"
        if isinstance(value, (str, int, float)):
            return str(value)
        self.problems.append(Problem(
            f"image {key}={value!r} is not a string; give the value as "
            "text, e.g. 'virtio'", {key: value}))
        return None

    def choice(self, choice: Choice, value: str | None) -> None:
        if value is None:
            return
        trait = choice.trait_of(value)
        if trait is None:
            self.problems.append(Problem(
                f"image {choice.key}={value!r} matches no {choice.prefix}* "
                f"trait of os-traits; use one of {', '.join(choice.valid())}",
                {choice.key: value}))
        else:
            self.add(trait, REQUIRED, Source(choice.key, value))

    def boolean(self, key: str, value: str | None) -> bool:
        if value is None:
            return False
        word = value.strip().lower()
        if word in _TRUE | _FALSE:
            return word in _TRUE
        self.refuse(key, value, "a boolean", ("true", "false"))
        return False

    def result(self) -> ImageTraits:
        for trait, requirement in list(self.traits):
            if requirement == REQUIRED and (trait, FORBIDDEN) in self.traits:
                both = [*self.traits[(trait, REQUIRED)],
                        *self.traits[(trait, FORBIDDEN)]]
                self.problems.append(Problem(
                    f"image {' and '.join(str(s) for s in both)} both "
                    f"require and forbid {trait}; keep one",
                    {s.key: s.value for s in both}))
        order = {REQUIRED: 0, FORBIDDEN: 1}
        traits = sorted(self.traits.items(),
                        key=lambda kv: (order[kv[0][1]], kv[0][0]))
        return ImageTraits(
            tuple(ImageTrait(t, r, tuple(sources))
                  for (t, r), sources in traits),
            tuple(self.problems))


def _secure_boot(found: _Found, texts, props) -> None:
    value = texts.get(SECURE_BOOT)
    if value is None:
        return
    word = normalise(value)
    if word not in SECURE_BOOT_VALUES:
        found.refuse(SECURE_BOOT, value, "a secure boot policy",
                     SECURE_BOOT_VALUES)
    elif word == "required":
        found.add(os_traits.COMPUTE_SECURITY_UEFI_SECURE_BOOT, REQUIRED,
                  Source(SECURE_BOOT, props[SECURE_BOOT]))


def _tpm(found: _Found, texts, props) -> None:
    version, model = texts.get(TPM_VERSION.key), texts.get(TPM_MODEL.key)
    if version is None:
        if model is not None:
            found.problems.append(Problem(
                f"image {TPM_MODEL.key}={props[TPM_MODEL.key]!r} without "
                f"{TPM_VERSION.key}: a vTPM is asked for by its version; "
                f"set {TPM_VERSION.key} (1.2 or 2.0) or remove "
                f"{TPM_MODEL.key}", {TPM_MODEL.key: props[TPM_MODEL.key]}))
        return
    version_trait = _tpm_trait(found, TPM_VERSION, version, ("1.2", "2.0"))
    model_trait = _tpm_trait(found, TPM_MODEL, model or TPM_DEFAULT_MODEL,
                             ("tpm-tis", "tpm-crb"))
    if version_trait is None or model_trait is None:
        return
    if (version_trait == os_traits.COMPUTE_SECURITY_TPM_1_2
            and model_trait == os_traits.COMPUTE_SECURITY_TPM_CRB):
        found.problems.append(Problem(
            f"image {TPM_MODEL.key}={props[TPM_MODEL.key]!r} needs TPM "
            f"2.0, not {TPM_VERSION.key}={props[TPM_VERSION.key]!r}; use "
            "tpm-tis with 1.2, or version 2.0",
            {TPM_MODEL.key: props[TPM_MODEL.key],
             TPM_VERSION.key: props[TPM_VERSION.key]}))
        return
    found.add(version_trait, REQUIRED,
              Source(TPM_VERSION.key, props[TPM_VERSION.key]))
    found.add(model_trait, REQUIRED,
              Source(TPM_MODEL.key, props[TPM_MODEL.key]) if model else
              Source(TPM_VERSION.key, props[TPM_VERSION.key],
                     f"{TPM_MODEL.key} unset: {TPM_DEFAULT_MODEL}"))


def _tpm_trait(found: _Found, choice: Choice, value: str,
               valid: tuple[str, ...]) -> str | None:
    # Both rows share COMPUTE_SECURITY_TPM_: each accepts only its own.
    trait = choice.trait_of(value)
    if trait is not None and choice.spellings.get(
            trait[len(choice.prefix):].lower()) in valid:
        return trait
    found.refuse(choice.key, value, f"a {choice.key} value", valid)
    return None


def _mem_encryption(found: _Found, texts, props) -> None:
    enabled = found.boolean(MEM_ENCRYPTION, texts.get(MEM_ENCRYPTION))
    model = texts.get(MEM_ENCRYPTION_MODEL)
    if model is not None:
        name = normalise(model).replace("_", "-")
        if name not in MEM_ENCRYPTION_MODELS:
            found.refuse(MEM_ENCRYPTION_MODEL, model, "a memory encryption "
                         "model", sorted(MEM_ENCRYPTION_MODELS))
            return
        if not enabled:
            found.problems.append(Problem(
                f"image {MEM_ENCRYPTION_MODEL}={model!r} without "
                f"{MEM_ENCRYPTION}=true; set {MEM_ENCRYPTION}=true or "
                f"remove {MEM_ENCRYPTION_MODEL}",
                {MEM_ENCRYPTION_MODEL: model,
                 MEM_ENCRYPTION: props.get(MEM_ENCRYPTION)}))
            return
        found.add(MEM_ENCRYPTION_MODELS[name], REQUIRED,
                  Source(MEM_ENCRYPTION_MODEL, props[MEM_ENCRYPTION_MODEL]))
    elif enabled:
        found.add(MEM_ENCRYPTION_MODELS[MEM_ENCRYPTION_DEFAULT], REQUIRED,
                  Source(MEM_ENCRYPTION, props[MEM_ENCRYPTION],
                         f"{MEM_ENCRYPTION_MODEL} unset: "
                         f"{MEM_ENCRYPTION_DEFAULT}"))


def _explicit(found: _Found, texts, props) -> None:
    for key in sorted(k for k in texts if k.startswith(TRAIT_PREFIX)):
        value, name = texts[key], key[len(TRAIT_PREFIX):]
        if value is None:
            continue
        reason = invalid_reason(name)
        if reason:
            found.problems.append(Problem(
                f"image property {key!r}: {name!r} is not a valid trait "
                f"name: {reason}; name a "
                "standard trait or a CUSTOM_ one", {key: props[key]}))
        elif value in (REQUIRED, FORBIDDEN):
            found.add(name, value, Source(key, props[key]))
        else:
            found.refuse(key, props[key], "a trait requirement",
                         (REQUIRED, FORBIDDEN))
