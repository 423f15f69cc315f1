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
    traits: [CUSTOM_RACK_7]   # extra traits the driver owns and asserts
    capabilities: {supports_multiattach: true}
"""

from __future__ import annotations

import pathlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from virtdriver.capabilities.host import (
    CellCPU, CPUTopology, Guest, GuestDomain, HostCapabilities, HostCPU,
    NUMACell, Pages)
from virtdriver.drivers.data_files import check_fields, load_data_file

_KEYS = {"name", "arch", "cpu", "cells", "cores_per_cell", "threads_per_core",
         "memory_mb_per_cell", "pages_per_cell", "traits", "capabilities"}
_BASE_PAGE_KIB = 4


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
    traits: frozenset[str] = frozenset()
    capabilities: Mapping[str, bool] = field(
        default_factory=lambda: MappingProxyType({}))

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
    """Validate a description; errors name ``source`` and the field.

    Raises:
        FakeHostError: an unknown key, a wrong type or an impossible value.
    """
    check_fields(data, _KEYS, source, "a fake host", FakeHostError)
    if "cells" not in data:
        raise FakeHostError(f"{source}: field 'cells' (number of NUMA cells) "
                            "is required")
    cpu = data.get("cpu", {})
    if not isinstance(cpu, Mapping):
        raise FakeHostError(f"{source}: field 'cpu' must be a mapping")
    pages = {_count(source, "pages_per_cell key", size):
             _count(source, f"pages_per_cell[{size}]", count, minimum=0)
             for size, count in _mapping(source, "pages_per_cell",
                                         data).items()}
    spec = FakeHostSpec(
        name=str(data.get("name", "fake")),
        arch=str(data.get("arch", "x86_64")),
        cpu_model=cpu.get("model", "Haswell"),
        cpu_vendor=cpu.get("vendor", "Intel"),
        cpu_features=frozenset(_strings(source, "cpu.features",
                                        cpu.get("features", ()))),
        cells=_count(source, "cells", data["cells"]),
        cores_per_cell=_count(source, "cores_per_cell",
                              data.get("cores_per_cell", 4)),
        threads_per_core=_count(source, "threads_per_core",
                                data.get("threads_per_core", 1)),
        memory_mb_per_cell=_count(source, "memory_mb_per_cell",
                                  data.get("memory_mb_per_cell", 8192)),
        pages_per_cell=MappingProxyType(pages),
        traits=frozenset(_strings(source, "traits", data.get("traits", ()))),
        capabilities=MappingProxyType({
            str(k): bool(v) for k, v in _mapping(source, "capabilities",
                                                 data).items()}),
    )
    huge_mb = sum(s * c for s, c in pages.items()) // 1024
    if huge_mb > spec.memory_mb_per_cell:
        raise FakeHostError(
            f"{source}: pages_per_cell hold {huge_mb} MiB, more than "
            f"memory_mb_per_cell ({spec.memory_mb_per_cell} MiB)")
    return spec


def load_spec(path_or_preset: str) -> FakeHostSpec:
    """A preset by name, or a YAML/JSON description file.

    Raises:
        FakeHostError: neither a preset nor a readable, valid file.
    """
    if path_or_preset in PRESETS:
        return spec_from_dict(PRESETS[path_or_preset],
                              f"preset {path_or_preset!r}")
    path = pathlib.Path(path_or_preset)
    if not path.is_file():
        raise FakeHostError(
            f"{path_or_preset!r} is neither a preset "
            f"({', '.join(PRESETS)}) nor a file")
    data = load_data_file(path, "fake host description", FakeHostError)
    return spec_from_dict(data, str(path))


def _count(source: str, name: str, value: Any, minimum: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, int) \
            or value < minimum:
        raise FakeHostError(f"{source}: {name} must be an integer "
                            f">= {minimum}, not {value!r}")
    return value


def _strings(source: str, name: str, value: Any) -> list[str]:
    if isinstance(value, str) or not all(isinstance(v, str) for v in value):
        raise FakeHostError(f"{source}: {name} must be a list of strings")
    return list(value)


def _mapping(source: str, name: str, data: Mapping[str, Any]
             ) -> Mapping[Any, Any]:
    value = data.get(name, {})
    if not isinstance(value, Mapping):
        raise FakeHostError(f"{source}: field {name!r} must be a mapping")
    return value
