#!/usr/bin/env python3
"""Placement sync cost: requests and wall time against the real service.

Three trees, each synced to a fresh ``openstack-placement`` on loopback
through the real path (driver → ResourceTracker → TrackerOwnership →
Syncer → HTTP):

* **libvirt host** — the libvirt driver in nested mode on fakelibvirt's
  ``numa2-ht`` preset (root + 2 NUMA cells), Placement on SQLite;
* **ironic nodes** — the ironic driver over a 100-, 300- and 1,000-node
  inventory (``--smoke``: 100 only, no PostgreSQL), Placement on SQLite;
* **4 agents on PostgreSQL** — 4 agent processes of 250 ironic nodes and
  an outside trait writer (``tests/real/placement_agents.py``, the run
  ``tests/real/test_placement_postgres.py`` checks), on a throw-away
  PostgreSQL cluster, Placement under gunicorn with 1 and with 2 worker
  processes (each request timed in its worker: Placement's own time).

For the first two it reports the initial sync, the steady state (median
of ``--repeat`` cycles) and the first sync after a restart (a new tracker,
client and syncer on the same state directory); for the agents the wall
time, requests and conflicts retried.  The goal is the issue's economy:
every steady state (and the restart) one read and no write, every agent
converged with no 5xx (see README.md beside this file).  The results go
to ``<results>/placement_sync.json`` and the sync wall time against the
number of nodes to ``placement_sync.png``.

Usage::

    python benchmarks/bench_placement_sync.py [--repeat N] [--json]
        [--check] [--smoke] [--no-postgres] [--results DIR]
"""

from __future__ import annotations

import contextlib
import json
import pathlib
import statistics
import sys
import tempfile
import time

import benchlib  # beside this script

benchlib.use_checkout()
sys.path.insert(0, str(benchlib.REPO))  # tests/ (the agents, the cluster)
from virtdriver.drivers.ironic import IronicDriver  # noqa: E402
from virtdriver.drivers.libvirt.driver import LibvirtDriver  # noqa: E402
from virtdriver.fakelibvirt.connection import (  # noqa: E402
    register_host, unregister_host)
from virtdriver.fakelibvirt.presets import preset_documents  # noqa: E402
from virtdriver.fakelibvirt.swap import use_fakelibvirt  # noqa: E402
from virtdriver.placement.embedded import PlacementServer  # noqa: E402
from virtdriver.placement.ownership import TrackerOwnership  # noqa: E402
from virtdriver.placement.sync import Syncer  # noqa: E402
from virtdriver.placement.workers import timings  # noqa: E402
from virtdriver.resource_tracker.tracker import ResourceTracker  # noqa: E402

IRONIC_SIZES = (100, 300, 1_000)
PRESET = "numa2-ht"
#: The agents' run, as the test runs it.
AGENTS, AGENT_NODES, CYCLES, FINAL, EDITS = 4, 250, 3, 2, 200


class Agent:
    """One driver's nodes through the tracker, synced as an agent does."""

    def __init__(self, driver, state_dir: pathlib.Path,
                 server: PlacementServer) -> None:
        driver.init_host("bench-host")
        self.tracker = ResourceTracker(driver, state_dir=state_dir)
        self.owned = TrackerOwnership(self.tracker)
        self.syncer = Syncer(server.client(), state_dir)

    def cycle(self) -> dict:
        started = time.perf_counter()
        self.owned.note(self.tracker.update_all())
        synced = time.perf_counter()
        result = self.syncer.sync(self.tracker.tree, owned_for=self.owned,
                                  remove=self.owned.gone)
        self.owned.synced(result)
        done = time.perf_counter()
        return {"ok": result.ok, "reads": result.counts.reads,
                "writes": result.counts.writes,
                "requests": dict(result.counts.by_method),
                "update_seconds": synced - started,
                "sync_seconds": done - synced,
                "providers": len(self.tracker.tree)}


