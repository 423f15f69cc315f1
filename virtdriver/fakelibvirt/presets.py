"""The fake driver's host presets, served by fakelibvirt to the real driver.

``preset_documents("numa2-ht")`` renders a fake host description
(:mod:`virtdriver.drivers.fake_host`: a preset name, a file, or a dict) as
the documents libvirt would give for it — host capabilities with the same
cells, CPUs, siblings, memory and pages, and one domain capabilities
document (the arch's default machine, virt type kvm) — so end-to-end tests
run the *libvirt* driver on the same hosts the fake driver describes.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from virtdriver.drivers.fake_host import load_spec, spec_from_dict
from virtdriver.fakelibvirt.builders import (
    DomainCapsBuilder, HostBuilder, host_documents)
from virtdriver.fakelibvirt.documents import HostDocuments


def preset_documents(host: str | Mapping[str, Any] = "small",
                     **domcaps: Any) -> HostDocuments:
    """fakelibvirt documents for a fake host description.

    ``domcaps`` are :class:`DomainCapsBuilder` knobs for the one domain
    capabilities document (disk buses, SEV, …).
    """
    spec = (spec_from_dict(host) if isinstance(host, Mapping)
            else load_spec(host))
    builder = HostBuilder(
        arch=spec.arch, cells=spec.cells, cores=spec.cores_per_cell,
        threads=spec.threads_per_core,
        memory_mb_per_cell=spec.memory_mb_per_cell,
        pages=dict(spec.pages_per_cell),
        huge_page_sizes_kib=tuple(sorted(spec.pages_per_cell)) or (2048,),
        cpu_model=spec.cpu_model, vendor=spec.cpu_vendor,
        features=tuple(sorted(spec.cpu_features)))
    return host_documents(
        builder, [DomainCapsBuilder(arch=spec.arch, **domcaps)],
        hostname=spec.name)
