"""Fake hosts: a small description (dict, YAML or JSON) → a host model.

The fake driver describes its host with the same frozen
:class:`~virtdriver.capabilities.host.HostCapabilities` the libvirt driver
reads from libvirt, so resources and traits come out of the same code.

A description (every key optional but ``cells``)::

    name: fake-numa2          # node name (default: the preset or "fake")
    arch: x86_64
    cpu: {model: Haswell, vendor: Intel, features: [avx2, aes]}
    cells: 2                  # NUMA cells, all alike ...
    cores_per_cell: 8
    threads_per_core: 2
    memory_mb_per_cell: 32768
    pages_per_cell: {2048: 1024, 1048576: 4}   # page size KiB -> count
    disk_gb: 500              # the root's DISK_GB (default: none)
    traits: [CUSTOM_RACK_7]   # extra traits the driver owns and asserts
    capabilities: {supports_multiattach: true}

Checked strictly, each refusal a :class:`FakeHostError` naming the field
and value: ``name`` and ``cpu`` strings (``null`` for no CPU model or
vendor), ``arch`` an architecture os-traits names (``HW_ARCH_*``), counts
whole numbers, at most :data:`MAX_CELLS` cells and :data:`MAX_HOST_CPUS` CPUs
(cells × cores × threads), memory and page counts within Placement's
2**31-1; page sizes in KiB, powers of two above 4, as integers or digit
strings (JSON keys are strings: ``{"2048": 1024}``); ``traits`` valid
names (os-traits or ``CUSTOM_``); ``capabilities`` known ``supports_*``
names set to real booleans (``true``, not ``"true"``).  Files are read by
:func:`~virtdriver.drivers.data_files.load_data_file` (UTF-8, size and
nesting limits).
"""

from __future__ import annotations

import difflib
import pathlib
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any


from virtdriver.capabilities.host import (
    CellCPU, CPUTopology, Guest, GuestDomain, HostCapabilities, HostCPU,
    NUMACell, Pages)
from virtdriver.capabilities.traits.capability_flags import CAPABILITY_TRAITS
from virtdriver.capabilities.traits.host_traits import hw_arch_trait
from virtdriver.cpuset import MAX_CPU_ID
from virtdriver.drivers.data_files import (
    check_fields, check_trait_list, kind_of, load_data_file)
from virtdriver.providers.record import MAX_NAME_LENGTH

_KEYS = {"name", "arch", "cpu", "cells", "cores_per_cell", "threads_per_core",
         "memory_mb_per_cell", "pages_per_cell", "disk_gb", "traits",
         "capabilities", "devices"}
_CPU_KEYS = {"model", "vendor", "features"}
_BASE_PAGE_KIB = 4
_DIGITS = re.compile(r"[0-9]+")
#: Most NUMA cells a fake host may have.
MAX_CELLS = 64
#: Most CPUs a fake host may have: every id is one a cpuset option can name.
MAX_HOST_CPUS = MAX_CPU_ID + 1
#: Placement's limit on an inventory total (memory per cell, pages per size).
MAX_TOTAL = 2**31 - 1


class FakeHostError(ValueError):
    """A fake host description is not usable; the message names the field."""


