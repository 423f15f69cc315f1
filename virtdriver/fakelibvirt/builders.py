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
    VPD, MdevType, NodeDevice, computer_device, mdev_device, pci_device,
    pci_name)
from virtdriver.fakelibvirt.nodedev_check import check_sriov
from virtdriver.fakelibvirt.nodedev_kinds import (
    ap_card_device, ap_matrix_device, ap_queue_device, css_device,
    vdpa_device)
from virtdriver.fakelibvirt.nodedev_load import (
    NodeDeviceLoadError, load_node_devices)

__all__ = [
    "CPUModelSpec", "CPUPlace", "Cell", "DomainCapsBuilder", "GuestSpec",
    "HostBuilder", "HostModel", "Machine", "MdevType", "NodeDevice",
    "NodeDeviceLoadError", "SEV", "VPD", "ap_card_device",
    "ap_matrix_device", "ap_queue_device", "computer_device", "css_device",
    "host_documents", "load_node_devices", "mdev_device", "pci_device",
    "pci_name", "vdpa_device",
]


def host_documents(host: HostBuilder | None = None,
                   domcaps: Sequence[DomainCapsBuilder] = (),
                   node_devices: Iterable[NodeDevice] = (), *,
                   lib_version: int = 9000000, version: int = 7002000,
                   hostname: str = "fakehost",
                   computer: NodeDevice | bool = True,
                   complete_sriov: bool = False) -> HostDocuments:
    """Everything a fake host answers, built from the builders.

    Each domain capabilities document answers ``DomainCapsKey(arch,
    virt_type, machine)``; the first one of each (arch, virt type) also
    answers the default-machine call (``machine=None``), as libvirt names
    the resolved default machine inside the document.  Keys carry
    ``emulator=None`` (the default emulator).

    Node devices get libvirt's root, ``computer`` (``computer=True``: one
    derived from ``hostname``; a :class:`NodeDevice` of your own; ``False``:
    none, or the one in ``node_devices``), and must agree on SR-IOV: a VF
    and its PF present must name each other; with ``complete_sriov`` every
    VF's PF and every PF's VF must be present too (see
    :func:`.check_sriov`).

    Raises:
        ValueError: two documents for the same call, two node devices of
            one name, a VF and PF that disagree, or a document for an
            (arch, virt type) the host's guests do not offer (libvirt
            would refuse that call).
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
    node_devices = list(node_devices)
    if computer is not False and not any(d.name == "computer"
                                         for d in node_devices):
        node_devices.insert(0, computer if isinstance(computer, NodeDevice)
                            else computer_device(hostname=hostname))
    check_sriov(node_devices, complete=complete_sriov)
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
