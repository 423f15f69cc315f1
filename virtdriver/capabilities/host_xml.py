"""Read host capabilities XML into :class:`~.host.HostCapabilities`.

One pass over the tree: each element's children are walked once and
dispatched on their tag.  Parsing is eager (every value is checked here, so
a bad one is refused with its line), and the per-element work is kept
small: one ``get`` or ``items()`` per element read, integers checked
inline on the common all-digits path, cells of many CPUs read by column
(:func:`~.xmlsafe.attribute_columns`; anything odd is read CPU by CPU, for
the error), models built by :func:`virtdriver.frozen.frozen_builder`
constructors, and shared instances for what a document leaves out (see
``docs/capabilities.md``, performance).
"""

from __future__ import annotations

from itertools import repeat
from operator import attrgetter

from lxml import etree

from virtdriver.capabilities.host import (
    CacheBank, CellCPU, CPUTopology, Guest, GuestDomain, GuestMachine,
    HostCapabilities, HostCPU, NUMACell, Pages)
from virtdriver.capabilities.xmlsafe import (
    DEFAULT_MAX_BYTES, MAX_DIGITS, ValueReader,
    attribute_columns, digit_column, parse_document, yes_no)
from virtdriver.frozen import frozen_builder
from virtdriver.cpuset import MAX_CPU_ID, CPUSetError, parse_cpuset

_Bank = frozen_builder(CacheBank)
_Cell = frozen_builder(NUMACell)
_CellCPU = frozen_builder(CellCPU)
_Domain = frozen_builder(GuestDomain)
_Guest = frozen_builder(Guest)
_Host = frozen_builder(HostCapabilities)
_HostCPU = frozen_builder(HostCPU)
_Machine = frozen_builder(GuestMachine)
_Pages = frozen_builder(Pages)
_Topology = frozen_builder(CPUTopology)
_NO_CPU = HostCPU()
_TAG = attrgetter("tag")
# Childless <domain type=...> models, shared across documents (immutable);
# bounded, so documents with made-up types cannot grow it without limit.
_PLAIN_DOMAINS: dict[str, GuestDomain] = {}
_MAX_PLAIN_DOMAINS = 32
_EMPTY: frozenset = frozenset()
_MAX_ID_DIGITS = len(str(MAX_CPU_ID))


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
    text = el.text
    return text.strip() or None if text else None


