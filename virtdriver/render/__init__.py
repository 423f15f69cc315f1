"""Render a host reading for people (text) and programs (JSON).

No I/O and no libvirt here: input is a
:class:`~virtdriver.drivers.libvirt.host.HostReading` and the reason its URI
was chosen; output is a string.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from virtdriver.capabilities import DomainCapabilities, HostCapabilities
from virtdriver.capabilities.traits.derive import TraitReport
from virtdriver.cpuset import format_cpuset
from virtdriver.render.explain import (  # noqa: F401 (re-exported)
    render_explanation_table, render_explanations)

if TYPE_CHECKING:
    from virtdriver.drivers.libvirt.host import HostReading
    from virtdriver.drivers.loader import DriverInfo

#: ``online_cpus_source`` of a node whose online CPUs libvirt did not
#: report (:data:`virtdriver.drivers.libvirt.host.ONLINE_FROM_CAPABILITIES`;
#: not imported: a fake driver's report need not import libvirt).
ONLINE_FROM_CAPABILITIES = "capabilities"


def render_json(reading: HostReading, uri_reason: str,
                report: TraitReport) -> str:
    """Everything read, as JSON: the full models, a domain summary, the
    documents that count for traits, and every owned trait with evidence."""
    data: dict[str, Any] = {
        "uri": reading.uri,
        "uri_reason": uri_reason,
        "arch": reading.arch,
        "virt_type": reading.virt_type,
        "libvirt_version": reading.libvirt_version,
        "hypervisor_version": reading.hypervisor_version,
        "host": dataclasses.asdict(reading.host),
    }
    from virtdriver.drivers.libvirt.host import Unknown

    if isinstance(reading.domain, Unknown):
        data["domain"] = {"unknown": True,
                          **dataclasses.asdict(reading.domain)}
    else:
        data["domain"] = {"unknown": False,
                          "summary": _domain_summary(reading.domain),
                          **dataclasses.asdict(reading.domain)}
    data["trait_documents"] = [
        {"label": r.label, "arch": r.key.arch, "machine": r.key.machine,
         "virt_type": r.key.virt_type, "read": r.caps is not None,
         "error": r.error} for r in reading.domains]
    data["traits"] = report.to_json()
    return json.dumps(data, indent=2, default=_json_default)


def _json_default(value: object) -> object:
    if isinstance(value, (set, frozenset)):
        return sorted(value)
    raise TypeError(f"cannot render {type(value).__name__} as JSON")


def _domain_summary(domain: DomainCapabilities) -> dict[str, Any]:
    return {
        "disk_buses": list(domain.disk_buses),
        "video_models": list(domain.video_models),
        "firmware": list(domain.os.firmware),
        "loader_types": list(domain.os.loader.types),
        "tpm_models": list(domain.tpm_models),
        "sev_supported": domain.features.sev.supported,
        "tdx_supported": domain.features.tdx.supported,
    }


def render_text(reading: HostReading, uri_reason: str,
                report: TraitReport) -> str:
    """A short human summary of the host, its domain capabilities and
    traits."""
    lines = [f"libvirt URI: {reading.uri}", f"  why: {uri_reason}", ""]
    lines += _host_lines(reading.host)
    lines.append("")
    lines += _domain_lines(reading)
    lines.append("")
    lines += _trait_lines(reading, report)
    return "\n".join(lines) + "\n"


def _trait_lines(reading: HostReading, report: TraitReport) -> list[str]:
    lines = ["Traits (run `virtdriver explain TRAIT` for the evidence)",
             "  from: " + "; ".join(
                 r.label + ("" if r.caps is not None else " — unread")
                 for r in reading.domains)]
    for title, names in (("asserted", report.asserted),
                         ("unknown, left as they are", report.unknown)):
        lines.append(f"  {title} ({len(names)}):")
        lines += _wrapped(sorted(names), indent=4)
    lines.append(f"  unasserted: {len(report.unasserted)} owned traits")
    for bad in report.invalid:
        lines.append(f"  INVALID {bad.name} from {bad.family}: {bad.reason}")
    return lines


def _wrapped(names: list[str], indent: int, width: int = 79) -> list[str]:
    lines: list[str] = []
    current = " " * indent
    for name in names:
        if len(current) + len(name) + 1 > width and current.strip():
            lines.append(current.rstrip())
            current = " " * indent
        current += name + " "
    if current.strip():
        lines.append(current.rstrip())
    return lines or [" " * indent + "none"]


def render_node_source(facts: Mapping[str, Any],
                       uri_reason: str | None = None) -> str:
    """Where a node's facts came from, for the text report: the libvirt
    URI and why it was chosen (``uri_reason`` overrides the driver's
    account), and the online CPUs line; ``""`` for a node without a URI."""
    if "uri" not in facts:
        return ""
    why = uri_reason or facts.get("uri_reason", "")
    return (f"libvirt URI: {facts['uri']}\n  why: {why}\n"
            f"{render_online_cpus(facts)}\n")


def render_online_cpus(facts: Mapping[str, Any]) -> str:
    """A line for a node whose online CPUs libvirt did not report (its
    facts' ``online_cpus_source`` is ``capabilities``), else ``""``."""
    if facts.get("online_cpus_source") != ONLINE_FROM_CAPABILITIES:
        return ""
    return (f"  online CPUs: not reported by libvirt "
            f"({facts.get('online_cpus_unknown_reason') or 'no reason given'}"
            "); every CPU the host capabilities list counts as online\n")


def _host_lines(host: HostCapabilities) -> list[str]:
    cpu = host.cpu
    lines = [
        "Host",
        f"  uuid:     {_or_unknown(host.uuid)}",
        f"  cpu:      arch {_or_unknown(cpu.arch)}, "
        f"model {_or_unknown(cpu.model)}, vendor {_or_unknown(cpu.vendor)}",
    ]
    topo = cpu.topology
    if topo is not None:
        parts = [("sockets", topo.sockets), ("dies", topo.dies),
                 ("clusters", topo.clusters), ("cores", topo.cores),
                 ("threads", topo.threads)]
        lines.append("  topology: " + ", ".join(
            f"{what} {n}" for what, n in parts if n is not None))
    else:
        lines.append("  topology: not reported")
    lines.append(f"  NUMA cells: {len(host.cells)}, "
                 f"CPUs: {len(host.cpu_ids)}")
    for cell in host.cells:
        memory = ("memory unknown" if cell.memory_kib is None
                  else f"{cell.memory_kib // 1024} MiB")
        cpus = format_cpuset(cell.cpu_ids) or "none"
        pages = ", ".join(f"{_size(p.size_kib)} x {p.count}"
                          for p in cell.pages) or "none listed"
        lines.append(f"    cell {cell.id}: {memory}, CPUs {cpus}; "
                     f"pages {pages}")
    lines.append("  guest arches: "
                 + (", ".join(host.guest_arches) or "none"))
    return lines


def _domain_lines(reading: HostReading) -> list[str]:
    from virtdriver.drivers.libvirt.host import Unknown

    domain = reading.domain
    if isinstance(domain, Unknown):
        return [f"Domain capabilities (arch {reading.arch}, "
                f"virt type {reading.virt_type}): unknown",
                f"  libvirt said: {domain.describe()}"]
    return [
        f"Domain capabilities (arch {_or_unknown(domain.arch)}, "
        f"machine {_or_unknown(domain.machine)}, "
        f"virt type {_or_unknown(domain.virt_type)})",
        f"  emulator:     {_or_unknown(domain.path)}",
        f"  disk buses:   {_listing(domain.disk_buses)}",
        f"  video models: {_listing(domain.video_models)}",
        f"  firmware:     {_listing(domain.os.firmware)}; "
        f"loader types {_listing(domain.os.loader.types)}",
        f"  TPM models:   {_listing(domain.tpm_models)}",
        f"  SEV:          {_support(domain.features.sev.supported)}",
        f"  TDX:          {_support(domain.features.tdx.supported)}",
    ]


def _or_unknown(value: object) -> str:
    return "unknown" if value is None else str(value)


def _listing(values: tuple[str, ...]) -> str:
    return ", ".join(values) if values else "none"


def _support(supported: bool | None) -> str:
    if supported is None:
        return "not reported"
    return "supported" if supported else "not supported"


def _size(kib: int) -> str:
    for unit, factor in (("GiB", 1024 * 1024), ("MiB", 1024)):
        if kib >= factor and kib % factor == 0:
            return f"{kib // factor} {unit}"
    return f"{kib} KiB"


def render_drivers(drivers: list[DriverInfo], fmt: str) -> str:
    """The installed drivers: a table (``text``) or a JSON list (``json``).

    Text columns: name, target, the distribution and version providing
    it, and ``ok`` or ``load error: <why>``.
    """
    if fmt == "json":
        return json.dumps([info.to_json() for info in drivers], indent=2) + "\n"
    if not drivers:
        return ("no virt drivers installed (entry-point namespace "
                "virtdriver.drivers is empty)\n")
    header = ("NAME", "TARGET", "PROVIDED BY", "STATUS")
    rows = [(info.name, info.target, info.provider or "unknown",
             "ok" if info.ok else f"load error: {info.error}")
            for info in drivers]
    widths = [max(len(row[col]) for row in [header, *rows])
              for col in range(3)]
    return "".join(
        "  ".join(cell.ljust(width)
                  for cell, width in zip(row[:3], widths, strict=True))
        + "  " + row[3] + "\n" for row in [header, *rows])


def render_tree(tree: Any, fmt: str,
                usages: Mapping[str, Mapping[str, int]] | None = None) -> str:
    """A provider tree: Placement-shaped JSON, or an indented outline
    (with ``usages``, provider uuid → class → used, beside each total)."""
    document = tree.to_json()
    usages = usages or {}
    if fmt == "json":
        return json.dumps(document, indent=2) + "\n"
    children: dict[str | None, list[dict[str, Any]]] = {}
    for provider in document["providers"]:
        children.setdefault(provider["parent_provider_uuid"], []).append(
            provider)
    lines: list[str] = []

    def walk(provider: dict[str, Any], depth: int) -> None:
        pad = "  " * depth
        lines.append(f"{pad}{provider['name']} ({provider['uuid']})")
        used = usages.get(provider["uuid"], {})
        inventory = ", ".join(
            f"{rc} {inv['total']}"
            + (f" (used {used[rc]})" if used.get(rc) else "")
            + (f" (reserved {inv['reserved']})" if inv["reserved"] else "")
            + (f" x{inv['allocation_ratio']:g}"
               if inv["allocation_ratio"] != 1 else "")
            for rc, inv in sorted(provider["inventories"].items()))
        lines.append(f"{pad}  inventory: {inventory or 'none'}")
        lines.append(f"{pad}  traits ({len(provider['traits'])}):")
        lines.extend(_wrapped(provider["traits"], indent=len(pad) + 4))
        for child in children.get(provider["uuid"], []):
            walk(child, depth + 1)

    for root in children.get(None, []):
        walk(root, 0)
    return "\n".join(lines) + "\n"


def render_fit(nodename: str, fit: Any, fmt: str) -> str:
    """One instance's claim: where each guest cell went, what it pinned."""
    if fmt == "json":
        from virtdriver.claims.usage_json import fit_to_json
        return json.dumps({"node": nodename, "claim": fit_to_json(fit)},
                          indent=2) + "\n"
    lines = [f"claimed instance {fit.uuid} on node {nodename}"]
    lines.extend(_fit_lines(fit, "  "))
    return "\n".join(lines) + "\n"


def render_claims(claims: Mapping[str, Any],
                  usages: Mapping[str, Mapping[str, int]], tree: Any,
                  fmt: str) -> str:
    """Every node's claims, per instance and cell, then the tree with what
    the claims use of each inventory."""
    if fmt == "json":
        from virtdriver.claims.usage_json import usage_to_json
        return json.dumps({
            "nodes": {node: usage_to_json(usage)["instances"]
                      for node, usage in sorted(claims.items())},
            "usages": {uuid: dict(row) for uuid, row in
                       sorted(usages.items())}}, indent=2) + "\n"
    lines = []
    for node, usage in sorted(claims.items()):
        lines.append(f"node {node}: {len(usage.instances)} claim(s)")
        for fit in sorted(usage.instances.values(), key=lambda f: f.uuid):
            lines.append(f"  instance {fit.uuid}")
            lines.extend(_fit_lines(fit, "    "))
    if not lines:
        lines.append("no claims held")
    return "\n".join(lines) + "\n\n" + render_tree(tree, "text", usages)


def _fit_lines(fit: Any, pad: str) -> list[str]:
    lines = []
    if fit.floating_vcpus or fit.floating_memory_mb:
        lines.append(f"{pad}no NUMA topology: {fit.floating_vcpus} shared "
                     f"vCPU(s), {fit.floating_memory_mb} MiB on the host")
    for cell in fit.cells:
        parts = []
        if cell.pinning:
            parts.append("pinned " + ", ".join(
                f"vCPU {v}->CPU {p}" for v, p in sorted(cell.pinning.items())))
        if cell.shared_vcpus:
            parts.append(f"shared vCPUs {format_cpuset(cell.shared_vcpus)}")
        if cell.emulator_cpus:
            parts.append("emulator threads on CPU "
                         f"{format_cpuset(cell.emulator_cpus)}")
        if cell.reserved_cpus:
            parts.append("siblings kept free "
                         f"{format_cpuset(cell.reserved_cpus)}")
        pages = (f" in {cell.page_size_kib} KiB pages"
                 if cell.page_size_kib else "")
        parts.append(f"{cell.memory_mb} MiB{pages}")
        lines.append(f"{pad}guest cell {cell.guest_cell} -> host cell "
                     f"{cell.host_cell}: " + "; ".join(parts))
    return lines


def render_rebuild(instance_uuid: str, conflicts: list[Any], fmt: str,
                   answer: Any = None) -> str:
    """A rebuild check's answer: ``{allowed, conflicts}`` (and, checked
    against Placement, ``placement``: its own answer) or a text form."""
    if fmt == "json":
        document = {"instance": instance_uuid, "allowed": not conflicts,
                    "conflicts": [c.as_dict() for c in conflicts]}
        if answer is not None:
            document["placement"] = answer.as_dict()
        return json.dumps(document, indent=2) + "\n"
    if not conflicts:
        lines = [f"instance {instance_uuid}: rebuild allowed (NUMA "
                 "constraints, consumption and traits unchanged or "
                 "satisfied)"]
    else:
        lines = [f"instance {instance_uuid}: rebuild refused, "
                 f"{len(conflicts)} reason(s):"]
        lines.extend(f"  - [{c.kind}] {c.message}" for c in conflicts)
    if answer is not None:
        lines.append("Placement's own answer agrees" if answer.agrees
                     else "Placement's own answer differs:")
        lines.extend(f"  - {line}" for line in answer.differences)
    return "\n".join(lines) + "\n"
