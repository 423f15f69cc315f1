#!/usr/bin/env python3
"""Tracker cycle for the ironic driver: first, steady, one node changed, RSS.

For 1,000 and 10,000 bare-metal nodes (``--smoke``: 1,000 only) the script
writes an inventory file (JSON; traits, trait changes, some nodes in
maintenance) and runs ``ResourceTracker.update_all`` with an
``IronicDriver`` on a temporary state directory, as a compute service does:

* **first cycle** — a fresh driver, tracker and state directory: every
  node's root created, the ledger written;
* **steady cycle** — the next cycles with nothing changed (median);
* **one node changed** — one node's traits edited in the file (saved by
  rename, as editors and config tools do), then one cycle; and the cycle
  after it (the changed node confirmed, everything else as steady);
* **peak RSS** — a fresh subprocess that imports, reads the inventory and
  runs a first and a steady cycle, nothing else: its peak resident set.

Sizes alternate within each repetition, so the 10k / 1k ratio compares
samples taken side by side.  The garbage collector stays on (a service
runs with it).  Goals (``--check`` exits 1 when one is missed) from
issue 13: steady cycle at 10k ≤ 50 ms, first cycle at 10k ≤ 1.2 s and at
most 11× the one at 1k, peak RSS at 10k ≤ 300 MiB.

Usage::

    python benchmarks/bench_tracker.py [--repeat N] [--smoke] [--json] [--check]
"""

from __future__ import annotations

import gc
import json
import os
import pathlib
import statistics
import subprocess
import sys
import tempfile
import time
import uuid

import benchlib  # beside this script

benchlib.use_checkout()
from virtdriver.drivers.ironic import IronicDriver  # noqa: E402
from virtdriver.resource_tracker.tracker import ResourceTracker  # noqa: E402

SIZES = (1_000, 10_000)
#: Steady cycles timed per repetition (their median is the sample).
STEADY_CYCLES = 5
GOAL_STEADY_S = 0.050
GOAL_FIRST_S = 1.2
GOAL_FIRST_RATIO = 11.0
GOAL_RSS_MIB = 300.0
PHASES = ("first", "first_gc_off", "steady", "one_changed", "after_change")


def inventory(size: int, changed: int | None = None) -> dict:
    """``size`` nodes: every 10th in maintenance, every 3rd with trait
    changes; node ``changed`` (if any) gets one more trait."""
    nodes = []
    for number in range(size):
        node = {"uuid": str(uuid.UUID(int=number + 1)),
                "name": f"rack{number // 40}-u{number % 40:02d}",
                "resource_class": f"baremetal.{('gold', 'silver')[number % 2]}",
                "properties": {"cpus": 64, "memory_mb": 262144},
                "provision_state": "available" if number % 7 else "active",
                "maintenance": number % 10 == 0}
        if number % 3:
            node["traits"] = ["CUSTOM_RAID5", f"CUSTOM_ROW_{number % 16}"]
        else:
            node["trait_changes"] = {"add": ["CUSTOM_GPU"],
                                     "remove": ["CUSTOM_RAID5"]}
        if number == changed:
            node["traits"] = ["CUSTOM_RAID5", "CUSTOM_CHANGED"]
            node.pop("trait_changes", None)
        nodes.append(node)
    return {"nodes": nodes}


def save(path: pathlib.Path, document: dict) -> None:
    """Write ``document`` to ``path`` by rename (a new inode)."""
    temp = path.with_suffix(".tmp")
    temp.write_text(json.dumps(document))
    os.replace(temp, path)


def timed(call, *, collect: bool = True) -> tuple[float, float]:
    """``(cpu, wall)`` seconds ``call()`` took, after a collection so
    earlier garbage is not charged to it; with ``collect=False`` the
    garbage collector is off meanwhile (as ``timeit`` does)."""
    gc.collect()
    if not collect:
        gc.disable()
    try:
        cpu, wall = time.process_time(), time.perf_counter()
        call()
        return time.process_time() - cpu, time.perf_counter() - wall
    finally:
        gc.enable()