@dataclass(frozen=True)
class FakeHostSpec:
    """A validated fake host description."""

    name: str = "fake"
    arch: str = "x86_64"
    cpu_model: str | None = "Haswell"
    cpu_vendor: str | None = "Intel"
    cpu_features: frozenset[str] = frozenset()
    cells: int = 1
    cores_per_cell: int = 4
    threads_per_core: int = 1
    memory_mb_per_cell: int = 8192
    pages_per_cell: Mapping[int, int] = field(
        default_factory=lambda: MappingProxyType({}))
    disk_gb: int | None = None
    traits: frozenset[str] = frozenset()
    capabilities: Mapping[str, bool] = field(
        default_factory=lambda: MappingProxyType({}))
    #: ``devices:`` entries (:mod:`~virtdriver.drivers.fake_devices`).
    devices: tuple = ()

    def host_capabilities(self) -> HostCapabilities:
        """The host model this description stands for."""
        per_cell = self.cores_per_cell * self.threads_per_core
        cells = []
        for cell_id in range(self.cells):
            first = cell_id * per_cell
            cpus = []
            for thread in range(self.threads_per_core):
                for core in range(self.cores_per_cell):
                    # Linux numbers the first thread of every core first,
                    # then the second threads: siblings are N and N+cores.
                    cpu_id = first + thread * self.cores_per_cell + core
                    siblings = frozenset(
                        first + t * self.cores_per_cell + core
                        for t in range(self.threads_per_core))
                    cpus.append(CellCPU(cpu_id, cell_id, 0, 0,
                                        cell_id * self.cores_per_cell + core,
                                        siblings))
            memory_kib = self.memory_mb_per_cell * 1024
            huge_kib = sum(size * count
                           for size, count in self.pages_per_cell.items())
            base = (memory_kib - huge_kib) // _BASE_PAGE_KIB
            pages = (Pages(_BASE_PAGE_KIB, base),) + tuple(
                Pages(size, count)
                for size, count in sorted(self.pages_per_cell.items()))
            distances = tuple((other, 10 if other == cell_id else 21)
                              for other in range(self.cells))
            cells.append(NUMACell(cell_id, memory_kib, pages, distances,
                                  tuple(sorted(cpus, key=lambda c: c.id))))
        return HostCapabilities(
            source=f"fake host {self.name!r}",
            uuid=None,
            cpu=HostCPU(arch=self.arch, model=self.cpu_model,
                        vendor=self.cpu_vendor, features=self.cpu_features,
                        topology=CPUTopology(self.cells, 1, 1,
                                             self.cores_per_cell,
                                             self.threads_per_core),
                        page_sizes_kib=(_BASE_PAGE_KIB,) + tuple(
                            sorted(self.pages_per_cell))),
            cells=tuple(cells),
            guests=(Guest("hvm", self.arch, 64, f"/fake/qemu-{self.arch}",
                          domains=(GuestDomain("qemu"), GuestDomain("kvm"))),),
        )


#: Named hosts for tests and the CLI.
PRESETS: Mapping[str, Mapping[str, Any]] = MappingProxyType({
    "small": {"name": "fake-small", "cells": 1, "cores_per_cell": 4,
              "threads_per_core": 1, "memory_mb_per_cell": 8192},
    "numa2-ht": {"name": "fake-numa2-ht", "cells": 2, "cores_per_cell": 8,
                 "threads_per_core": 2, "memory_mb_per_cell": 32768,
                 "pages_per_cell": {2048: 1024}},
    "numa4-large": {"name": "fake-numa4-large", "cells": 4,
                    "cores_per_cell": 16, "threads_per_core": 2,
                    "memory_mb_per_cell": 131072,
                    "pages_per_cell": {2048: 4096, 1048576: 16},
                    "cpu": {"model": "EPYC-Rome", "vendor": "AMD"}},
})


