"""What the libvirt driver declares it can do: its capabilities dict.

Each ``supports_*`` entry becomes a ``COMPUTE_*`` trait (see
:mod:`virtdriver.capabilities.traits.capability_flags`).  Image formats
are those QEMU boots directly; the others need conversion first.
"""

from __future__ import annotations

from types import MappingProxyType

LIBVIRT_CAPABILITIES = MappingProxyType({
    "has_imagecache": True,
    "supports_evacuate": True,
    "supports_migrate_to_same_host": False,
    "supports_attach_interface": True,
    "supports_device_tagging": True,
    "supports_tagged_attach_interface": True,
    "supports_tagged_attach_volume": True,
    "supports_extend_volume": True,
    "supports_multiattach": True,
    "supports_trusted_certs": True,
    "supports_accelerators": True,
    "supports_socket_pci_numa_affinity": True,
    "supports_remote_managed_ports": True,
    "supports_address_space_passthrough": True,
    "supports_address_space_emulated": True,
    "supports_mem_backing_file": True,
    "supports_virtio_fs": True,
    "supports_rescue_bfv": True,
    "supports_same_host_cold_migrate": False,
    "supports_ephemeral_encryption": False,
    "supports_ephemeral_encryption_luks": False,
    "supports_ephemeral_encryption_plain": False,
    "supports_image_type_aki": True,
    "supports_image_type_ami": True,
    "supports_image_type_ari": True,
    "supports_image_type_iso": True,
    "supports_image_type_qcow2": True,
    "supports_image_type_raw": True,
    "supports_image_type_ploop": False,
    "supports_image_type_vdi": False,
    "supports_image_type_vhd": False,
    "supports_image_type_vhdx": False,
    "supports_image_type_vmdk": False,
})