def measure_tree(name: str, make_driver, work: pathlib.Path,
                 repeat: int) -> dict:
    """Initial, steady (median of ``repeat``) and after-restart syncs of
    ``make_driver()``'s tree into a fresh Placement on SQLite."""
    work.mkdir()
    with PlacementServer(work / "placement.db") as server:
        agent = Agent(make_driver(), work / "state", server)
        initial = agent.cycle()
        steady = [agent.cycle() for _ in range(repeat)]
        restarted = Agent(make_driver(), work / "state", server).cycle()
    middle = sorted(steady, key=lambda c: c["sync_seconds"])[
        (len(steady) - 1) // 2]
    row = {"tree": name, "providers": initial["providers"],
           "initial": initial, "steady": middle, "restart": restarted,
           "steady_requests": [c["requests"] for c in steady]}
    row["goal_met"] = (initial["ok"] and all(
        c["requests"] == {"GET": 1} and c["ok"]
        for c in [*steady, restarted]))
    return row


def libvirt_tree(work: pathlib.Path, repeat: int) -> dict:
    with use_fakelibvirt():
        uri = register_host(PRESET, preset_documents(PRESET)).uri
        try:
            return measure_tree(f"libvirt {PRESET}, nested",
                                lambda: LibvirtDriver(uri=uri), work, repeat)
        finally:
            unregister_host(PRESET)


def ironic_tree(work: pathlib.Path, repeat: int, size: int) -> dict:
    from tests.real.placement_agents import shard

    inventory = work.parent / f"ironic-nodes-{size}.json"
    inventory.write_text(json.dumps({"nodes": shard(0, size)}))
    return measure_tree(f"{size:,} ironic nodes",
                        lambda: IronicDriver(inventory_path=inventory),
                        work, repeat)


def agents_run(work: pathlib.Path, workers: int, cluster) -> dict:
    from tests.real.placement_agents import Run

    work.mkdir()
    url = cluster.create_database(f"bench_agents_{workers}")
    server = PlacementServer(url, workers=workers,
                             log=work / "placement.log")
    try:
        server.run(timeout=120)
        outcome = Run([server.url], work, agents=AGENTS,
                      nodes=AGENT_NODES, cycles=CYCLES, final=FINAL,
                      edits=EDITS, timeout=300).run()
    finally:
        server.stop()
    served = timings(server.log.read_text(errors="replace").splitlines())
    firsts = [report["cycles"][0] for report in outcome.agents]
    requests = outcome.requests()
    return {
        "workers": workers, "agents": AGENTS, "nodes": AGENTS * AGENT_NODES,
        "cycles": CYCLES + FINAL, "edits": EDITS,
        "seconds": outcome.seconds, "cycles_seconds": outcome.cycles_seconds,
        "initial_seconds": max(c["seconds"] for c in firsts),
        "requests": requests, "total_requests": sum(requests.values()),
        "conflicts": outcome.conflicts,
        "trait_races": sum(r["trait_races"] for r in outcome.agents),
        "writer_requests": outcome.writer["requests"],
        "writer_conflicts": outcome.writer["conflicts"],
        "writer_trait_races": outcome.writer["trait_races"],
        "server_errors": outcome.server_errors,
        "placement": {
            "requests": len(served),
            "worker_pids": len({row["pid"] for row in served}),
            "conflicts_409": sum(row["status"] == 409 for row in served),
            "cpu_seconds": sum(row["cpu"] for row in served),
            "median_ms": 1000 * statistics.median(
                row["wall"] for row in served) if served else None},
        "last_cycles": [r["cycles"][-1]["requests"] for r in outcome.agents],
        # Each agent's one read lists every agent's providers (more roots
        # than list_all_above: one unfiltered listing).
        "steady_sync_seconds": statistics.median(
            r["cycles"][-1]["sync_seconds"] for r in outcome.agents),
        "goal_met": outcome.server_errors == 0
        and all(c["ok"] for c in outcome.cycles())
        and all(r["cycles"][-1]["requests"] == {"GET": 1}
                for r in outcome.agents)}


def run(repeat: int, postgres: bool, sizes: tuple[int, ...]) -> dict:
    report = {"repeat": repeat, "trees": [], "agents": [], "notes": []}
    with tempfile.TemporaryDirectory(prefix="vd-bench-") as tmp:
        base = pathlib.Path(tmp)
        base.chmod(0o755)   # the postgres user enters it when we are root
        report["trees"].append(libvirt_tree(base / "libvirt", repeat))
        for size in sizes:
            report["trees"].append(ironic_tree(base / f"ironic-{size}",
                                               repeat, size))
        if postgres:
            report["agents"] = postgres_runs(base, report["notes"])
    report["goals"] = []
    for row in report["trees"]:
        again = [row["steady"], row["restart"]]
        report["goals"] += [
            benchlib.goal(f"{row['tree']}: steady/restart reads",
                          max(c["reads"] for c in again), 1),
            benchlib.goal(f"{row['tree']}: steady/restart writes",
                          max(c["writes"] for c in again), 0)]
    report["goals"] += [benchlib.goal(
        f"{row['agents']} agents, {row['workers']} worker(s): 5xx + "
        "unconverged", row["server_errors"] + (not row["goal_met"]), 0)
        for row in report["agents"]]
    report["goal_met"] = all(r["goal_met"] for r in
                             [*report["trees"], *report["agents"]])
    return report


def scaling_plot(report: dict) -> dict:
    """Sync wall time against providers (the ironic rows)."""
    rows = [r for r in report["trees"] if "ironic" in r["tree"]]
    return {"title": "Placement sync, ironic nodes (SQLite, loopback)",
            "xlabel": "providers", "ylabel": "sync wall time (s)",
            "series": {phase: [(r["providers"], r[phase]["sync_seconds"])
                               for r in rows]
                       for phase in ("initial", "steady", "restart")}}


def postgres_runs(base: pathlib.Path, notes: list[str]) -> list[dict]:
    from tests.postgres_cluster import (
        PostgresCluster, find_bindir, unavailable_reason)

    bindir = find_bindir()
    reason = unavailable_reason(bindir, root=False, apt=False)
    if reason:
        notes.append(f"4-agent run skipped: {reason[0]}")
        return []
    with contextlib.ExitStack() as stack:
        cluster = stack.enter_context(PostgresCluster(
            bindir=bindir, parent_dir=str(base)))
        return [agents_run(base / f"agents-{workers}", workers, cluster)
                for workers in (1, 2)]


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:,.0f} ms" if seconds < 10 else f"{seconds:.1f} s"


