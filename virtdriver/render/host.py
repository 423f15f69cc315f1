"""Render a host reading for people (text) and programs (JSON), and the
lines that say where a node's facts came from.

No I/O and no libvirt here: input is a
:class:`~virtdriver.drivers.libvirt.host.HostReading` and the reason its URI
was chosen (or a node's facts); output is a string.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from virtdriver.cpuset import format_cpuset
from virtdriver.render.text import wrapped

if TYPE_CHECKING:
    from virtdriver.capabilities import DomainCapabilities, HostCapabilities
    from virtdriver.capabilities.traits.derive import TraitReport
    from virtdriver.drivers.libvirt.host import HostReading

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
    data["devices"] = _devices_summary(reading)
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
    lines.append(render_devices(_devices_summary(reading)).rstrip("\n"))
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
        lines += wrapped(sorted(names), indent=4)
    lines.append(f"  unasserted: {len(report.unasserted)} owned traits")
    for bad in report.invalid:
        lines.append(f"  INVALID {bad.name} from {bad.family}: {bad.reason}")
    return lines


def render_node_source(facts: Mapping[str, Any],
                       uri_reason: str | None = None) -> str:
    """Where a node's facts came from, for the text report: the libvirt
    URI and why it was chosen (``uri_reason`` overrides the driver's
    account), and the online CPUs line; ``""`` for a node without a URI."""
    if "uri" not in facts:
        return ""
    why = uri_reason or facts.get("uri_reason", "")
    devices = facts.get("devices")
    return (f"libvirt URI: {facts['uri']}\n  why: {why}\n"
            f"{render_online_cpus(facts)}"
            f"{render_devices(devices) if devices else ''}\n")


def render_devices(summary: Mapping[str, Any]) -> str:
    """The devices line: what was read and from where, or why unknown
    (``summary`` as :func:`~virtdriver.drivers.libvirt.devices.
    devices_summary` gives it)."""
    if not summary.get("known"):
        return (f"  devices: unknown ({summary.get('reason')}); no device "
                "provider is added or removed\n")
    line = (f"  devices: {summary['pci_functions']} PCI functions, "
            f"{summary['mdev_parents']} mdev parents, {summary['mdevs']} "
            f"mdevs (from {summary['source']})")
    if summary.get("vanished"):
        line += f"; gone while read: {', '.join(summary['vanished'])}"
    for ignored in summary.get("ignored", ()):
        line += f"; ignored {ignored['name']}: {ignored['reason']}"
    return line + "\n"


def _devices_summary(reading: HostReading) -> dict[str, Any]:
    from virtdriver.drivers.libvirt.devices import devices_summary

    return devices_summary(reading.devices)


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