def tracker_for(path: pathlib.Path, state: pathlib.Path) -> ResourceTracker:
    driver = IronicDriver(inventory_path=path)
    driver.init_host("conductor-1")
    return ResourceTracker(driver, state_dir=state)


def median(pairs: list[tuple[float, float]]) -> tuple[float, float]:
    return (statistics.median(p[0] for p in pairs),
            statistics.median(p[1] for p in pairs))


def one_repetition(files: dict[int, pathlib.Path], tmp: pathlib.Path,
                   round_: int) -> dict[int, dict[str, tuple[float, float]]]:
    """One sample of every phase for every size, sizes side by side."""
    samples: dict[int, dict[str, tuple[float, float]]] = {}
    trackers = {}
    for size in files:
        samples[size] = {"first_gc_off": timed(tracker_for(
            files[size], tmp / f"off-{size}-{round_}").update_all,
            collect=False)}
        tracker = tracker_for(files[size], tmp / f"state-{size}-{round_}")
        trackers[size] = tracker
        samples[size]["first"] = timed(tracker.update_all)
        if len(tracker.tree) != size:
            raise AssertionError(f"{len(tracker.tree)} providers for "
                                 f"{size} nodes")
    for size, tracker in trackers.items():
        samples[size]["steady"] = median(
            [timed(tracker.update_all) for _ in range(STEADY_CYCLES)])
    for size, tracker in trackers.items():
        changed = size // 2
        save(files[size], inventory(size, changed))
        samples[size]["one_changed"] = timed(tracker.update_all)
        node = str(uuid.UUID(int=changed + 1))
        if "CUSTOM_CHANGED" not in tracker.tree.record(node).traits:
            raise AssertionError("the changed node was not updated")
        samples[size]["after_change"] = median(
            [timed(tracker.update_all) for _ in range(2)])
        save(files[size], inventory(size))
        tracker.update_all()
    return samples


def peak_rss(path: pathlib.Path, state: pathlib.Path) -> float:
    """The peak RSS (MiB) of a subprocess running a first and a steady
    cycle over ``path``.

    Read from ``VmHWM`` (this process image's own high-water mark):
    ``getrusage``'s ``ru_maxrss`` survives ``exec`` on Linux, so a child
    would report the benchmark's peak when that is higher.
    """
    code = (
        "import pathlib, sys, json\n"
        "sys.path.insert(0, sys.argv[3])\n"
        "import benchlib\n"
        "benchlib.use_checkout()\n"
        "from virtdriver.drivers.ironic import IronicDriver\n"
        "from virtdriver.resource_tracker.tracker import ResourceTracker\n"
        "driver = IronicDriver(inventory_path=sys.argv[1])\n"
        "driver.init_host('conductor-1')\n"
        "tracker = ResourceTracker(driver, state_dir=pathlib.Path("
        "sys.argv[2]))\n"
        "tracker.update_all()\n"
        "tracker.update_all()\n"
        "status = pathlib.Path('/proc/self/status').read_text()\n"
        "hwm = [line.split()[1] for line in status.splitlines()\n"
        "       if line.startswith('VmHWM:')]\n"
        "rss = int(hwm[0]) / 1024 if hwm else benchlib.peak_rss_mib()\n"
        "print(json.dumps({'rss': rss, 'providers': len(tracker.tree)}))\n")
    done = subprocess.run(
        [sys.executable, "-c", code, str(path), str(state),
         str(pathlib.Path(__file__).resolve().parent)],
        check=True, capture_output=True, text=True)
    return json.loads(done.stdout)["rss"]


