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

* **an agent in a cloud of others** (issue 22) — F = 0, 1,000, 5,000 and
  20,000 foreign providers shaped like compute nodes (``foreign_cloud.py``:
  the first 1,000 through the API, the rest bulk-copied in the database
  and checked through the API) on PostgreSQL under gunicorn with 2
  workers; at each F a fresh agent of 10 and of 100 ironic nodes: its
  initial and steady sync's requests, bytes, wall time and Placement's
  own time per request (the workers' timing lines); then the
  100,000-provider, 1,000-agent projection next to Nova's per-cycle
  reads (``--smoke``: F = 0 and 60 on SQLite, one worker, 10 nodes).

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
import foreign_cloud  # beside this script

benchlib.use_checkout()
sys.path.insert(0, str(benchlib.REPO))  # tests/ (the agents, the cluster)
from virtdriver.drivers.ironic import IronicDriver  # noqa: E402
from virtdriver.drivers.libvirt.driver import LibvirtDriver  # noqa: E402
from virtdriver.fakelibvirt.connection import (  # noqa: E402
    register_host, unregister_host)
from virtdriver.fakelibvirt.presets import preset_documents  # noqa: E402
from virtdriver.fakelibvirt.swap import use_fakelibvirt  # noqa: E402
from virtdriver.placement.loopback import PlacementServer  # noqa: E402
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
        # Each agent's one read: ?member_of= its own marking aggregate.
        "steady_sync_seconds": statistics.median(
            r["cycles"][-1]["sync_seconds"] for r in outcome.agents),
        "goal_met": outcome.server_errors == 0
        and all(c["ok"] for c in outcome.cycles())
        and all(r["cycles"][-1]["requests"] == {"GET": 1}
                for r in outcome.agents)}


#: Foreign providers and agent sizes (issue 22), and ``--smoke``'s.
FOREIGN_LEVELS, FOREIGN_AGENTS = (0, 1_000, 5_000, 20_000), (1, 10, 100)
SMOKE_LEVELS, SMOKE_AGENTS, SMOKE_API = (0, 60), (10,), 30
#: The projection: a cloud of this many providers and agents, one cycle
#: a minute; Nova reads about 2 GETs per node per cycle (issue 22).
CLOUD_PROVIDERS, CLOUD_AGENTS, CYCLE_S, NOVA_GETS_PER_NODE = (
    100_000, 1_000, 60.0, 2)


def foreign_runs(base: pathlib.Path, repeat: int, smoke: bool,
                 notes: list[str], most: int | None = None) -> dict:
    """An agent's cost against the foreign providers in the cloud (F up
    to ``most`` when given)."""
    from tests.real.placement_agents import shard

    levels = SMOKE_LEVELS if smoke else tuple(
        f for f in FOREIGN_LEVELS if most is None or f <= most)
    sizes = SMOKE_AGENTS if smoke else FOREIGN_AGENTS
    work = base / "foreign"
    work.mkdir()
    with contextlib.ExitStack() as stack:
        if smoke:
            url, workers = f"sqlite:///{work / 'placement.db'}", 1
        else:
            cluster = postgres_cluster(stack, base, notes)
            if cluster is None:
                return {}
            url, workers = cluster.create_database("bench_foreign"), 2
        server = stack.enter_context(PlacementServer(
            url, workers=workers, log=work / "placement.log"))
        client = server.client()
        rows, have = [], 0
        for index, level in enumerate(levels):
            seeded = foreign_cloud.seed(
                client, url, level, have,
                **({"api_providers": SMOKE_API} if smoke else {}))
            have = level
            for number, size in enumerate(sizes):
                inventory = work / f"agent-{index}-{size}.json"
                inventory.write_text(json.dumps(
                    {"nodes": shard(100 + 10 * index + number, size)}))
                measured = foreign_cloud.measure_agent(
                    lambda inv=inventory, i=index, n=size: Agent(
                        IronicDriver(inventory_path=inv),
                        work / f"state-{i}-{n}", server),
                    server.log, repeat)
                agent = measured.pop("agent")
                roots = [p.uuid for p in agent.tracker.tree.providers()]
                # Nova's kind of read: one small GET per node.
                start = len(server.log.read_text(
                    errors="replace").splitlines())
                for uuid in roots:
                    client.list_providers(in_tree=uuid)
                gets, _ = foreign_cloud.served(server.log, start)
                measured["per_node_get"] = foreign_cloud.cost(gets)
                for uuid in roots:
                    client.delete_provider(uuid)   # not foreign next time
                rows.append({"foreign": level, "nodes": size,
                             "seed": seeded, **measured})
    return {"workers": workers, "database": url.split(":", 1)[0],
            "rows": rows, "projection": projection(rows)}


