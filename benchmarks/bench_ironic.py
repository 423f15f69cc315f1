#!/usr/bin/env python3
"""Ironic driver cost per node: read the inventory, update every node.

For 1,000, 2,000, 5,000 and 10,000 nodes the script writes an inventory
file (JSON, nodes with traits, some in maintenance, some with trait
changes), then times, for a fresh :class:`IronicDriver` and one
:class:`ProviderTree`:

* **load** — ``init_host``: read and validate the file;
* **first pass** — ``update_provider_tree`` for every node into the empty
  tree (create the root, inventory, traits);
* **next pass** — the same again on the filled tree, the file unchanged
  (the steady state of the periodic update: one stat per node, no parse).

It reports the median µs per node of each; the goal is linear cost: load
plus first pass per node at 10,000 nodes at most 3x that at 1,000 (see
README.md beside this file).

Usage::

    python benchmarks/bench_ironic.py [--repeat N] [--json] [--check]
"""

from __future__ import annotations

import gc
import json
import pathlib
import statistics
import sys
import tempfile
import time
import uuid

import benchlib  # beside this script

benchlib.use_checkout()
from virtdriver.drivers.ironic import IronicDriver  # noqa: E402
from virtdriver.resource_tracker.provider_tree import ProviderTree  # noqa: E402

SIZES = (1_000, 2_000, 5_000, 10_000)
#: Largest allowed ratio of per-node cost at the largest size to that at
#: the smallest one.
GOAL = 3.0
PHASES = ("load", "first_pass", "next_pass")


def inventory(size: int) -> dict:
    """``size`` nodes: every 10th in maintenance, every 3rd with changes."""
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
        nodes.append(node)
    return {"nodes": nodes}


def measure_once(path: pathlib.Path) -> dict[str, float]:
    """Nanoseconds of each phase for one fresh driver and tree."""
    driver = IronicDriver(inventory_path=path)
    tree = ProviderTree()
    times = {}
    start = time.perf_counter_ns()
    driver.init_host("conductor-1")
    nodenames = driver.get_available_nodes()
    times["load"] = time.perf_counter_ns() - start
    for phase in ("first_pass", "next_pass"):
        start = time.perf_counter_ns()
        for nodename in nodenames:
            driver.update_provider_tree(tree, nodename)
        times[phase] = time.perf_counter_ns() - start
    if len(tree) != len(nodenames):
        raise AssertionError(f"{len(tree)} providers for "
                             f"{len(nodenames)} nodes")
    return times


def run(repeat: int) -> dict:
    rows = []
    gc_was_enabled = gc.isenabled()
    with tempfile.TemporaryDirectory() as tmp:
        paths = {}
        for size in SIZES:
            paths[size] = pathlib.Path(tmp) / f"nodes-{size}.json"
            paths[size].write_text(json.dumps(inventory(size)))
        measure_once(paths[min(SIZES)])  # warm up imports and caches
        gc.disable()  # as timeit does
        try:
            for size in SIZES:
                samples = [measure_once(paths[size]) for _ in range(repeat)]
                row = {"nodes": size}
                for phase in PHASES:
                    row[f"us_per_node_{phase}"] = statistics.median(
                        s[phase] for s in samples) / size / 1000
                row["us_per_node"] = statistics.median(
                    (s["load"] + s["first_pass"]) for s in samples
                ) / size / 1000
                rows.append(row)
        finally:
            if gc_was_enabled:
                gc.enable()
    cost = {row["nodes"]: row["us_per_node"] for row in rows}
    ratio = cost[max(SIZES)] / cost[min(SIZES)]
    return {"repeat": repeat, "goal": GOAL, "rows": rows, "ratio": ratio,
            "goal_met": ratio <= GOAL}


def print_table(report: dict) -> None:
    print(f"{'nodes':>6} {'load':>8} {'1st pass':>9} {'next pass':>10} "
          f"{'load+1st':>9}   (µs per node)")
    for row in report["rows"]:
        print(f"{row['nodes']:>6} {row['us_per_node_load']:>8.1f} "
              f"{row['us_per_node_first_pass']:>9.1f} "
              f"{row['us_per_node_next_pass']:>10.1f} "
              f"{row['us_per_node']:>9.1f}")
    print()
    print(f"load+first pass per node at {max(SIZES)} / at {min(SIZES)} = "
          f"{report['ratio']:.2f}")
    verdict = "met" if report["goal_met"] else "NOT met"
    print(f"goal (ratio <= {GOAL}): {verdict}")


def main(argv: list[str] | None = None) -> int:
    args = benchlib.parse(benchlib.parser(
        __doc__, repeat=3, repeat_help="runs per size",
        check_help=f"exit 1 if the ratio exceeds {GOAL}"), argv)
    return benchlib.finish(run(args.repeat), args, print_table)


if __name__ == "__main__":
    sys.exit(main())
