"""A cloud of other people's compute nodes in Placement, and one agent's cost.

Issue 22: an agent's sync should cost what it owns, not what the cloud
holds.  :func:`seed` puts ``F`` foreign providers into a Placement shaped
like Nova's compute nodes — a root (``DISK_GB``, traits, an aggregate)
and two NUMA children (``VCPU``, ``MEMORY_MB``, ``HW_NUMA_ROOT``) — the
first :data:`API_PROVIDERS` through the API (what Placement itself
writes), the rest by copying those rows in the database in bulk
(:func:`bulk_copy`, any SQLAlchemy URL), checked against an API-made
node through the API (:func:`check_bulk`).  :func:`measure_agent` syncs a
fresh agent of ``n`` ironic nodes (initial, then steady cycles) and reads
Placement's own cost of each request from the service's timing lines
(:mod:`virtdriver.placement.workers`): requests, bytes, wall and CPU.
"""

from __future__ import annotations

import pathlib
import statistics
import time
import uuid as uuidlib

import os_traits

#: Foreign providers made through the API; the rest are bulk copies.
API_PROVIDERS = 1_000
#: Providers per foreign compute node (a root and two NUMA cells).
PER_NODE = 3
#: Foreign nodes per aggregate.
PER_AGGREGATE = 100
ROOT_TRAITS = (os_traits.COMPUTE_NODE, os_traits.HW_CPU_X86_AVX2,
               os_traits.COMPUTE_VOLUME_MULTI_ATTACH)
CELL_TRAITS = (os_traits.HW_NUMA_ROOT,)


def _uuid(kind: str, number: int) -> str:
    return str(uuidlib.uuid5(uuidlib.NAMESPACE_URL,
                             f"virtdriver-bench-foreign-{kind}-{number}"))