def projection(rows: list[dict]) -> dict:
    """Placement cores for the steady cycles of ``CLOUD_AGENTS`` agents in
    a cloud of ``CLOUD_PROVIDERS``, from the measured steady costs (linear
    in F between the smallest and largest F), next to Nova's reads."""
    out = {}
    for size in sorted({r["nodes"] for r in rows}):
        mine = sorted((r for r in rows if r["nodes"] == size),
                      key=lambda r: r["foreign"])
        low, high = mine[0], mine[-1]
        if high["foreign"] < 5_000:
            out[str(size)] = None   # --smoke: too few to extrapolate
            continue
        cpu_low = low["steady"]["placement_cpu_s"]
        cpu_high = high["steady"]["placement_cpu_s"]
        span = high["foreign"] - low["foreign"]
        slope = (cpu_high - cpu_low) / span if span else 0.0
        at_cloud = cpu_low + slope * (CLOUD_PROVIDERS - low["foreign"])
        # Nova's reads cost what a one-node GET costs at the largest F.
        get = high["per_node_get"]
        per_get = get["placement_cpu_s"] / max(1, get["requests"])
        out[str(size)] = {
            "steady_cpu_s_at_cloud": at_cloud,
            "cores_this_design": CLOUD_AGENTS * at_cloud / CYCLE_S,
            "cores_goal": CLOUD_AGENTS * 1.3 * cpu_low / CYCLE_S,
            "cores_nova": CLOUD_AGENTS * size * NOVA_GETS_PER_NODE
            * per_get / CYCLE_S,
            "measured_from": [low["foreign"], high["foreign"]]}
    return out


def run(repeat: int, postgres: bool, sizes: tuple[int, ...], *,
        foreign: bool = True, smoke: bool = False, trees: bool = True,
        foreign_max: int | None = None) -> dict:
    report = {"repeat": repeat, "trees": [], "agents": [], "notes": []}
    with tempfile.TemporaryDirectory(prefix="vd-bench-") as tmp:
        base = pathlib.Path(tmp)
        base.chmod(0o755)   # the postgres user enters it when we are root
        if trees:
            report["trees"].append(libvirt_tree(base / "libvirt", repeat))
            for size in sizes:
                report["trees"].append(ironic_tree(
                    base / f"ironic-{size}", repeat, size))
        if postgres and trees:
            report["agents"] = postgres_runs(base, report["notes"])
        if foreign:
            report["foreign"] = foreign_runs(base, repeat, smoke,
                                             report["notes"], foreign_max)
    report["goals"] = []
    for row in report.get("foreign", {}).get("rows", []):
        report["goals"].append(benchlib.goal(
            f"F={row['foreign']:,}, {row['nodes']} nodes: steady reads",
            row["steady"]["reads"], 1))
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


def postgres_cluster(stack: contextlib.ExitStack, base: pathlib.Path,
                     notes: list[str]):
    """A throw-away PostgreSQL cluster (stopped with ``stack``), or
    ``None`` with a note saying why not."""
    from tests.postgres_cluster import (
        PostgresCluster, find_bindir, unavailable_reason)

    bindir = find_bindir()
    reason = unavailable_reason(bindir, root=False, apt=False)
    if reason:
        notes.append(f"PostgreSQL runs skipped: {reason[0]}")
        return None
    return stack.enter_context(PostgresCluster(bindir=bindir,
                                               parent_dir=str(base)))


