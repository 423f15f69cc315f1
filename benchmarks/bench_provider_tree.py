#!/usr/bin/env python3
"""Provider tree build time per provider: many roots, and one wide root.

For 1,000, 2,000, 5,000 and 10,000 providers the script builds two shapes
with the tree's public methods — N roots (Ironic-like), and one root with N
children (a wide nested host) — giving each provider an inventory record
and a trait, then looks every provider up by name and by uuid.  It reports
the median time per provider; the goal is linear cost: at 10,000 providers
the per-provider time is at most 3x that at 1,000 (see README.md beside
this file).

Usage::

    python benchmarks/bench_provider_tree.py [--repeat N] [--json] [--check]
"""

from __future__ import annotations

import gc
import statistics
import sys
import time
import uuid

import os_resource_classes
import os_traits

import benchlib  # beside this script

benchlib.use_checkout()
from virtdriver.resource_tracker.provider_tree import ProviderTree  # noqa: E402

SIZES = (1_000, 2_000, 5_000, 10_000)
#: Largest allowed ratio of per-provider cost at the largest size to that at
#: the smallest one.
GOAL = 3.0
_INVENTORY = {os_resource_classes.VCPU: {"total": 8, "reserved": 1}}
_TRAIT = os_traits.HW_CPU_X86_AVX


def build(shape: str, size: int, uuids: list[str]) -> ProviderTree:
    """A tree of ``size`` providers in ``shape`` ("roots" or "children")."""
    tree = ProviderTree()
    if shape == "roots":
        def add(name, uuid):
            return tree.new_root(name, uuid)
    else:
        root = tree.new_root("root", str(uuid.uuid4()))

        def add(name, uuid):
            return tree.new_child(name, root, uuid)
    for number, provider_uuid in enumerate(uuids[:size]):
        add(f"node-{number}", provider_uuid)
        tree.update_inventory(provider_uuid, _INVENTORY)
        tree.add_traits(provider_uuid, _TRAIT)
    for number, provider_uuid in enumerate(uuids[:size]):
        if tree.data(f"node-{number}") is not tree.data(provider_uuid):
            raise AssertionError(f"lookups disagree for node-{number}")
    return tree


def measure(shape: str, size: int, uuids: list[str], repeat: int) -> float:
    """Median microseconds per provider to build and look up ``size``."""
    samples = []
    for _ in range(repeat):
        start = time.perf_counter_ns()
        build(shape, size, uuids)
        samples.append((time.perf_counter_ns() - start) / size / 1000)
    return statistics.median(samples)


def run(repeat: int) -> dict:
    uuids = [str(uuid.uuid4()) for _ in range(max(SIZES))]
    build("roots", min(SIZES), uuids)  # warm up imports and caches
    rows = []
    gc_was_enabled = gc.isenabled()
    gc.disable()  # as timeit does
    try:
        for shape in ("roots", "children"):
            for size in SIZES:
                rows.append({"shape": shape, "providers": size,
                             "us_per_provider": measure(shape, size, uuids,
                                                        repeat)})
    finally:
        if gc_was_enabled:
            gc.enable()
    ratios = {}
    for shape in ("roots", "children"):
        cost = {row["providers"]: row["us_per_provider"] for row in rows
                if row["shape"] == shape}
        ratios[shape] = cost[max(SIZES)] / cost[min(SIZES)]
    return {"repeat": repeat, "goal": GOAL, "rows": rows, "ratios": ratios,
            "goal_met": all(ratio <= GOAL for ratio in ratios.values())}


def print_table(report: dict) -> None:
    print(f"{'shape':<9} {'providers':>9} {'µs/provider':>12}")
    for row in report["rows"]:
        print(f"{row['shape']:<9} {row['providers']:>9} "
              f"{row['us_per_provider']:>12.2f}")
    print()
    for shape, ratio in report["ratios"].items():
        print(f"{shape}: cost per provider at {max(SIZES)} / at "
              f"{min(SIZES)} = {ratio:.2f}")
    verdict = "met" if report["goal_met"] else "NOT met"
    print(f"goal (ratio <= {GOAL} for both shapes): {verdict}")


def main(argv: list[str] | None = None) -> int:
    args = benchlib.parse(benchlib.parser(
        __doc__, repeat=5, repeat_help="builds per shape and size",
        check_help=f"exit 1 if a ratio exceeds {GOAL}"), argv)
    return benchlib.finish(run(args.repeat), args, print_table)


if __name__ == "__main__":
    sys.exit(main())
