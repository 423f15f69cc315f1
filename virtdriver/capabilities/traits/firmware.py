"""Firmware traits: UEFI, BIOS and UEFI Secure Boot, from domain capabilities.

**Firmware type.**  ``COMPUTE_FIRMWARE_UEFI``/``_BIOS`` come from
``<os><enum name='firmware'>`` (``efi``, ``bios``): the firmware libvirt
can pick for ``<os firmware=...>`` from the firmware descriptors installed
on the host.  A document that lists values shows what it lacks, too, so the
unlisted one is unasserted.  A document that lists **no** values says
nothing: libvirt leaves the enum empty when no descriptor is installed
(QEMU still boots its built-in BIOS), on arches without auto-selection
(ppc64, s390x), and older libvirt, bhyve and libxl omit it — their
``<loader>`` paths do not say which file is UEFI.  Then both traits are
unknown, except that a ``<loader supported='no'>`` rules UEFI out: UEFI
firmware is always a loader.

**Secure Boot.**  ``COMPUTE_SECURITY_UEFI_SECURE_BOOT`` is asserted when
``<loader><enum name='secure'>`` or ``<firmwareFeatures><enum
name='secureBoot'>`` lists ``yes``; unasserted when they list only ``no``
or the loader is unsupported; unknown when neither lists anything.

``COMPUTE_SECURITY_STATELESS_FIRMWARE`` is not derived: the parsed model
has no ``stateless`` loader enum and no document in the corpus carries one,
so there is no evidence to set it by.
"""

from __future__ import annotations

from collections.abc import Iterator

import os_traits

from virtdriver.capabilities.domain import DomainCapabilities, OSCaps
from virtdriver.capabilities.traits.domain_facts import (
    Finding, Look, combine)
from virtdriver.capabilities.traits.model import (
    DerivationInputs, TraitFamily, TraitResult, TraitState)

A, U, K = TraitState.ASSERTED, TraitState.UNASSERTED, TraitState.UNKNOWN

#: trait → value of ``<os><enum name='firmware'>``.
_FIRMWARE = {
    os_traits.COMPUTE_FIRMWARE_BIOS: "bios",
    os_traits.COMPUTE_FIRMWARE_UEFI: "efi",
}
_FIRMWARE_ENUM = "os/enum[@name='firmware']"


def _os_finding(os_caps: OSCaps) -> Finding | None:
    """The finding when ``<os>`` itself is missing or unsupported."""
    if os_caps.supported is None:
        return Finding(K, "do not report <os>", "os")
    if not os_caps.supported:
        return Finding(U, "mark <os> unsupported", "os")
    return None


def firmware_look(value: str) -> Look:
    """Look for firmware ``value`` (``efi``, ``bios``) by the module rule."""
    def look(caps: DomainCapabilities) -> Finding:
        os_caps = caps.os
        early = _os_finding(os_caps)
        if early is not None:
            return early
        listed = os_caps.firmware
        if value in listed:
            return Finding(A, f"list firmware {value!r}",
                           f"{_FIRMWARE_ENUM}/value")
        if listed:
            return Finding(U, f"list firmware {', '.join(listed)} but not "
                           f"{value!r}", _FIRMWARE_ENUM)
        if value == "efi" and os_caps.loader.supported is False:
            return Finding(U, "list no firmware and mark <loader> "
                           "unsupported, so no UEFI firmware can be loaded",
                           "os/loader")
        return Finding(K, "list no firmware values (no firmware descriptors "
                       "installed, an arch without firmware auto-selection, "
                       "or an older libvirt)", _FIRMWARE_ENUM)
    return look


def _derive_firmware(inputs: DerivationInputs) -> Iterator[TraitResult]:
    for trait, value in _FIRMWARE.items():
        yield combine(FIRMWARE, trait, inputs.domains, firmware_look(value))


FIRMWARE = TraitFamily("firmware", frozenset(_FIRMWARE), _derive_firmware)


def secure_boot_look(caps: DomainCapabilities) -> Finding:
    """Whether the loader or the firmware features offer Secure Boot."""
    os_caps = caps.os
    early = _os_finding(os_caps)
    if early is not None:
        return early
    secure = os_caps.loader.secure
    features = os_caps.firmware_features
    feature = (features.values("secureBoot") if features.supported
               else ())
    if "yes" in secure:
        return Finding(A, "list loader secure 'yes'",
                       "os/loader/enum[@name='secure']/value")
    if "yes" in feature:
        return Finding(A, "list firmware feature secureBoot 'yes'",
                       "os/firmwareFeatures/enum[@name='secureBoot']/value")
    if os_caps.loader.supported is False:
        return Finding(U, "mark <loader> unsupported", "os/loader")
    listed = [f"{what} {', '.join(map(repr, values))}" for what, values in
              (("loader secure", secure), ("firmware feature secureBoot",
                                           feature)) if values]
    if listed:
        return Finding(U, f"list only {' and '.join(listed)}, not 'yes'",
                       "os/loader/enum[@name='secure']")
    return Finding(K, "list neither loader secure nor firmware feature "
                   "secureBoot values", "os/loader")


def _derive_secure_boot(inputs: DerivationInputs) -> Iterator[TraitResult]:
    yield combine(SECURE_BOOT, os_traits.COMPUTE_SECURITY_UEFI_SECURE_BOOT,
                  inputs.domains, secure_boot_look)


SECURE_BOOT = TraitFamily(
    "UEFI Secure Boot",
    frozenset({os_traits.COMPUTE_SECURITY_UEFI_SECURE_BOOT}),
    _derive_secure_boot)

FAMILIES = (FIRMWARE, SECURE_BOOT)
