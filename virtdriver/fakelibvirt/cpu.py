"""``baselineCPU`` and ``compareCPU``, simplified.

Real libvirt expands each CPU model into its features with its CPU map
and knows which features migrate.  The fake does not: it compares only the
features the XML *lists* (``<feature>`` elements), and treats a model name
as a name.  So:

* **baseline** — the model (and vendor, if all agree) of the first CPU and
  the features every CPU lists (policy ``require``/``force`` or none).
  ``VIR_CONNECT_BASELINE_CPU_EXPAND_FEATURES`` cannot add the model's own
  features, and ``..._MIGRATABLE`` removes nothing.
* **compare** — against the host CPU of the capabilities: a different
  arch or vendor, a required feature the host does not list, or a
  forbidden one it does, is ``VIR_CPU_COMPARE_INCOMPATIBLE``; the same
  model and exactly the host's features ``VIR_CPU_COMPARE_IDENTICAL``;
  anything else ``VIR_CPU_COMPARE_SUPERSET``.  A guest feature implied by
  its model but not listed by the host therefore counts as missing.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from xml.sax.saxutils import escape

from virtdriver.capabilities import CapabilityXMLError
from virtdriver.capabilities.host import HostCPU
from virtdriver.capabilities.xmlsafe import parse_document
from virtdriver.fakelibvirt.constants import (
    VIR_CONNECT_COMPARE_CPU_FAIL_INCOMPATIBLE,
    VIR_CPU_COMPARE_IDENTICAL,
    VIR_CPU_COMPARE_INCOMPATIBLE,
    VIR_CPU_COMPARE_SUPERSET,
    VIR_ERR_CPU_INCOMPATIBLE,
    VIR_ERR_INVALID_ARG,
    VIR_ERR_XML_ERROR,
    VIR_FROM_CPU,
)
from virtdriver.fakelibvirt.errors import libvirtError, make_error

#: Feature policies that ask for the feature.
_REQUIRED = {None, "require", "force"}


@dataclass(frozen=True)
class CPUDescription:
    """The parts of a ``<cpu>`` element the fake compares."""

    arch: str | None
    model: str | None
    vendor: str | None
    required: frozenset[str]
    forbidden: frozenset[str]


def parse_cpu(xml: str, source: str) -> CPUDescription:
    """Read a ``<cpu>`` element.

    Raises:
        libvirtError: ``VIR_ERR_XML_ERROR`` if it is not a ``<cpu>``.
    """
    try:
        root = parse_document(xml, source=source, root_tag="cpu")
    except CapabilityXMLError as exc:
        raise _error(VIR_ERR_XML_ERROR, f"XML error: {exc}") from None
    features = [(f.get("name"), f.get("policy"))
                for f in root.findall("feature")]
    return CPUDescription(
        arch=root.findtext("arch"), model=root.findtext("model"),
        vendor=root.findtext("vendor"),
        required=frozenset(n for n, p in features if n and p in _REQUIRED),
        forbidden=frozenset(n for n, p in features if n and p == "forbid"))


def baseline(xml_cpus: Sequence[str], flags: int = 0) -> str:
    """The baseline CPU of ``xml_cpus`` as libvirt writes one.

    Raises:
        libvirtError: ``VIR_ERR_INVALID_ARG`` for no CPUs (libvirt's
            words), ``VIR_ERR_CPU_INCOMPATIBLE`` for CPUs of different
            arches, ``VIR_ERR_XML_ERROR`` for XML that is not a ``<cpu>``.
    """
    if not xml_cpus:
        raise make_error(VIR_ERR_INVALID_ARG, VIR_FROM_CPU,
                         "invalid argument: no CPUs given",
                         str1="invalid argument: %s", str2="no CPUs given")
    cpus = [parse_cpu(xml, f"baselineCPU CPU {i}")
            for i, xml in enumerate(xml_cpus)]
    first = cpus[0]
    for other in cpus[1:]:
        if first.arch and other.arch and other.arch != first.arch:
            raise _incompatible(f"CPU arch {other.arch} does not match "
                                f"{first.arch}")
    features = frozenset.intersection(*(c.required for c in cpus))
    vendors = {c.vendor for c in cpus}
    lines = ["<cpu mode='custom' match='exact'>"]
    if first.model:
        lines.append(f"  <model fallback='forbid'>{escape(first.model)}"
                     "</model>")
    if len(vendors) == 1 and first.vendor:
        lines.append(f"  <vendor>{escape(first.vendor)}</vendor>")
    lines += [f"  <feature policy='require' name='{_attr(name)}'/>"
              for name in sorted(features)]
    lines.append("</cpu>")
    return "\n".join(lines) + "\n"


def compare(host: HostCPU, xml_desc: str, flags: int = 0) -> int:
    """``VIR_CPU_COMPARE_*`` for the guest CPU ``xml_desc`` on ``host``.

    Raises:
        libvirtError: ``VIR_ERR_CPU_INCOMPATIBLE`` instead of returning
            INCOMPATIBLE when ``flags`` has
            ``VIR_CONNECT_COMPARE_CPU_FAIL_INCOMPATIBLE``;
            ``VIR_ERR_XML_ERROR`` for XML that is not a ``<cpu>``.
    """
    guest = parse_cpu(xml_desc, "compareCPU CPU")
    reason = _incompatibility(host, guest)
    if reason is not None:
        if flags & VIR_CONNECT_COMPARE_CPU_FAIL_INCOMPATIBLE:
            raise _incompatible(reason)
        return VIR_CPU_COMPARE_INCOMPATIBLE
    if guest.model == host.model and guest.required == host.features:
        return VIR_CPU_COMPARE_IDENTICAL
    return VIR_CPU_COMPARE_SUPERSET


def _incompatibility(host: HostCPU, guest: CPUDescription) -> str | None:
    if guest.arch and host.arch and guest.arch != host.arch:
        return f"CPU arch {guest.arch} does not match host arch {host.arch}"
    if guest.vendor and host.vendor and guest.vendor != host.vendor:
        return f"CPU vendor {guest.vendor} does not match host " \
               f"vendor {host.vendor}"
    missing = guest.required - host.features
    if missing:
        return ("Host CPU does not provide required features: "
                + ", ".join(sorted(missing)))
    forbidden = guest.forbidden & host.features
    if forbidden:
        return ("Host CPU provides forbidden features: "
                + ", ".join(sorted(forbidden)))
    return None


def _incompatible(reason: str) -> libvirtError:
    message = f"the CPU is incompatible with host CPU: {reason}"
    return make_error(VIR_ERR_CPU_INCOMPATIBLE, VIR_FROM_CPU, message,
                      str1="the CPU is incompatible with host CPU: %s",
                      str2=reason)


def _attr(value: str) -> str:
    """``value`` escaped for an attribute in single quotes."""
    return escape(value, {"'": "&apos;"})


def _error(code: int, message: str) -> libvirtError:
    return make_error(code, VIR_FROM_CPU, message)
