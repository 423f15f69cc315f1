"""The trait families of the libvirt driver, and the ownership they make up.

Every trait the libvirt driver can set is derived by exactly one family
below; :data:`LIBVIRT_OWNERSHIP` is built from the same list, so what the
driver sets and what it owns cannot drift apart.
"""

from __future__ import annotations

from virtdriver.capabilities.traits import (
    capability_flags, cpu_features, device_providers, devices, firmware,
    guest_models, host_traits, memory_encryption)
from virtdriver.capabilities.traits.ownership import Ownership

LIBVIRT_FAMILIES = (
    *host_traits.FAMILIES,
    cpu_features.FAMILY,
    *devices.FAMILIES,
    *guest_models.FAMILIES,
    *firmware.FAMILIES,
    memory_encryption.FAMILY,
    capability_flags.FAMILY,
    *device_providers.FAMILIES,
)

LIBVIRT_OWNERSHIP = Ownership.of(LIBVIRT_FAMILIES)
