"""Splitting a flavor's vCPUs and memory over guest NUMA nodes.

Evenly (``hw:numa_nodes`` alone: node ``i`` gets vCPUs ``i*n .. i*n+n-1``
and ``memory/nodes`` MiB), or as the per-node keys say
(``hw:numa_cpus.N`` / ``hw:numa_mem.N`` in the flavor, or
``hw_numa_cpus.N`` / ``hw_numa_mem.N`` in the image, for every node).
Used by :mod:`virtdriver.claims.constraints`; problems go to its
:class:`~virtdriver.claims.extra_specs.Inputs`.
"""

from __future__ import annotations

from typing import Any

from virtdriver.claims.extra_specs import (
    INVALID, Inputs, cpus_text, flavor_key, image_key, show)
from virtdriver.claims.model import CellRequest

_CPUS, _MEM = "numa_cpus", "numa_mem"

#: Nova's rule for the node count and the per-node lists, as the messages
#: state it.
FORBIDDEN_RULE = ("even to the same value (Nova's ImageNUMATopologyForbidden:"
                  " an image may not override NUMA settings the flavor makes)")


def guest_cells(inputs: Inputs, implied: bool, nodes: Any, vcpus: Any,
                memory: Any, dedicated: Any, page_size: Any
                ) -> list[CellRequest] | None:
    """The guest nodes, or ``None`` (no topology, or problems recorded)."""
    cpu_values = _one_source(inputs, _CPUS)
    mem_values = _one_source(inputs, _MEM)
    if not implied:
        given = {k: v for k, v in (*cpu_values[0].items(),
                                   *mem_values[0].items())}
        if given:
            inputs.refuse(
                f"{', '.join(show(k, v) for k, v in given.items())} "
                "configure guest NUMA nodes but nothing asks for a NUMA "
                "topology; set hw:numa_nodes (or remove them)", given)
        return None
    if INVALID in (nodes, vcpus, memory):
        return None
    if dedicated is INVALID:
        # Still check the split; the problem already recorded means these
        # cells are never returned to the caller.
        dedicated = frozenset()
    nodes = nodes or 1
    cpu_keys, mem_keys = cpu_values[0], mem_values[0]
    if not cpu_keys and not mem_keys:
        cells = _even_cells(inputs, nodes, vcpus, memory)
    elif cpu_keys and mem_keys:
        cells = _explicit_cells(inputs, nodes, vcpus, memory,
                                cpu_values, mem_values)
    else:
        given, missing = (cpu_keys, _MEM) if cpu_keys else (mem_keys, _CPUS)
        sep = ":" if next(iter(given)).startswith("hw:") else "_"
        inputs.refuse(
            f"{', '.join(show(k, v) for k, v in given.items())} given "
            f"without hw{sep}{missing}.N; give both hw{sep}{_CPUS}.N and "
            f"hw{sep}{_MEM}.N for every guest node (0-{nodes - 1})", given)
        return None
    if cells is None:
        return None
    cells = [CellRequest(c.id, c.cpus, c.memory_mb, c.cpus & dedicated)
             for c in cells]
    if isinstance(page_size, int) and not _whole_pages(inputs, cells,
                                                       page_size):
        return None
    return cells


def _one_source(inputs: Inputs, family: str
                ) -> tuple[dict[str, str], dict[int, str]]:
    """The per-node keys of ``family`` from the flavor or else the image:
    ({key: value}, {node: value})."""
    flavor, image = inputs.node_values(family)
    fkey, ikey = flavor_key(family), image_key(family)
    if flavor and image:
        keys = {**{f"{fkey}.{n}": v for n, v in flavor.items()},
                **{f"{ikey}.{n}": v for n, v in image.items()}}
        inputs.refuse(
            f"image {ikey}.N ({', '.join(f'{ikey}.{n}' for n in image)}) may "
            f"not be set when flavor {fkey}.N "
            f"({', '.join(f'{fkey}.{n}' for n in flavor)}) sets them, "
            f"{FORBIDDEN_RULE}; remove them from the image", keys)
    values, key_of = (flavor, fkey) if flavor else (image, ikey)
    return {f"{key_of}.{n}": v for n, v in values.items()}, values


def _even_cells(inputs: Inputs, nodes: int, vcpus: int, memory: int
                ) -> list[CellRequest] | None:
    if vcpus % nodes or memory % nodes:
        shown, keys = _count_shown(inputs, nodes)
        inputs.refuse(
            f"{shown} does not split the flavor's {vcpus} vCPUs and "
            f"{memory} MiB evenly; choose a node count that divides both, or "
            f"give hw:{_CPUS}.N and hw:{_MEM}.N for every node",
            {**keys, "vcpus": vcpus, "memory_mb": memory})
        return None
    per_node, per_mem = vcpus // nodes, memory // nodes
    return [CellRequest(i, frozenset(range(i * per_node, (i + 1) * per_node)),
                        per_mem) for i in range(nodes)]