class _HostReader(ValueReader):
    __slots__ = ()

    def read(self, root: etree._Element) -> HostCapabilities:
        uuid = iommu = None
        cpu = _NO_CPU
        cells: tuple[NUMACell, ...] = ()
        cache: tuple[CacheBank, ...] = ()
        guests = []
        for child in root:
            tag = child.tag
            if tag == "guest":
                guests.append(self._guest(child))
            elif tag != "host":
                continue
            for el in child:
                tag = el.tag
                if tag == "cpu":
                    cpu = self._cpu(el)
                elif tag == "uuid":
                    uuid = _text(el)
                elif tag == "iommu":
                    iommu = yes_no(el.get("support"))
                elif tag == "topology":
                    cells = tuple([self._cell(cell)
                                   for cells_el in el.iterchildren("cells")
                                   for cell in cells_el.iterchildren("cell")])
                elif tag == "cache":
                    cache = tuple([self._bank(bank)
                                   for bank in el.iterchildren("bank")])
        return _Host(self.source, uuid, cpu, iommu, cells, cache,
                     tuple(guests))

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
                int_attr = self.int_attr
                topology = _Topology(
                    int_attr(el, "sockets"), int_attr(el, "dies"),
                    int_attr(el, "clusters"), int_attr(el, "cores"),
                    int_attr(el, "threads"))
        return _HostCPU(arch, model, vendor, frozenset(features), topology,
                        tuple(page_sizes))

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
            if tag == "cpus":
                cpus = self._cell_cpus(el)
            elif tag == "memory":
                memory_kib = self.kib(el, self.int_text(el))
            elif tag == "pages":
                pages.append(_Pages(self._page_size(el),
                                    self.int_text(el) or 0))
            elif tag == "distances":
                required = self.required_int
                distances = tuple([
                    (required(s, "id"), required(s, "value"))
                    for s in el.iterchildren("sibling")])
        return _Cell(self.required_int(cell, "id"), memory_kib, tuple(pages),
                     distances, cpus)

    def _cell_cpus(self, cpus: etree._Element) -> tuple[CellCPU, ...]:
        # The hot loop of a large host (one element per host CPU).  Large
        # cells are read by column first; otherwise (or if the columns are
        # odd) one items() call per CPU reads only the attributes present,
        # the all-digits check is inline, and anything else is left to
        # _cell_cpu_checked, which refuses it with int_attr's errors, in
        # the usual order.
        els = list(cpus.iterchildren("cpu"))
        if len(els) >= _MIN_CPU_COLUMNS:
            by_column = _cpu_columns(els)
            if by_column is not None:
                return by_column
        cpusets: dict[str, frozenset[int]] = {}  # siblings repeat per core
        found = []
        for el in els:
            ids = [None, None, None, None, None]
            siblings = ""
            for name, value in el.items():
                at = _CPU_AT.get(name)
                if at is not None:
                    if (value.isdigit() and value.isascii()
                            and len(value) <= MAX_DIGITS):
                        ids[at] = int(value)
                    else:
                        ids[0] = None
                        break
                elif name == "siblings":
                    siblings = value
            if ids[0] is None:
                found.append(self._cell_cpu_checked(el))
                continue
            sibling_ids = cpusets.get(siblings)
            if sibling_ids is None:
                if (siblings.isdigit() and siblings.isascii()
                        and len(siblings) <= _MAX_ID_DIGITS
                        and int(siblings) <= MAX_CPU_ID):
                    sibling_ids = frozenset((int(siblings),))
                else:
                    sibling_ids = self._siblings(el, siblings)
                cpusets[siblings] = sibling_ids
            found.append(_CellCPU(*ids, sibling_ids))
        return tuple(found)

    def _cell_cpu_checked(self, el: etree._Element) -> CellCPU:
        int_attr = self.int_attr
        return _CellCPU(self.required_int(el, "id"), int_attr(el, "socket_id"),
                        int_attr(el, "die_id"), int_attr(el, "cluster_id"),
                        int_attr(el, "core_id"),
                        self._siblings(el, el.get("siblings", "")))

    def _siblings(self, el: etree._Element, siblings: str) -> frozenset[int]:
        # "0,16" (an SMT pair) without parse_cpuset's general path.
        parts = siblings.split(",")
        if (siblings.replace(",", "").isdigit() and siblings.isascii()
                and "" not in parts
                and max(map(len, parts)) <= _MAX_ID_DIGITS):
            ids = frozenset(map(int, parts))
            if max(ids) <= MAX_CPU_ID:
                return ids
        return self._cpuset(el, "siblings", siblings)

    def _bank(self, el: etree._Element) -> CacheBank:
        required = self.required_int
        return _Bank(required(el, "id"), required(el, "level"),
                     el.get("type", ""), self.kib(el, required(el, "size")),
                     self._cpuset(el, "cpus", el.get("cpus", "")))

    def _guest(self, guest: etree._Element) -> Guest:
        os_type = ""
        arch_el = None
        features: frozenset[str] = _EMPTY
        for el in guest:
            tag = el.tag
            if tag == "arch":
                arch_el = el
            elif tag == "os_type":
                os_type = _text(el) or ""
            elif tag == "features":
                features = frozenset(map(_TAG, el))
        if arch_el is None:
            return _Guest(os_type, "", None, None, (), (), features)
        wordsize = emulator = None
        machines = []
        domains = []
        machine = self._machine
        for el in arch_el:
            tag = el.tag
            if tag == "machine":
                machines.append(machine(el))
            elif tag == "domain":
                domains.append(self._domain(el))
            elif tag == "wordsize":
                text = el.text
                wordsize = (int(text) if text and text.isdigit()
                            and text.isascii() and len(text) <= MAX_DIGITS
                            else self.int_text(el))
            elif tag == "emulator":
                emulator = _text(el)
        return _Guest(os_type, arch_el.get("name", ""), wordsize, emulator,
                      tuple(machines), tuple(domains), features)

    def _domain(self, domain: etree._Element) -> GuestDomain:
        if not len(domain):  # the common <domain type='kvm'/>: no loop
            virt_type = domain.get("type", "")
            found = _PLAIN_DOMAINS.get(virt_type)
            if found is None:
                found = _Domain(virt_type, None, ())
                if len(_PLAIN_DOMAINS) < _MAX_PLAIN_DOMAINS:
                    _PLAIN_DOMAINS[virt_type] = found
            return found
        emulator = None
        machines = []
        for el in domain:
            tag = el.tag
            if tag == "machine":
                machines.append(self._machine(el))
            elif tag == "emulator":
                emulator = _text(el)
        return _Domain(domain.get("type", ""), emulator, tuple(machines))

    def _machine(self, el: etree._Element) -> GuestMachine:
        # Once per machine type (hundreds in a real document); items()
        # reads only the attributes present, in one call.
        canonical = max_cpus = None
        deprecated = False
        for name, value in el.items():
            if name == "maxCpus":
                if (value.isdigit() and value.isascii()
                        and len(value) <= MAX_DIGITS):
                    max_cpus = int(value)
                else:
                    max_cpus = self.int_attr(el, "maxCpus")
            elif name == "canonical":
                canonical = value
            elif name == "deprecated":
                deprecated = value == "yes"
        text = el.text
        return _Machine(text.strip() if text else "", canonical, max_cpus,
                        deprecated)

    def _cpuset(self, el: etree._Element, name: str,
                value: str) -> frozenset[int]:
        try:
            return parse_cpuset(value)
        except CPUSetError as exc:
            raise self.error(el, f"attribute {name}: {exc}") from None


