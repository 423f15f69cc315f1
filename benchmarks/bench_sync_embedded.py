#!/usr/bin/env python3
"""Warm `virtdriver sync` with nothing changed against warm `report`, side by side.

Each sample is one ``virtdriver`` process started the way the console
script starts it and timed from start to exit, on one state directory,
with the driver the README's first commands use (``qemu:///embed``; the
fake driver with ``--smoke`` or when QEMU is missing):

* **report** — ``virtdriver report``;
* **sync, unchanged** — ``virtdriver sync`` after a sync that changed
  nothing: the embedded database is as the last sync left it, so
  Placement is not started (``placement/db_stamp.py``);
* **sync, Placement started** — the same, its stamp removed first, so
  the run builds the embedded Placement as every run did before.

The three alternate within each round (the order rotating, and the CPU,
as ``bench_report.py`` does), so a machine busy with other work slows
all of them alike.  Goal (``--check`` exits 1 when missed), from issue
22: median(sync, unchanged) ≤ 1.3 × median(report).  The plot
(``results/sync_embedded.png``) is every run's time in order.

Usage::

    python benchmarks/bench_sync_embedded.py [--repeat N] [--smoke]
        [--json] [--check]
"""

from __future__ import annotations

import os
import pathlib
import statistics
import sys
import tempfile

import benchlib  # beside this script

benchlib.use_checkout()
from bench_report import command, cpus, embed_args, timed  # noqa: E402
from virtdriver.drivers.libvirt import connection  # noqa: E402

GOAL_RATIO = 1.3
SERIES = ("report", "sync, unchanged", "sync, Placement started")
STAMP = "placement.sqlite.stamp"


def measure(args) -> dict:
    rounds = 2 if args.smoke else args.repeat
    embed = (not args.smoke and bool(connection.find_qemu_driver()
                                     and connection.find_qemu_binary()))
    alternate = cpus()
    report: dict = {"rounds": rounds, "cpus": alternate,
                    "driver": "libvirt (qemu:///embed)" if embed
                    else "fake (small)", "runs": {s: [] for s in SERIES},
                    "errors": []}
    with tempfile.TemporaryDirectory(prefix="bench-sync-") as scratch:
        state = pathlib.Path(scratch)
        env = {**os.environ, "VIRTDRIVER_STATE_DIR": str(state)}
        driver = embed_args(state) if embed else ["--driver", "fake"]
        argv = {"report": ["report", *driver],
                "sync, unchanged": ["sync", *driver],
                "sync, Placement started": ["sync", *driver]}

        def run(series: str, cpu: int | None) -> float:
            if series == "sync, Placement started":
                (state / STAMP).unlink(missing_ok=True)
            seconds, status, last = timed(
                command(benchlib.REPO, *argv[series]), env, cpu)
            if status != 0:
                report["errors"].append(f"{series}: exit {status}: {last}")
            return seconds

        report["cold_sync_s"] = run("sync, unchanged", None)
        run("sync, unchanged", None)   # settles the ledger and the stamp
        for index in range(rounds):
            cpu = alternate[index % len(alternate)] if alternate else None
            order = SERIES[index % 3:] + SERIES[:index % 3]
            for series in order:
                report["runs"][series].append(run(series, cpu))
        if not (state / STAMP).exists():
            report["errors"].append("no stamp after an unchanged sync")
    medians = {s: statistics.median(r) for s, r in report["runs"].items()}
    report["median_s"] = medians
    ratio = medians["sync, unchanged"] / medians["report"]
    report["ratio_unchanged_to_report"] = ratio
    report["ratio_started_to_report"] = (
        medians["sync, Placement started"] / medians["report"])
    report["goals"] = [benchlib.goal(
        "warm sync unchanged / warm report (medians)", ratio, GOAL_RATIO,
        unit="x")]
    if report["errors"]:
        report["goal_met"] = False   # a failing command is no measurement
    return report


def print_table(report: dict) -> None:
    print(f"virtdriver sync vs report, end to end, {report['driver']} "
          f"({report['rounds']} rounds, CPUs {report['cpus'] or 'any'}); "
          f"cold sync {report['cold_sync_s']:.2f} s")
    print(f"{'':26}{'median (s)':>11}{'max (s)':>9}{'x report':>10}")
    base = report["median_s"]["report"]
    for series, runs in report["runs"].items():
        median = report["median_s"][series]
        print(f"{series:26}{median:>11.3f}{max(runs):>9.3f}"
              f"{median / base:>10.2f}")
    for error in report["errors"]:
        print(f"  FAILED: {error}")


def main(argv: list[str] | None = None) -> int:
    parsed = benchlib.parser(
        __doc__, repeat=10, repeat_help="rounds of the three commands",
        check_help=f"exit 1 if the unchanged sync's median is over "
                   f"{GOAL_RATIO}x the report's (or a command fails)")
    args = benchlib.parse(parsed, argv)
    report = measure(args)
    plot = {"title": f"warm runs, {report['driver']}",
            "series": {s: [(i + 1, t) for i, t in enumerate(runs)]
                       for s, runs in report["runs"].items()},
            "xlabel": "round", "ylabel": "seconds", "log": False}
    return benchlib.finish(report, args, print_table, name="sync_embedded",
                           plot=plot)


if __name__ == "__main__":
    sys.exit(main())