def _explicit_cells(inputs: Inputs, nodes: int, vcpus: int, memory: int,
                    cpu_values, mem_values) -> list[CellRequest] | None:
    problems = len(inputs.problems)
    if nodes > vcpus:
        shown, keys = _count_shown(inputs, nodes)
        inputs.refuse(f"{shown} is more guest nodes than the flavor's "
                      f"{vcpus} vCPUs; each node needs at least one vCPU",
                      {**keys, "vcpus": vcpus})
        return None
    cpu_key_of = _key_namer(cpu_values[0])
    mem_key_of = _key_namer(mem_values[0])
    wanted = set(range(nodes))
    for (_, by_node), key_of in ((cpu_values, cpu_key_of),
                                 (mem_values, mem_key_of)):
        missing, extra = wanted - set(by_node), set(by_node) - wanted
        if missing or extra:
            inputs.refuse(
                f"{_count_shown(inputs, nodes)[0]} but {key_of('N')} is given "
                f"for node(s) {cpus_text(by_node)}"
                + (f" (missing {cpus_text(missing)})" if missing else "")
                + (f" (no node {cpus_text(extra)})" if extra else "")
                + f"; give {key_of('N')} for exactly nodes 0-{nodes - 1}",
                {key_of(n): v for n, v in by_node.items()})
    cpus = {n: inputs.cpu_set(cpu_key_of(n), v)
            for n, v in cpu_values[1].items()}
    mems = {n: inputs.count(mem_key_of(n), v, "the node's memory in MiB")
            for n, v in mem_values[1].items()}
    every = frozenset(range(vcpus))
    owner: dict[int, int] = {}
    for node, node_cpus in cpus.items():
        if node_cpus is INVALID:
            continue
        key = cpu_key_of(node)
        raw = cpu_values[1][node]
        if not node_cpus:
            inputs.refuse(f"{show(key, raw)} gives guest node {node} no "
                          "vCPU; give every node at least one", {key: raw})
        if node_cpus - every:
            inputs.refuse(
                f"{show(key, raw)} names vCPU(s) "
                f"{cpus_text(node_cpus - every)} beyond the flavor's {vcpus} "
                f"vCPUs ({cpus_text(every)}); name vCPUs in that range",
                {key: raw})
        twice = {}
        for cpu in sorted(node_cpus & every):
            if cpu in owner:
                twice.setdefault(owner[cpu], set()).add(cpu)
            else:
                owner[cpu] = node
        for other, shared in twice.items():
            okey = cpu_key_of(other)
            inputs.refuse(
                f"{show(okey, cpu_values[1][other])} and {show(key, raw)} "
                f"both name vCPU(s) {cpus_text(shared)}; give each vCPU to "
                "one node", {okey: cpu_values[1][other], key: raw})
    if INVALID not in cpus.values() and set(owner) != every:
        inputs.refuse(
            f"vCPU(s) {cpus_text(every - set(owner))} of the flavor's "
            f"{vcpus} are on no guest node ({', '.join(cpu_values[0])}); "
            "give every vCPU to a node", dict(cpu_values[0]))
    if INVALID not in mems.values() and sum(mems.values()) != memory:
        inputs.refuse(
            f"{' + '.join(mem_values[0].values())} = {sum(mems.values())} MiB "
            f"({', '.join(mem_values[0])}) is not the flavor's {memory} MiB; "
            "make the nodes' memory add up to it",
            {**mem_values[0], "memory_mb": memory})
    if len(inputs.problems) > problems:
        return None
    return [CellRequest(n, cpus[n], mems[n]) for n in range(nodes)]


def _whole_pages(inputs: Inputs, cells: list[CellRequest], size: int
                 ) -> bool:
    key = "hw_mem_page_size" if "hw_mem_page_size" in inputs.props \
        else "hw:mem_page_size"
    raw = (inputs.props if key.startswith("hw_") else inputs.specs)[key]
    bad = [c for c in cells if (c.memory_mb * 1024) % size]
    for cell in bad:
        inputs.refuse(
            f"{show(key, raw)} ({size} KiB pages): guest node {cell.id}'s "
            f"{cell.memory_mb} MiB is not a whole number of pages; make each "
            "node's memory a multiple of the page size",
            {key: raw, "memory_mb": cell.memory_mb})
    return not bad


def _key_namer(keys: dict[str, str]):
    prefix = next(iter(keys)).rsplit(".", 1)[0]
    return lambda node: f"{prefix}.{node}"


def _count_shown(inputs: Inputs, nodes: int) -> tuple[str, dict[str, str]]:
    """The node count as the operator wrote it, and its key."""
    for source, key in ((inputs.specs, "hw:numa_nodes"),
                        (inputs.props, "hw_numa_nodes")):
        if key in source:
            return show(key, source[key]), {key: source[key]}
    return f"{nodes} guest node (implied)", {}