def postgres_runs(base: pathlib.Path, notes: list[str]) -> list[dict]:
    with contextlib.ExitStack() as stack:
        cluster = postgres_cluster(stack, base, notes)
        if cluster is None:
            return []
        return [agents_run(base / f"agents-{workers}", workers, cluster)
                for workers in (1, 2)]


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:,.0f} ms" if seconds < 10 else f"{seconds:.1f} s"


def print_table(report: dict) -> None:
    if report["trees"]:
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
    foreign = report.get("foreign") or {}
    if foreign:
        print(f"\nan agent among foreign providers ({foreign['database']}, "
              f"{foreign['workers']} gunicorn worker(s)):")
        print(f"{'F':>7} {'nodes':>5} {'sync':<8} {'req':>5} {'bytes':>10} "
              f"{'wall':>9} {'Placement CPU':>13} {'ms/request':>10}")
        for row in foreign["rows"]:
            for phase in ("initial", "steady"):
                c = row[phase]
                print(f"{row['foreign']:>7,} {row['nodes']:>5} {phase:<8} "
                      f"{c['requests']:>5} {c['bytes']:>10,} "
                      f"{_ms(c['sync_seconds']):>9} "
                      f"{_ms(c['placement_cpu_s']):>13} "
                      f"{c['placement_ms_per_request']:>10.1f}")
        for size, p in foreign["projection"].items():
            if p is None:
                print(f"  projection, {size} nodes: not made (--smoke)")
                continue
            print(f"  projection, {CLOUD_AGENTS:,} agents of {size} nodes in "
                  f"{CLOUD_PROVIDERS:,} providers, {CYCLE_S:.0f} s cycle: "
                  f"{p['cores_this_design']:.1f} Placement cores (goal "
                  f"{p['cores_goal']:.1f}); Nova's {NOVA_GETS_PER_NODE} "
                  f"GETs a node: {p['cores_nova']:.1f}")
    for note in report["notes"]:
        print(note)


def main(argv: list[str] | None = None) -> int:
    parsed = benchlib.parser(
        __doc__, repeat=5, repeat_help="steady-state cycles per tree",
        check_help="exit 1 if a steady state is not 1 read and 0 writes or "
        "the agents did not converge without 5xx")
    parsed.add_argument("--no-postgres", action="store_true",
                        help="skip the 4-agent PostgreSQL runs")
    parsed.add_argument("--no-foreign", action="store_true",
                        help="skip the agent-among-foreign-providers runs")
    parsed.add_argument("--foreign-only", action="store_true",
                        help="only the agent-among-foreign-providers runs")
    parsed.add_argument("--foreign-max", type=int, default=None,
                        metavar="F", help="foreign providers up to F only")
    args = benchlib.parse(parsed, argv)
    sizes = IRONIC_SIZES[:1] if args.smoke else IRONIC_SIZES
    report = run(args.repeat, postgres=not (args.no_postgres or args.smoke),
                 sizes=sizes, foreign=not args.no_foreign, smoke=args.smoke,
                 trees=not args.foreign_only, foreign_max=args.foreign_max)
    if report.get("foreign"):
        benchlib.plot_scaling(
            benchlib.results_dir(args) / "placement_foreign.png",
            **foreign_plot(report["foreign"]))
    # --foreign-only measures no tree: nothing for the scaling plot.
    return benchlib.finish(report, args, print_table, name="placement_sync",
                           plot=scaling_plot(report) if report["trees"]
                           else None)


def foreign_plot(foreign: dict) -> dict:
    """An agent's steady cycle against the foreign providers: bytes read
    (KB) and Placement's CPU (ms), per agent size."""
    series = {}
    for size in sorted({r["nodes"] for r in foreign["rows"]}):
        mine = [r for r in foreign["rows"] if r["nodes"] == size]
        series[f"{size} nodes: steady KB read"] = [
            (r["foreign"], r["steady"]["bytes"] / 1000) for r in mine]
        series[f"{size} nodes: steady Placement CPU ms"] = [
            (r["foreign"], 1000 * r["steady"]["placement_cpu_s"])
            for r in mine]
    return {"title": "one agent's steady sync among foreign providers",
            "xlabel": "foreign providers", "ylabel": "KB / ms",
            "series": series, "log": False}


if __name__ == "__main__":
    sys.exit(main())