def node_providers(number: int) -> list[dict]:
    """Foreign compute node ``number``: its root and two cells."""
    root = _uuid("node", number)
    aggregate = _uuid("aggregate", number // PER_AGGREGATE)
    providers = [{"uuid": root, "name": f"foreign-{number}", "parent": None,
                  "inventories": {"DISK_GB": {"total": 1024}},
                  "traits": list(ROOT_TRAITS), "aggregates": [aggregate]}]
    for cell in range(2):
        providers.append({
            "uuid": _uuid(f"node-{number}-cell", cell),
            "name": f"foreign-{number}_NUMA{cell}", "parent": root,
            "inventories": {"VCPU": {"total": 32, "allocation_ratio": 4.0},
                            "MEMORY_MB": {"total": 131072,
                                          "reserved": 512}},
            "traits": list(CELL_TRAITS), "aggregates": []})
    return providers


def api_seed(client, first: int, count: int) -> int:
    """Nodes ``first`` … ``first + count - 1`` through the API; returns the
    requests sent."""
    sent = client.counts.total
    for number in range(first, first + count):
        for provider in node_providers(number):
            body = client.create_provider(provider["uuid"], provider["name"],
                                          provider["parent"])
            generation = body["generation"]
            for part in ("inventories", "traits", "aggregates"):
                if provider[part]:
                    generation = client.put_part(provider["uuid"], part,
                                                 generation, provider[part])
    return client.counts.total - sent


_COPY_TABLES = {
    "inventories": ("resource_class_id, total, reserved, min_unit, max_unit, "
                    "step_size, allocation_ratio"),
    "resource_provider_traits": "trait_id",
    "resource_provider_aggregates": "aggregate_id",
}


def bulk_copy(url: str, template: int, first: int, count: int) -> None:
    """Nodes ``first`` … ``first + count - 1`` as row copies of API-made
    node ``template`` (its inventories, traits and aggregate), straight
    into Placement's tables on ``url`` in one transaction."""
    import sqlalchemy
    from sqlalchemy import text

    engine = sqlalchemy.create_engine(url)
    model = {p["uuid"]: p for p in node_providers(template)}
    with engine.begin() as db:
        ids = {uuid: db.execute(text(
            "SELECT id FROM resource_providers WHERE uuid = :u"),
            {"u": uuid}).scalar_one() for uuid in model}
        rows = {table: {uuid: db.execute(text(
            f"SELECT {columns} FROM {table} WHERE resource_provider_id = :i"
        ), {"i": ids[uuid]}).mappings().all() for uuid in model}
            for table, columns in _COPY_TABLES.items()}
        for number in range(first, first + count):
            aggregate = _uuid("aggregate", number // PER_AGGREGATE)
            aggregate_id = db.execute(text(
                "SELECT id FROM placement_aggregates WHERE uuid = :u"),
                {"u": aggregate}).scalar()
            if aggregate_id is None:
                aggregate_id = db.execute(text(
                    "INSERT INTO placement_aggregates (uuid, created_at) "
                    "VALUES (:u, CURRENT_TIMESTAMP) RETURNING id"),
                    {"u": aggregate}).scalar_one()
            made: dict[str, int] = {}
            for provider, source in zip(node_providers(number), model,
                                        strict=True):
                parent = made.get(provider["parent"])
                root = made.get(provider["parent"]) if parent else None
                new = db.execute(text(
                    "INSERT INTO resource_providers (uuid, name, generation, "
                    "root_provider_id, parent_provider_id, created_at) "
                    "VALUES (:u, :n, 1, :r, :p, CURRENT_TIMESTAMP) "
                    "RETURNING id"), {"u": provider["uuid"],
                                      "n": provider["name"], "r": root,
                                      "p": parent}).scalar_one()
                if root is None:
                    db.execute(text("UPDATE resource_providers SET "
                                    "root_provider_id = id WHERE id = :i"),
                               {"i": new})
                made[provider["uuid"]] = new
                for table in _COPY_TABLES:
                    for row in rows[table][source]:
                        values = dict(row)
                        if table == "resource_provider_aggregates":
                            values["aggregate_id"] = aggregate_id
                        names = ", ".join(values)
                        marks = ", ".join(f":{k}" for k in values)
                        db.execute(text(
                            f"INSERT INTO {table} (resource_provider_id, "
                            f"{names}, created_at) VALUES (:rp, {marks}, "
                            "CURRENT_TIMESTAMP)"), {"rp": new, **values})
    engine.dispose()


def check_bulk(client, api_node: int, bulk_node: int) -> None:
    """The bulk-made node reads through the API as the API-made one does
    (but for uuids, names and its aggregate).

    Raises:
        AssertionError: naming the first difference.
    """
    for made, copied in zip(node_providers(api_node),
                            node_providers(bulk_node), strict=True):
        for part in ("inventories", "traits", "aggregates"):
            _, want = client.get_part(made["uuid"], part)
            _, got = client.get_part(copied["uuid"], part)
            if part == "aggregates":
                want, got = len(want), len(got)
            elif part == "traits":
                want, got = sorted(want), sorted(got)
            assert want == got, (part, copied["uuid"], got, want)
        body = client.get_provider(copied["uuid"])
        parent = made["parent"] and node_providers(bulk_node)[0]["uuid"]
        assert body["parent_provider_uuid"] == parent, body
        assert body["root_provider_uuid"] == node_providers(
            bulk_node)[0]["uuid"], body


def seed(client, url: str, providers: int, have: int, *,
         api_providers: int = API_PROVIDERS) -> dict:
    """Grow the foreign providers from ``have`` to ``providers`` (both
    multiples of :data:`PER_NODE`): the first ``api_providers`` through
    the API, then bulk copies."""
    started = time.perf_counter()
    nodes, done = providers // PER_NODE, have // PER_NODE
    api_nodes = min(nodes, api_providers // PER_NODE)
    requests = 0
    if done < api_nodes:
        requests = api_seed(client, done, api_nodes - done)
        done = api_nodes
    if done < nodes:
        bulk_copy(url, 0, done, nodes - done)
        check_bulk(client, 0, nodes - 1)
    return {"providers": nodes * PER_NODE, "api_requests": requests,
            "seconds": time.perf_counter() - started}


def served(log: pathlib.Path, start: int) -> tuple[list[dict], int]:
    """The timing rows logged since line ``start``, and the next start."""
    from virtdriver.placement.workers import timings

    lines = log.read_text(errors="replace").splitlines()
    return timings(lines[start:]), len(lines)


def cost(rows: list[dict]) -> dict:
    """Requests, bytes and Placement's own time of one sync."""
    return {"requests": len(rows), "bytes": sum(r["bytes"] for r in rows),
            "placement_cpu_s": sum(r["cpu"] for r in rows),
            "placement_wall_s": sum(r["wall"] for r in rows),
            "placement_ms_per_request": 1000 * statistics.mean(
                r["wall"] for r in rows) if rows else 0.0}


def measure_agent(make_agent, log: pathlib.Path, repeat: int) -> dict:
    """A fresh agent's initial sync and ``repeat`` steady ones: the
    client's view and Placement's (module doc)."""
    start = len(log.read_text(errors="replace").splitlines())
    agent = make_agent()
    first = agent.cycle()
    rows, start = served(log, start)
    initial = {**first, **cost(rows)}
    steady = []
    for _ in range(repeat):
        cycle = agent.cycle()
        rows, start = served(log, start)
        steady.append({**cycle, **cost(rows)})
    middle = sorted(steady, key=lambda c: c["sync_seconds"])[
        (len(steady) - 1) // 2]
    return {"initial": initial, "steady": middle, "agent": agent}