def run(repeat: int, sizes: tuple[int, ...]) -> dict:
    with tempfile.TemporaryDirectory() as name:
        tmp = pathlib.Path(name)
        files = {}
        for size in sizes:
            files[size] = tmp / f"nodes-{size}.json"
            save(files[size], inventory(size))
        one_repetition({min(sizes): files[min(sizes)]}, tmp, -1)  # warm up
        samples = [one_repetition(files, tmp, n) for n in range(repeat)]
        rss = {size: peak_rss(files[size], tmp / f"rss-{size}")
               for size in sizes}
    rows = []
    for size in sizes:
        row = {"nodes": size}
        for phase in PHASES:
            cpu, wall = median([s[size][phase] for s in samples])
            row[f"{phase}_s"], row[f"{phase}_wall_s"] = cpu, wall
        row["steady_us_per_node"] = row["steady_s"] / size * 1e6
        row["peak_rss_mib"] = rss[size]
        rows.append(row)
    by_size = {row["nodes"]: row for row in rows}
    large = by_size.get(10_000)
    ratios = {}
    for phase in ("first", "first_gc_off"):
        ratios[phase] = (statistics.median(
            s[10_000][phase][0] / s[1_000][phase][0] for s in samples)
            if large is not None and 1_000 in by_size else None)
    goals = [
        benchlib.goal("steady cycle at 10k nodes",
                      large and large["steady_s"], GOAL_STEADY_S, unit="s"),
        benchlib.goal("first cycle at 10k nodes",
                      large and large["first_s"], GOAL_FIRST_S, unit="s"),
        benchlib.goal("first cycle 10k / 1k, GC off", ratios["first_gc_off"],
                      GOAL_FIRST_RATIO, unit="x"),
        benchlib.goal("peak RSS, 10k nodes, a full cycle",
                      large and large["peak_rss_mib"], GOAL_RSS_MIB,
                      unit=" MiB"),
    ]
    return {"repeat": repeat, "steady_cycles": STEADY_CYCLES, "rows": rows,
            "clock": "CPU seconds of this process (wall in *_wall_s)",
            "first_ratio_10k_1k": ratios["first"],
            "first_gc_off_ratio_10k_1k": ratios["first_gc_off"],
            "goals": goals}


def cell(cpu: float, wall: float) -> str:
    return f"{cpu * 1e3:7.1f} ({wall * 1e3:6.1f})"


def print_table(report: dict) -> None:
    print("CPU time per cycle (wall time in parentheses), median of "
          f"{report['repeat']}; steady: median of {report['steady_cycles']}")
    print(f"{'nodes':>6} {'first':>17} {'first, GC off':>17} "
          f"{'steady':>17} {'1 node changed':>17} {'after':>17} "
          f"{'peak RSS':>9}")
    for row in report["rows"]:
        cells = [cell(row[f"{phase}_s"], row[f"{phase}_wall_s"])
                 for phase in PHASES]
        print(f"{row['nodes']:>6} " + " ".join(f"{c:>17}" for c in cells)
              + f" {row['peak_rss_mib']:>6.0f}MiB")
    print("(ms)")
    if report["first_ratio_10k_1k"] is not None:
        print(f"\nfirst cycle 10k / 1k (median of side-by-side pairs): "
              f"{report['first_ratio_10k_1k']:.1f}x with the garbage "
              f"collector on, {report['first_gc_off_ratio_10k_1k']:.1f}x "
              "with it off")


def main(argv: list[str] | None = None) -> int:
    args = benchlib.parse(benchlib.parser(
        __doc__, repeat=3, repeat_help="repetitions of every phase",
        check_help="exit 1 if a goal of issue 13 is missed"), argv)
    sizes = SIZES[:1] if args.smoke else SIZES
    report = run(args.repeat, sizes)
    series = {phase.replace("_", " "): [(row["nodes"], row[f"{phase}_s"])
                                        for row in report["rows"]]
              for phase in ("first", "steady", "one_changed")}
    return benchlib.finish(report, args, print_table, name="tracker", plot={
        "title": "ironic tracker cycle", "series": series,
        "xlabel": "nodes", "ylabel": "CPU seconds per cycle"})


if __name__ == "__main__":
    sys.exit(main())
