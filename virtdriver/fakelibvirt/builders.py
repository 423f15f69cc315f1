"""Builders: describe a host, get the documents libvirt would return.

One import for the three builders and :func:`host_documents`, which puts
their output together as the :class:`~.documents.HostDocuments` a fake
connection serves::

    from virtdriver.fakelibvirt.builders import (
        DomainCapsBuilder, HostBuilder, SEV, host_documents, pci_device)

    docs = host_documents(
        host=HostBuilder(cells=2, cores=4, threads=2, pages={2048: 512},
                         cpu_model="Haswell", vendor="Intel"),
        domcaps=[DomainCapsBuilder("x86_64", "pc-q35-7.2", "kvm",
                                   sev=SEV(max_guests=15))],
        node_devices=[pci_device("0000:81:00.0", 0x8086, 0x10fb,
                                 numa_node=1)])

See ``docs/fakelibvirt-builders.md`` for every knob.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from types import MappingProxyType

from virtdriver.fakelibvirt.documents import DomainCapsKey, HostDocuments
from virtdriver.fakelibvirt.domcaps_builder import (
    SEV, CPUModelSpec, DomainCapsBuilder, HostModel)
from virtdriver.fakelibvirt.host_builder import (
    Cell, CPUPlace, GuestSpec, HostBuilder, Machine)
from virtdriver.fakelibvirt.nodedev_builder import (
    MdevType, NodeDevice, mdev_device, pci_device, pci_name)

__all__ = [
    "CPUModelSpec", "CPUPlace", "Cell", "DomainCapsBuilder", "GuestSpec",
    "HostBuilder", "HostModel", "Machine", "MdevType", "NodeDevice", "SEV",
    "host_documents", "mdev_device", "pci_device", "pci_name",
]


def host_documents(host: HostBuilder | None = None,
                   domcaps: Sequence[DomainCapsBuilder] = (),
                   node_devices: Iterable[NodeDevice] = (), *,
                   lib_version: int = 9000000, version: int = 7002000,
                   hostname: str = "fakehost") -> HostDocuments:
    """Everything a fake host answers, built from the builders.

    Each domain capabilities document answers ``DomainCapsKey(arch,
    virt_type, machine)``; the first one of each (arch, virt type) also
    answers the default-machine call (``machine=None``), as libvirt names
    the resolved default machine inside the document.  Keys carry
    ``emulator=None`` (the default emulator).

    Raises:
        ValueError: two documents for the same call, two node devices of
            one name, or a document for an (arch, virt type) the host's
            guests do not offer (libvirt would refuse that call).
    """
    host = HostBuilder() if host is None else host
    offered = {(guest.arch, domain_type) for guest in host.guests
               for domain_type in guest.domain_types}
    documents: dict[DomainCapsKey, str] = {}
    for builder in domcaps:
        if (builder.arch, builder.virt_type) not in offered:
            raise ValueError(
                f"domain capabilities for arch {builder.arch!r} and virt "
                f"type {builder.virt_type!r}: the host's guests offer only "
                f"{sorted(offered)}; add a GuestSpec for it to HostBuilder")
        xml = builder.to_xml()
        key = DomainCapsKey(builder.arch, builder.virt_type, builder.machine)
        if key in documents:
            raise ValueError(f"two domain capabilities documents for {key}")
        documents[key] = xml
        documents.setdefault(
            DomainCapsKey(builder.arch, builder.virt_type, None), xml)
    devices: dict[str, str] = {}
    for device in node_devices:
        if device.name in devices:
            raise ValueError(f"two node devices named {device.name!r}")
        devices[device.name] = device.xml
    return HostDocuments(
        capabilities=host.to_xml(),
        domain_capabilities=MappingProxyType(documents),
        cpu_map=host.cpu_map(),
        lib_version=lib_version,
        version=version,
        hostname=hostname,
        info=host.info(),
        node_devices=MappingProxyType(devices),
    )