def spec_from_dict(data: Mapping[str, Any], source: str = "<dict>"
                   ) -> FakeHostSpec:
    """Validate a description; errors name ``source``, the field and value.

    Raises:
        FakeHostError: an unknown key, a wrong type or an impossible value
            (beyond the limits in the module docstring, among others).
    """
    check_fields(data, _KEYS, source, "a fake host", FakeHostError)
    if "cells" not in data:
        raise FakeHostError(f"{source}: field 'cells' (number of NUMA cells) "
                            "is required; add e.g. 'cells: 1'")
    cells = _count(source, "cells", data["cells"], maximum=MAX_CELLS)
    cores = _count(source, "cores_per_cell", data.get("cores_per_cell", 4))
    threads = _count(source, "threads_per_core",
                     data.get("threads_per_core", 1))
    if cells * cores * threads > MAX_HOST_CPUS:
        raise FakeHostError(
            f"{source}: cells × cores_per_cell × threads_per_core = "
            f"{cells} × {cores} × {threads} = {cells * cores * threads} "
            f"CPUs, more than the {MAX_HOST_CPUS} a host may have (CPU ids "
            f"0-{MAX_CPU_ID}); describe fewer")
    memory_mb = _count(source, "memory_mb_per_cell",
                       data.get("memory_mb_per_cell", 8192),
                       maximum=MAX_TOTAL)
    pages = _pages(source, _mapping(source, "pages_per_cell", data))
    huge_mb = sum(s * c for s, c in pages.items()) // 1024
    if huge_mb > memory_mb:
        raise FakeHostError(
            f"{source}: pages_per_cell hold {huge_mb} MiB, more than "
            f"memory_mb_per_cell ({memory_mb} MiB); give fewer pages or "
            "more memory")
    cpu = check_fields(data.get("cpu", {}), _CPU_KEYS, f"{source}: cpu",
                       "cpu", FakeHostError)
    return FakeHostSpec(
        name=_name(source, data.get("name", "fake"), cells),
        arch=_arch(source, data.get("arch", "x86_64")),
        cpu_model=_optional_string(source, "cpu.model",
                                   cpu.get("model", "Haswell")),
        cpu_vendor=_optional_string(source, "cpu.vendor",
                                    cpu.get("vendor", "Intel")),
        cpu_features=frozenset(_strings(source, "cpu.features",
                                        cpu.get("features", []))),
        cells=cells, cores_per_cell=cores, threads_per_core=threads,
        memory_mb_per_cell=memory_mb,
        pages_per_cell=MappingProxyType(pages),
        disk_gb=(None if data.get("disk_gb") is None else _count(
            source, "disk_gb", data["disk_gb"], minimum=0,
            maximum=MAX_TOTAL)),
        traits=_traits(source, data.get("traits", [])),
        capabilities=MappingProxyType(_capabilities(
            source, _mapping(source, "capabilities", data))),
        devices=_devices(source, data.get("devices", []), cells),
    )


def _devices(source: str, entries: Any, cells: int) -> tuple:
    from virtdriver.drivers.fake_devices import fake_devices
    if not isinstance(entries, list):
        raise FakeHostError(f"{source}: devices is {kind_of(entries)}, not "
                            "a list")
    try:
        fake_devices(entries, cells, source)
    except ValueError as exc:
        raise FakeHostError(str(exc)) from None
    return tuple(MappingProxyType(dict(e)) for e in entries)


def load_spec(path_or_preset: str) -> FakeHostSpec:
    """A preset by name, or a YAML/JSON description file.

    Raises:
        FakeHostError: neither a preset nor a readable, valid file.
    """
    if path_or_preset in PRESETS:
        return spec_from_dict(PRESETS[path_or_preset],
                              f"preset {path_or_preset!r}")
    path = pathlib.Path(path_or_preset)
    if not path.exists():
        raise FakeHostError(
            f"{path_or_preset!r} is neither a preset "
            f"({', '.join(PRESETS)}) nor a file; name a preset or the path "
            "of a YAML/JSON description")
    data = load_data_file(path, "fake host description", FakeHostError)
    return spec_from_dict(data, str(path))


def _count(source: str, name: str, value: Any, minimum: int = 1,
           maximum: int | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, int) \
            or value < minimum:
        raise FakeHostError(f"{source}: {name} must be an integer "
                            f">= {minimum}, not {kind_of(value)}; give a "
                            "whole number")
    if maximum is not None and value > maximum:
        raise FakeHostError(f"{source}: {name} is {value}, more than the "
                            f"limit of {maximum}; give a smaller number")
    return value


