"""Read host capabilities XML into :class:`~.host.HostCapabilities`.

Each element's children are walked once and dispatched on their tag: that
keeps reading well under the cost of parsing (see ``benchmarks/``).
"""

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


def _text(el: etree._Element) -> str | None:
    return (el.text or "").strip() or None


class _HostReader(ValueReader):
    __slots__ = ()

    def read(self, root: etree._Element) -> HostCapabilities:
        uuid = iommu = None
        cpu = HostCPU()
        cells: tuple[NUMACell, ...] = ()
        cache: tuple[CacheBank, ...] = ()
        guests = []
        for child in root:
            if child.tag == "guest":
                guests.append(self._guest(child))
            elif child.tag != "host":
                continue
            for el in child:
                tag = el.tag
                if tag == "uuid":
                    uuid = _text(el)
                elif tag == "cpu":
                    cpu = self._cpu(el)
                elif tag == "iommu":
                    iommu = yes_no(el.get("support"))
                elif tag == "topology":
                    cells = tuple(self._cell(cell)
                                  for cells_el in el.iterchildren("cells")
                                  for cell in cells_el.iterchildren("cell"))
                elif tag == "cache":
                    cache = tuple(self._bank(bank)
                                  for bank in el.iterchildren("bank"))
        return HostCapabilities(source=self.source, uuid=uuid, cpu=cpu,
                                iommu=iommu, cells=cells, cache=cache,
                                guests=tuple(guests))

    def _cpu(self, cpu: etree._Element) -> HostCPU:
        arch = model = vendor = topology = None
        features = []
        page_sizes = []
        for el in cpu:
            tag = el.tag
            if tag == "feature":
                name = el.get("name")
                if name:
                    features.append(name)
            elif tag == "arch":
                arch = _text(el)
            elif tag == "model":
                model = _text(el)
            elif tag == "vendor":
                vendor = _text(el)
            elif tag == "pages":
                page_sizes.append(self._page_size(el))
            elif tag == "topology":
                topology = CPUTopology(
                    sockets=self.int_attr(el, "sockets"),
                    dies=self.int_attr(el, "dies"),
                    clusters=self.int_attr(el, "clusters"),
                    cores=self.int_attr(el, "cores"),
                    threads=self.int_attr(el, "threads"))
        return HostCPU(arch=arch, model=model, vendor=vendor,
                       features=frozenset(features), topology=topology,
                       page_sizes_kib=tuple(page_sizes))

    def _page_size(self, el: etree._Element) -> int:
        size = self.int_attr(el, "size")
        if size is None:
            raise self.error(el, "page entry has no size attribute")
        return self.kib(el, size)

    def _cell(self, cell: etree._Element) -> NUMACell:
        memory_kib = None
        pages = []
        distances: tuple[tuple[int, int], ...] = ()
        cpus: tuple[CellCPU, ...] = ()
        for el in cell:
            tag = el.tag
            if tag == "memory":
                memory_kib = self.kib(el, self.int_text(el))
            elif tag == "pages":
                pages.append(Pages(self._page_size(el),
                                   self.int_text(el) or 0))
            elif tag == "distances":
                distances = tuple(
                    (self.required_int(s, "id"), self.required_int(s, "value"))
                    for s in el.iterchildren("sibling"))
            elif tag == "cpus":
                cpus = tuple(self._cell_cpu(c) for c in el.iterchildren("cpu"))
        return NUMACell(id=self.required_int(cell, "id"),
                        memory_kib=memory_kib, pages=tuple(pages),
                        distances=distances, cpus=cpus)

    def _cell_cpu(self, el: etree._Element) -> CellCPU:
        int_attr = self.int_attr
        return CellCPU(self.required_int(el, "id"), int_attr(el, "socket_id"),
                       int_attr(el, "die_id"), int_attr(el, "cluster_id"),
                       int_attr(el, "core_id"), self._cpuset(el, "siblings"))

    def _bank(self, el: etree._Element) -> CacheBank:
        return CacheBank(
            id=self.required_int(el, "id"),
            level=self.required_int(el, "level"),
            type=el.get("type", ""),
            size_kib=self.kib(el, self.required_int(el, "size")),
            cpus=self._cpuset(el, "cpus"),
        )

    def _guest(self, guest: etree._Element) -> Guest:
        os_type = ""
        arch_el = None
        features: frozenset[str] = frozenset()
        for el in guest:
            tag = el.tag
            if tag == "os_type":
                os_type = _text(el) or ""
            elif tag == "arch":
                arch_el = el
            elif tag == "features":
                features = frozenset(f.tag for f in el)
        wordsize = emulator = None
        machines = []
        domains = []
        for el in arch_el if arch_el is not None else ():
            tag = el.tag
            if tag == "machine":
                machines.append(self._machine(el))
            elif tag == "domain":
                domains.append(self._domain(el))
            elif tag == "wordsize":
                wordsize = self.int_text(el)
            elif tag == "emulator":
                emulator = _text(el)
        return Guest(os_type=os_type,
                     arch="" if arch_el is None else arch_el.get("name", ""),
                     wordsize=wordsize, emulator=emulator,
                     machines=tuple(machines),
                     domains=tuple(domains), features=features)

    def _domain(self, domain: etree._Element) -> GuestDomain:
        emulator = None
        machines = []
        for el in domain:
            if el.tag == "machine":
                machines.append(self._machine(el))
            elif el.tag == "emulator":
                emulator = _text(el)
        return GuestDomain(type=domain.get("type", ""), emulator=emulator,
                           machines=tuple(machines))

    def _machine(self, el: etree._Element) -> GuestMachine:
        # Positional arguments: this runs once per machine type (hundreds).
        return GuestMachine((el.text or "").strip(), el.get("canonical"),
                            self.int_attr(el, "maxCpus"),
                            el.get("deprecated") == "yes")

    def _cpuset(self, el: etree._Element, name: str) -> frozenset[int]:
        try:
            return parse_cpuset(el.get(name, ""))
        except CPUSetError as exc:
            raise self.error(el, f"attribute {name}: {exc}") from None