_CPU_AT = {name: at for at, name in enumerate(
    ("id", "socket_id", "die_id", "cluster_id", "core_id"))}
_NONES = repeat(None)  # stateless: never exhausted
#: Cells with fewer CPUs are read CPU by CPU: measured, the column read
#: is 6-7% faster on 32-CPU cells and slower below about 12.
_MIN_CPU_COLUMNS = 16


def _cpu_columns(els: list[etree._Element]) -> tuple[CellCPU, ...] | None:
    """A cell's CPUs read by column (see :func:`~.xmlsafe.attribute_columns`).

    The same CPUs as the element-by-element loop; ``None`` (read them one
    by one, which gives the error) unless every CPU has the same
    attributes, an id, and only plain integers and CPU id lists.
    """
    columns = attribute_columns(els)
    if columns is None or "id" not in columns:
        return None
    ids: list = [_NONES] * 5
    for name, at in _CPU_AT.items():
        column = columns.get(name)
        if column is not None:
            if not digit_column(column):
                return None
            first = column[0]
            # socket_id, cluster_id: often one value for the whole cell.
            ids[at] = (repeat(int(first)) if column.count(first) == len(column)
                       else map(int, column))
    siblings = columns.get("siblings")
    if siblings is None:
        sets = repeat(_EMPTY)
    else:
        table = _sibling_sets(siblings)
        if table is None:
            return None
        sets = map(table.__getitem__, siblings)
    return tuple(map(_CellCPU, *ids, sets))


def _sibling_sets(siblings: tuple[str, ...]
                  ) -> dict[str, frozenset[int]] | None:
    """Each distinct ``siblings`` list ("0,32") as a set of CPU ids.

    All at once when every list has the same length (SMT pairs, single
    ids) and holds only ids up to MAX_CPU_ID; else ``None``.
    """
    distinct = list(dict.fromkeys(siblings))
    commas = set(map(str.count, distinct, repeat(",")))
    if len(commas) != 1:
        return None
    parts = ",".join(distinct).split(",")
    if not digit_column(parts, _MAX_ID_DIGITS):
        return None
    ids = list(map(int, parts))
    if max(ids) > MAX_CPU_ID:
        return None
    per_list = [iter(ids)] * (commas.pop() + 1)
    return dict(zip(distinct, map(frozenset, zip(*per_list, strict=True)),
                    strict=True))
