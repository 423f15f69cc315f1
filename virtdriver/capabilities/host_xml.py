"""Read host capabilities XML into :class:`~.host.HostCapabilities`."""

from __future__ import annotations

from lxml import etree

from virtdriver.capabilities.host import (
    CacheBank, CellCPU, CPUTopology, Guest, GuestDomain, GuestMachine,
    HostCapabilities, HostCPU, NUMACell, Pages)
from virtdriver.capabilities.xmlsafe import (
    DEFAULT_MAX_BYTES, ValueReader, parse_document, yes_no)
from virtdriver.cpuset import CPUSetError, parse_cpuset


def parse_host_capabilities(xml: str | bytes, source: str = "<string>", *,
                            max_bytes: int = DEFAULT_MAX_BYTES
                            ) -> HostCapabilities:
    """Parse a ``<capabilities>`` document (``virConnectGetCapabilities``).

    Args:
        xml: the document.
        source: where it came from (file path or URI), named in errors.
        max_bytes: size limit; larger documents are refused.

    Raises:
        CapabilityXMLError: the document is malformed, hostile, too large,
            not ``<capabilities>``, or holds a value that does not fit.
    """
    root = parse_document(xml, source=source, root_tag="capabilities",
                          max_bytes=max_bytes)
    return _HostReader(source).read(root)


class _HostReader(ValueReader):
    __slots__ = ()

    def read(self, root: etree._Element) -> HostCapabilities:
        host = root.find("host")
        if host is None:
            host = etree.Element("host")
        iommu = host.find("iommu")
        return HostCapabilities(
            source=self.source,
            uuid=self.text(host.find("uuid")) or None,
            cpu=self._cpu(host.find("cpu")),
            iommu=None if iommu is None else yes_no(iommu.get("support")),
            cells=tuple(self._cell(cell)
                        for cell in host.iterfind("topology/cells/cell")),
            cache=tuple(self._bank(bank)
                        for bank in host.iterfind("cache/bank")),
            guests=tuple(self._guest(guest)
                         for guest in root.iterfind("guest")),
        )

    def _cpu(self, cpu: etree._Element | None) -> HostCPU:
        if cpu is None:
            return HostCPU()
        topology = cpu.find("topology")
        return HostCPU(
            arch=self.text(cpu.find("arch")) or None,
            model=self.text(cpu.find("model")) or None,
            vendor=self.text(cpu.find("vendor")) or None,
            features=frozenset(
                name for el in cpu.iterfind("feature")
                if (name := el.get("name"))),
            topology=None if topology is None else CPUTopology(
                sockets=self.int_attr(topology, "sockets"),
                dies=self.int_attr(topology, "dies"),
                clusters=self.int_attr(topology, "clusters"),
                cores=self.int_attr(topology, "cores"),
                threads=self.int_attr(topology, "threads")),
            page_sizes_kib=tuple(self._page_size(el)
                                 for el in cpu.iterfind("pages")),
        )

    def _page_size(self, el: etree._Element) -> int:
        size = self.int_attr(el, "size")
        if size is None:
            raise self.error(el, "page entry has no size attribute")
        return self.kib(el, size)

    def _cell(self, cell: etree._Element) -> NUMACell:
        memory = cell.find("memory")
        memory_kib = self.int_text(memory)
        return NUMACell(
            id=self._required_int(cell, "id"),
            memory_kib=(None if memory_kib is None
                        else self.kib(memory, memory_kib)),
            pages=tuple(Pages(size_kib=self._page_size(el),
                              count=self.int_text(el) or 0)
                        for el in cell.iterfind("pages")),
            distances=tuple(
                (self._required_int(el, "id"), self._required_int(el, "value"))
                for el in cell.iterfind("distances/sibling")),
            cpus=tuple(self._cell_cpu(el)
                       for el in cell.iterfind("cpus/cpu")),
        )

    def _cell_cpu(self, el: etree._Element) -> CellCPU:
        return CellCPU(
            id=self._required_int(el, "id"),
            socket_id=self.int_attr(el, "socket_id"),
            die_id=self.int_attr(el, "die_id"),
            cluster_id=self.int_attr(el, "cluster_id"),
            core_id=self.int_attr(el, "core_id"),
            siblings=self._cpuset(el, "siblings"),
        )

    def _bank(self, el: etree._Element) -> CacheBank:
        return CacheBank(
            id=self._required_int(el, "id"),
            level=self._required_int(el, "level"),
            type=el.get("type", ""),
            size_kib=self.kib(el, self._required_int(el, "size")),
            cpus=self._cpuset(el, "cpus"),
        )

    def _guest(self, guest: etree._Element) -> Guest:
        arch = guest.find("arch")
        if arch is None:
            arch = etree.Element("arch")
        return Guest(
            os_type=self.text(guest.find("os_type")) or "",
            arch=arch.get("name", ""),
            wordsize=self.int_text(arch.find("wordsize")),
            emulator=self.text(arch.find("emulator")) or None,
            machines=self._machines(arch),
            domains=tuple(GuestDomain(
                type=domain.get("type", ""),
                emulator=self.text(domain.find("emulator")) or None,
                machines=self._machines(domain))
                for domain in arch.iterfind("domain")),
            features=frozenset(el.tag for el in guest.iterfind("features/*")),
        )

    def _machines(self, parent: etree._Element) -> tuple[GuestMachine, ...]:
        return tuple(GuestMachine(
            name=(el.text or "").strip(),
            canonical=el.get("canonical"),
            max_cpus=self.int_attr(el, "maxCpus"),
            deprecated=yes_no(el.get("deprecated")) is True)
            for el in parent.iterfind("machine"))

    def _required_int(self, el: etree._Element, name: str) -> int:
        value = self.int_attr(el, name)
        if value is None:
            raise self.error(el, f"required attribute {name} is missing")
        return value

    def _cpuset(self, el: etree._Element, name: str) -> frozenset[int]:
        try:
            return parse_cpuset(el.get(name, ""))
        except CPUSetError as exc:
            raise self.error(el, f"attribute {name}: {exc}") from None