def print_table(report: dict) -> None:
    print(f"{'tree':<26} {'sync':<8} {'reads':>5} {'writes':>6} "
          f"{'wall':>9} {'ms/request':>10}")
    for row in report["trees"]:
        for phase in ("initial", "steady", "restart"):
            cycle = row[phase]
            total = cycle["reads"] + cycle["writes"]
            print(f"{row['tree'] if phase == 'initial' else '':<26} "
                  f"{phase:<8} {cycle['reads']:>5} {cycle['writes']:>6} "
                  f"{_ms(cycle['sync_seconds']):>9} "
                  f"{cycle['sync_seconds'] * 1000 / total:>10.1f}")
        ratio = row["initial"]["sync_seconds"] / row["steady"]["sync_seconds"]
        print(f"{'':<26} initial / steady wall time = {ratio:,.0f}")
    for row in report["agents"]:
        print(f"\n{row['agents']} agents x {row['nodes'] // row['agents']} "
              f"nodes on PostgreSQL, {row['workers']} Placement worker(s), "
              f"{row['cycles']} cycles, writer {row['edits']} edits:")
        print(f"  wall {row['seconds']:.1f} s (slowest initial sync "
              f"{row['initial_seconds']:.1f} s); agents' requests "
              f"{row['total_requests']:,} {row['requests']}; conflicts "
              f"retried {row['conflicts']} (of which Placement's trait race "
              f"500s: {row['trait_races']}); writer "
              f"{row['writer_requests']}, {row['writer_conflicts']} "
              f"conflicts ({row['writer_trait_races']} trait races); 5xx "
              f"{row['server_errors']}; last cycles {row['last_cycles']}, "
              f"{_ms(row['steady_sync_seconds'])} (median)")
        own = row["placement"]
        print(f"  Placement (gunicorn, {own['worker_pids']} worker pids): "
              f"{own['requests']:,} requests, {own['cpu_seconds']:.1f} s "
              f"CPU, median {own['median_ms']:.1f} ms, "
              f"{own['conflicts_409']} answered 409")
    for note in report["notes"]:
        print(note)


def main(argv: list[str] | None = None) -> int:
    parsed = benchlib.parser(
        __doc__, repeat=5, repeat_help="steady-state cycles per tree",
        check_help="exit 1 if a steady state is not 1 read and 0 writes or "
        "the agents did not converge without 5xx")
    parsed.add_argument("--no-postgres", action="store_true",
                        help="skip the 4-agent PostgreSQL runs")
    args = benchlib.parse(parsed, argv)
    sizes = IRONIC_SIZES[:1] if args.smoke else IRONIC_SIZES
    report = run(args.repeat, postgres=not (args.no_postgres or args.smoke),
                 sizes=sizes)
    return benchlib.finish(report, args, print_table, name="placement_sync",
                           plot=scaling_plot(report))


if __name__ == "__main__":
    sys.exit(main())
