"""Traits from the driver's capabilities dict (``supports_*`` → ``COMPUTE_*``).

A capability trait is asserted exactly when the driver declares the
capability true — and, for image types, the format is not in ``[compute]
image_type_exclude_list``.  All of them are always owned: a capability
trait someone else sets on the provider is removed again, because setting
it cannot turn the capability on.
"""

from __future__ import annotations

from collections.abc import Iterator

import os_traits

from virtdriver.capabilities.traits.config import OPTION_IMAGE_TYPE_EXCLUDE
from virtdriver.capabilities.traits.model import (
    DerivationInputs, Evidence, TraitFamily, TraitResult, TraitState)

DRIVER_DOCUMENT = "driver capabilities"
IMAGE_TYPE_PREFIX = "supports_image_type_"

#: Capability name → trait, as compute services have always mapped them.
CAPABILITY_TRAITS = {
    "supports_attach_interface": os_traits.COMPUTE_NET_ATTACH_INTERFACE,
    "supports_device_tagging": os_traits.COMPUTE_DEVICE_TAGGING,
    "supports_tagged_attach_interface":
        os_traits.COMPUTE_NET_ATTACH_INTERFACE_WITH_TAG,
    "supports_tagged_attach_volume": os_traits.COMPUTE_VOLUME_ATTACH_WITH_TAG,
    "supports_extend_volume": os_traits.COMPUTE_VOLUME_EXTEND,
    "supports_multiattach": os_traits.COMPUTE_VOLUME_MULTI_ATTACH,
    "supports_trusted_certs": os_traits.COMPUTE_TRUSTED_CERTS,
    "supports_accelerators": os_traits.COMPUTE_ACCELERATORS,
    "supports_socket_pci_numa_affinity":
        os_traits.COMPUTE_SOCKET_PCI_NUMA_AFFINITY,
    "supports_remote_managed_ports": os_traits.COMPUTE_REMOTE_MANAGED_PORTS,
    "supports_address_space_passthrough":
        os_traits.COMPUTE_ADDRESS_SPACE_PASSTHROUGH,
    "supports_address_space_emulated":
        os_traits.COMPUTE_ADDRESS_SPACE_EMULATED,
    "supports_mem_backing_file": os_traits.COMPUTE_MEM_BACKING_FILE,
    "supports_ephemeral_encryption": os_traits.COMPUTE_EPHEMERAL_ENCRYPTION,
    "supports_ephemeral_encryption_luks":
        os_traits.COMPUTE_EPHEMERAL_ENCRYPTION_LUKS,
    "supports_ephemeral_encryption_plain":
        os_traits.COMPUTE_EPHEMERAL_ENCRYPTION_PLAIN,
    "supports_virtio_fs": os_traits.COMPUTE_SHARE_LOCAL_FS,
    "supports_same_host_cold_migrate":
        os_traits.COMPUTE_SAME_HOST_COLD_MIGRATE,
    "supports_rescue_bfv": os_traits.COMPUTE_RESCUE_BFV,
    **{IMAGE_TYPE_PREFIX + trait[len("COMPUTE_IMAGE_TYPE_"):].lower(): trait
       for trait in os_traits.get_traits("COMPUTE_IMAGE_TYPE_")},
}


def _derive(inputs: DerivationInputs) -> Iterator[TraitResult]:
    declared = inputs.driver_capabilities
    excluded = {name.strip().lower()
                for name in inputs.config.image_type_exclude_list}
    for capability, trait in sorted(CAPABILITY_TRAITS.items(),
                                    key=lambda item: item[1]):
        value = declared.get(capability)
        said = Evidence(DRIVER_DOCUMENT, f"declare {capability} = {value}"
                        if value is not None
                        else f"do not declare {capability}",
                        element=capability)
        image_type = (capability[len(IMAGE_TYPE_PREFIX):]
                      if capability.startswith(IMAGE_TYPE_PREFIX) else None)
        if value and image_type in excluded:
            yield FAMILY.result(trait, TraitState.UNASSERTED, Evidence(
                f"config {OPTION_IMAGE_TYPE_EXCLUDE}",
                f"excludes image type {image_type!r}"), said)
        else:
            state = TraitState.ASSERTED if value else TraitState.UNASSERTED
            yield FAMILY.result(trait, state, said)


FAMILY = TraitFamily("driver capabilities",
                     frozenset(CAPABILITY_TRAITS.values()), _derive)
