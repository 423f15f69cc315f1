"""Check that a host's SR-IOV devices agree: a VF names its PF
(``<capability type='phys_function'>``) and that PF lists it
(``<capability type='virt_functions'>``), both ways.

A real host cannot contradict itself here; a built or hand-assembled one
can, and a driver reading it would then learn a topology no kernel
reports.  So builders and loaders refuse it, naming both devices.
"""

from __future__ import annotations

from collections.abc import Iterable

from lxml import etree

from virtdriver.fakelibvirt.nodedev_builder import NodeDevice


def check_sriov(devices: Iterable[NodeDevice], *,
                complete: bool = True) -> None:
    """Refuse PFs and VFs that contradict each other.

    Args:
        complete: also refuse a VF whose PF is not among ``devices`` and a
            PF listing a VF that is not (a host built whole); without it
            only two present devices that disagree are refused.

    Raises:
        ValueError: which VF and PF disagree, and how.
    """
    by_address: dict[str, str] = {}
    pf_of: dict[str, str] = {}          # VF address -> the PF it names
    vfs_of: dict[str, set[str]] = {}    # PF address -> VFs it lists
    for device in devices:
        root = etree.fromstring(device.xml.encode())
        pci = root.find("capability[@type='pci']")
        if pci is None:
            continue
        address = _address_of(pci)
        if address is None:
            continue    # served as written: reading it is the reader's test
        by_address[address] = device.name
        phys = pci.find("capability[@type='phys_function']/address")
        if phys is not None and _address_attrs(phys) is not None:
            pf_of[address] = _address_attrs(phys)
        vfs = pci.find("capability[@type='virt_functions']")
        if vfs is not None:
            vfs_of[address] = {_address_attrs(a)
                               for a in vfs.findall("address")} - {None}
    for vf, pf in sorted(pf_of.items()):
        if pf in vfs_of:
            if vf not in vfs_of[pf]:
                raise ValueError(
                    f"VF {by_address[vf]} ({vf}) names PF {by_address[pf]} "
                    f"({pf}), which does not list it in virt_functions; add "
                    "it there or remove the VF's phys_function")
        elif complete:
            where = (f"{by_address[pf]} lists no VFs" if pf in by_address
                     else "is not on this host")
            raise ValueError(f"VF {by_address[vf]} ({vf}) names PF {pf}, "
                             f"which {where}; add the PF with this VF or "
                             "drop the VF")
    for pf, vfs in sorted(vfs_of.items()):
        for vf in sorted(vfs):
            if vf in pf_of:
                if pf_of[vf] != pf:
                    raise ValueError(
                        f"PF {by_address[pf]} ({pf}) lists VF "
                        f"{by_address[vf]} ({vf}), whose phys_function is "
                        f"{pf_of[vf]}; a VF has one PF")
            elif vf in by_address:
                raise ValueError(
                    f"PF {by_address[pf]} ({pf}) lists VF {by_address[vf]} "
                    f"({vf}), which names no phys_function; give the VF "
                    "physical_function=")
            elif complete:
                raise ValueError(
                    f"PF {by_address[pf]} ({pf}) lists VF {vf}, which is "
                    "not on this host; add the VF or leave it out of "
                    "virtual_functions")


def sriov_links(xml: str) -> tuple[str | None, set[str]]:
    """``(PCI address, addresses of the VFs it lists)`` of a device
    document; ``(None, set())`` for a device that is not PCI."""
    pci = etree.fromstring(xml.encode()).find("capability[@type='pci']")
    if pci is None:
        return None, set()
    vfs = pci.find("capability[@type='virt_functions']")
    return _address_of(pci), ({_address_attrs(a) for a in
                               vfs.findall("address")} - {None}
                              if vfs is not None else set())


def _address_of(pci: etree._Element) -> str | None:
    """The function's address, or ``None`` when a number is not one (a
    document a test serves to see a reader refuse it)."""
    return _format([pci.findtext(t)
                    for t in ("domain", "bus", "slot", "function")])


def _address_attrs(el: etree._Element) -> str | None:
    return _format([el.get(t) for t in ("domain", "bus", "slot",
                                        "function")])


def _format(texts: list[str | None]) -> str | None:
    try:
        parts = [_int(text) for text in texts]
    except ValueError:
        return None
    return "{:04x}:{:02x}:{:02x}.{:x}".format(*parts)


def _int(text: str | None) -> int:
    text = (text or "0").strip()
    return int(text, 16) if text.lower().startswith("0x") else int(text)
