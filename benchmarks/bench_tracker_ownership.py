#!/usr/bin/env python3
"""Tracker steady cycle: a driver that declares no ownership against one
that does, side by side (issue 30).

Two ironic-like drivers (``--nodes`` bare-metal nodes, 10,000 by default;
``--smoke``: 1,000) identical but for ``ownership``: *declared* names
every trait it can set (static names and a prefix, as virtdriver's own
drivers do); *undeclared* declares none (``ownership = None``, Nova's
way), so the tracker settles each provider by what its ledger proves the
driver set.  Each node's root carries a resource class, three traits the
driver sets (one dynamic) and an operator's trait; the tracker creates
the roots (the drivers do not, as Nova's do not).

Measured per driver, after a first cycle: the steady cycle (nothing
changed; median of ``STEADY_CYCLES`` per repetition) twice — *full*:
``node_stamp`` unknown, so every node is updated and settled every cycle;
*fast path*: ``node_stamp`` given, so unchanged nodes are skipped.  The
drivers alternate within each repetition, so the ratio compares samples
taken side by side.  CPU seconds (process time) and wall seconds.

Usage::

    python benchmarks/bench_tracker_ownership.py [--repeat N] [--smoke] [--json]
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import sys
import tempfile
import time
import pathlib

import benchlib  # beside this script

benchlib.use_checkout()
import os_traits  # noqa: E402

from virtdriver.capabilities.traits.ownership import Ownership  # noqa: E402
from virtdriver.drivers.base import ComputeDriver  # noqa: E402
from virtdriver.resource_tracker.tracker import ResourceTracker  # noqa: E402

STEADY_CYCLES = 5
OPERATOR = "CUSTOM_RACK_7"
ROW_PREFIX = "CUSTOM_ROW_"


class IronicLike(ComputeDriver):
    """``size`` nodes, one root each, traits set with ``update_traits``
    as Nova drivers set them (keeping what else is there)."""

    capabilities = {"supports_multiattach": False}
    ownership = Ownership(frozenset({os_traits.COMPUTE_NET_ATTACH_INTERFACE,
                                     "CUSTOM_RAID5"}), (ROW_PREFIX,))

    def __init__(self, size: int, stamped: bool) -> None:
        self.nodes = [f"node-{n:05d}" for n in range(size)]
        self._set = frozenset(self.nodes)
        self.stamped = stamped

    def init_host(self, host: str) -> None:
        return None

    def get_available_nodes(self, refresh: bool = False) -> list[str]:
        return self.nodes

    def require_node(self, nodename: str) -> None:
        if nodename not in self._set:
            super().require_node(nodename)

    def node_stamp(self, nodename: str) -> object | None:
        return 1 if self.stamped else None

    def update_provider_tree(self, tree, nodename, allocations=None):
        number = int(nodename[5:])
        tree.update_inventory(nodename, {
            f"CUSTOM_BAREMETAL_{('GOLD', 'SILVER')[number % 2]}": {
                "total": 1, "max_unit": 1}})
        mine = {os_traits.COMPUTE_NET_ATTACH_INTERFACE, "CUSTOM_RAID5",
                f"{ROW_PREFIX}{number % 16}"}
        current = tree.data(nodename).traits
        tree.update_traits(nodename, {t for t in current
                                      if not t.startswith(ROW_PREFIX)}
                           | mine)


class Undeclared(IronicLike):
    """The same driver, declaring no ownership."""

    ownership = None


def timed(call) -> tuple[float, float]:
    gc.collect()
    cpu, wall = time.process_time(), time.perf_counter()
    call()
    return time.process_time() - cpu, time.perf_counter() - wall


def median(pairs):
    return (statistics.median(p[0] for p in pairs),
            statistics.median(p[1] for p in pairs))


def tracker(cls, size: int, stamped: bool, state: pathlib.Path
            ) -> ResourceTracker:
    driver = cls(size, stamped)
    driver.init_host("conductor-1")
    found = ResourceTracker(driver, state_dir=state)
    found.update_all()
    for node in driver.nodes[::50]:   # an operator's trait here and there
        found.tree.add_traits(node, OPERATOR)
    found.update_all()
    return found


def run(size: int, repeat: int) -> dict:
    samples = {(name, mode): [] for name in ("declared", "undeclared")
               for mode in ("full", "fast path")}
    with tempfile.TemporaryDirectory(prefix="bench-ownership-") as tmp:
        for round_ in range(repeat):
            for mode in ("full", "fast path"):
                trackers = {
                    name: tracker(cls, size, mode == "fast path",
                                  pathlib.Path(tmp) / f"{name}-{mode}-{round_}")
                    for name, cls in (("declared", IronicLike),
                                      ("undeclared", Undeclared))}
                for _ in range(STEADY_CYCLES):   # side by side
                    for name, found in trackers.items():
                        samples[(name, mode)].append(timed(found.update_all))
                _check(trackers)
    return {f"{name}/{mode}": median(pairs)
            for (name, mode), pairs in samples.items()}


def _check(trackers) -> None:
    """Both trees the same: the same traits kept, the operator's too."""
    declared, undeclared = (trackers["declared"].tree,
                            trackers["undeclared"].tree)
    node = "node-00050"
    if declared.data(node).traits != undeclared.data(node).traits or \
            OPERATOR not in declared.data(node).traits:
        raise AssertionError(f"trees differ: {declared.data(node).traits} "
                             f"vs {undeclared.data(node).traits}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--nodes", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--smoke", action="store_true",
                        help="1,000 nodes, one repetition")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    size, repeat = (1_000, 1) if args.smoke else (args.nodes, args.repeat)
    report = run(size, repeat)
    if args.json:
        print(json.dumps({k: {"cpu_s": v[0], "wall_s": v[1]}
                          for k, v in report.items()}, indent=2))
        return 0
    print(f"steady cycle, {size:,} ironic-like nodes, median of "
          f"{STEADY_CYCLES * repeat} (CPU s / wall s):")
    for mode in ("full", "fast path"):
        d, u = report[f"declared/{mode}"], report[f"undeclared/{mode}"]
        print(f"  {mode:10} declared {d[0]:.4f} / {d[1]:.4f}   undeclared "
              f"{u[0]:.4f} / {u[1]:.4f}   undeclared/declared "
              f"{u[0] / d[0]:.2f}x CPU, {u[1] / d[1]:.2f}x wall")
    return 0


if __name__ == "__main__":
    sys.exit(main())
