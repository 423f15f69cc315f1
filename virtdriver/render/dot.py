"""A provider tree as a Graphviz DOT picture.

No I/O: input is a tree's canonical JSON form (``tree.to_json()``) and,
optionally, which trait family each trait came from; output is DOT text
(:mod:`.picture` runs Graphviz on it).

A provider with children is a cluster (a box) holding its own node and its
children; every provider is a node with an edge from its parent's node, so
the picture reads both as nested boxes and as a tree.  Each node shows the
provider's name, a short uuid, its inventories in compact form and one line
per trait family, long families cut to their first few names and a count,
so a host with many NUMA cells, devices and CPU feature traits stays small.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

#: At most this many trait names shown per family; the rest are counted.
NAMES_PER_FAMILY = 4

#: Trait names stop being listed past about this many characters.
LINE_WIDTH = 56

#: Resource classes of huge pages, ``..._<size in KiB>``.
_PAGE_CLASS = re.compile(r"^CUSTOM_MEM_PAGE_SIZE_(\d+)$")

#: Groups for traits no family answered for, first matching prefix wins.
_PREFIX_GROUPS = (("CUSTOM_", "CUSTOM_*"), ("COMPUTE_", "COMPUTE_*"),
                  ("HW_CPU_", "HW_CPU_*"), ("HW_", "HW_*"))

#: Inventories shown first, in this order; the others follow by name.
_FIRST_CLASSES = ("VCPU", "PCPU", "MEMORY_MB", "DISK_GB")


def render_dot(document: Mapping[str, Any],
               families: Mapping[str, str] | None = None) -> str:
    """The DOT text of a provider tree.

    Args:
        document: the tree's canonical JSON form (``tree.to_json()``):
            ``{"providers": [{uuid, name, parent_provider_uuid,
            inventories, traits}, ...]}``, parents before children.
        families: trait name → the trait family that answered for it
            (``report.results[trait].family``); other traits are grouped
            by prefix (``COMPUTE_*``, ``HW_CPU_*``, ``HW_*``, ``CUSTOM_*``).
    """
    families = families or {}
    providers = list(document["providers"])
    children: dict[str | None, list[Mapping[str, Any]]] = {}
    for provider in providers:
        children.setdefault(provider["parent_provider_uuid"], []).append(
            provider)
    lines = ['digraph "provider tree" {',
             '  graph [fontname="Helvetica", fontsize=11, compound=true, '
             'nodesep=0.3, ranksep=0.4];',
             '  node [shape=box, style="rounded,filled", fillcolor=white, '
             'fontname="Helvetica", fontsize=9];',
             '  edge [arrowhead=none, color=gray40];']
    edges: list[str] = []

    def walk(provider: Mapping[str, Any], depth: int) -> None:
        pad = "  " * depth
        uuid = provider["uuid"]
        kids = children.get(uuid, [])
        if kids:
            lines.append(f"{pad}subgraph {_quote('cluster_' + uuid)} {{")
            lines.append(f'{pad}  label={_quote(provider["name"])}; '
                         'labeljust=l; style="rounded"; color=gray30;')
            lines.append(f"{pad}  {_node(provider, families, named=False)}")
            for kid in kids:
                edges.append(f"  {_quote(uuid)} -> {_quote(kid['uuid'])};")
                walk(kid, depth + 1)
            lines.append(f"{pad}}}")
        else:
            lines.append(f"{pad}{_node(provider, families, named=True)}")

    for root in children.get(None, []):
        walk(root, 1)
    lines.extend(edges)
    lines.append("}")
    return "\n".join(lines) + "\n"


def _node(provider: Mapping[str, Any], families: Mapping[str, str], *,
          named: bool) -> str:
    """One provider's node; its name is the cluster's label when it has
    children (``named`` false), so the node shows it only for a leaf."""
    label = [provider["name"]] if named else []
    label.append(f"uuid {provider['uuid'][:8]}")
    label += inventory_lines(provider["inventories"])
    label += trait_lines(provider["traits"], families)
    text = "".join(_escape(line) + r"\l" for line in label)
    return (f'{_quote(provider["uuid"])} [label="{text}", '
            f'tooltip={_quote(provider["name"] + " " + provider["uuid"])}];')


def inventory_lines(inventories: Mapping[str, Mapping[str, Any]]
                    ) -> list[str]:
    """Compact inventory lines: ``VCPU 16 x4``, ``MEMORY_MB 32768 (r512)``
    (``xN`` the allocation ratio, ``rN`` reserved), and the huge pages on
    one line, ``pages 2M:1024 1G:16``."""
    lines: list[str] = []
    pages: list[tuple[int, str]] = []
    order = sorted(inventories, key=lambda rc: (
        _FIRST_CLASSES.index(rc) if rc in _FIRST_CLASSES
        else len(_FIRST_CLASSES), rc))
    for rc in order:
        inv = inventories[rc]
        amount = str(inv["total"])
        if inv.get("reserved"):
            amount += f" (r{inv['reserved']})"
        ratio = inv.get("allocation_ratio", 1)
        if ratio != 1:
            amount += f" x{ratio:g}"
        page = _PAGE_CLASS.match(rc)
        if page:
            kib = int(page.group(1))
            pages.append((kib, f"{_page_size(kib)}:{amount}"))
        else:
            lines.append(f"{rc} {amount}")
    if pages:
        lines.append("pages " + " ".join(text for _, text in sorted(pages)))
    return lines


def _page_size(kib: int) -> str:
    for unit, factor in (("G", 1024 * 1024), ("M", 1024)):
        if kib >= factor and kib % factor == 0:
            return f"{kib // factor}{unit}"
    return f"{kib}K"


def trait_lines(traits: Iterable[str], families: Mapping[str, str]
                ) -> list[str]:
    """One line per family, ``family: NAME`` or ``family (n):
    PREFIX_{A, B, ...} +k``: at most :data:`NAMES_PER_FAMILY` names and
    about :data:`LINE_WIDTH` characters shown, ``k`` the rest."""
    groups: dict[str, list[str]] = {}
    for trait in traits:
        groups.setdefault(_family(trait, families), []).append(trait)
    return [_family_line(name, sorted(names))
            for name, names in sorted(groups.items(),
                                              key=lambda g: g[0].lower())]


def _family(trait: str, families: Mapping[str, str]) -> str:
    if trait in families:
        return families[trait]
    for prefix, group in _PREFIX_GROUPS:
        if trait.startswith(prefix):
            return group
    return "other"


def _family_line(family: str, names: list[str]) -> str:
    if len(names) == 1:
        return f"{family}: {names[0]}"
    prefix = _common_prefix(names)
    shown: list[str] = []
    for name in names[:NAMES_PER_FAMILY]:
        width = len(prefix) + sum(len(s) + 2 for s in shown) + len(name)
        if shown and width > LINE_WIDTH:
            break
        shown.append(name[len(prefix):])
    more = len(names) - len(shown)
    listing = ", ".join(shown)
    body = f"{prefix}{{{listing}}}" if prefix else listing
    if more:
        body += f" +{more}"
    return f"{family} ({len(names)}): {body}"


def _common_prefix(names: list[str]) -> str:
    """The longest common prefix ending at an underscore, leaving every
    name something after it."""
    first, last = min(names), max(names)
    end = 0
    for index, (a, b) in enumerate(zip(first, last, strict=False)):
        if a != b:
            break
        if a == "_":
            end = index + 1
    prefix = first[:end]
    if any(name == prefix for name in names):
        prefix = prefix[:prefix.rstrip("_").rfind("_") + 1]
    return prefix


def _escape(text: str) -> str:
    """``text`` inside a DOT double-quoted string (label escapes such as
    ``\\n`` are Graphviz's, so a backslash is doubled)."""
    return text.replace("\\", "\\\\").replace('"', '\\"').replace(
        "\n", " ")


def _quote(text: str) -> str:
    return f'"{_escape(text)}"'