def _name(source: str, value: Any, cells: int) -> str:
    # The NUMA cells' providers are named <name>_NUMA<id>: those must fit.
    longest = MAX_NAME_LENGTH - len(f"_NUMA{cells - 1}")
    if not isinstance(value, str):
        raise FakeHostError(f"{source}: name must be a string, not "
                            f"{kind_of(value)}; quote it in YAML")
    if not value or not value.isprintable() or value != value.strip():
        raise FakeHostError(f"{source}: name {value!r} is not a usable node "
                            "name; give printable text without leading or "
                            "trailing blanks")
    if len(value) > longest:
        raise FakeHostError(f"{source}: name is {len(value)} characters, "
                            f"more than {longest} (Placement allows "
                            f"{MAX_NAME_LENGTH} for a provider name, "
                            "including the cells' _NUMA<id> suffix); "
                            "shorten it")
    return value


def _arch(source: str, value: Any) -> str:
    if not isinstance(value, str):
        raise FakeHostError(f"{source}: arch must be a string, not "
                            f"{kind_of(value)}; use a libvirt arch name such "
                            "as x86_64")
    if hw_arch_trait(value) is None:
        raise FakeHostError(f"{source}: arch {value!r} is not an "
                            "architecture os-traits names (HW_ARCH_*); use "
                            "a libvirt arch name such as x86_64, aarch64, "
                            "ppc64le or s390x")
    return value


def _optional_string(source: str, name: str, value: Any) -> str | None:
    if value is not None and not isinstance(value, str):
        raise FakeHostError(f"{source}: {name} must be a string (or null "
                            f"for none), not {kind_of(value)}; quote it in "
                            "YAML")
    return value


def _strings(source: str, name: str, value: Any) -> list[str]:
    if not isinstance(value, (list, tuple)):
        raise FakeHostError(f"{source}: {name} must be a list of strings, "
                            f"not {kind_of(value)}; write it as [a, b]")
    for index, item in enumerate(value):
        if not isinstance(item, str):
            raise FakeHostError(f"{source}: {name}[{index}] must be a "
                                f"string, not {kind_of(item)}; quote it")
    return list(value)


def _traits(source: str, value: Any) -> frozenset[str]:
    return check_trait_list(value, f"{source}: traits", FakeHostError)


def _pages(source: str, value: Mapping[Any, Any]) -> dict[int, int]:
    pages: dict[int, int] = {}
    for key, count in value.items():
        # JSON keys are strings: "2048" is the 2048 KiB page size too.
        size = (int(key) if isinstance(key, str) and _DIGITS.fullmatch(key)
                else key)
        if isinstance(size, bool) or not isinstance(size, int) \
                or size <= _BASE_PAGE_KIB or size & (size - 1):
            raise FakeHostError(
                f"{source}: pages_per_cell key {kind_of(key)} is not a huge "
                f"page size; give sizes in KiB, powers of two above "
                f"{_BASE_PAGE_KIB} (2048 for 2 MiB, 1048576 for 1 GiB)")
        if size in pages:
            raise FakeHostError(f"{source}: pages_per_cell gives page size "
                                f"{size} twice; keep one")
        pages[size] = _count(source, f"pages_per_cell[{size}]", count,
                             minimum=0, maximum=MAX_TOTAL)
    return pages


def _capabilities(source: str, value: Mapping[Any, Any]) -> dict[str, bool]:
    for name, flag in value.items():
        if name not in CAPABILITY_TRAITS:
            close = difflib.get_close_matches(str(name), CAPABILITY_TRAITS,
                                              n=1)
            raise FakeHostError(
                f"{source}: capabilities: {name!r} is not a driver "
                "capability; " + (f"did you mean {close[0]!r}?" if close
                                  else "names are supports_*, as in "
                                  "`virtdriver help traits`"))
        if not isinstance(flag, bool):
            raise FakeHostError(f"{source}: capabilities.{name} must be true "
                                f"or false, not {kind_of(flag)}; write it "
                                "unquoted")
    return dict(value)


def _mapping(source: str, name: str, data: Mapping[str, Any]
             ) -> Mapping[Any, Any]:
    value = data.get(name, {})
    if not isinstance(value, Mapping):
        raise FakeHostError(f"{source}: field {name!r} must be a mapping, "
                            f"not {kind_of(value)}; write it as {{key: "
                            "value, ...}")
    return value
