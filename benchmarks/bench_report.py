#!/usr/bin/env python3
"""`virtdriver report` end to end, as a command: embed cold and warm, fakes.

Each sample is one ``virtdriver report`` process, started the way the
console script starts it and timed from start to exit:

* **embed cold** — ``qemu:///embed`` on a fresh state directory: libvirt
  probes every ``qemu-system-*`` binary and caches what it found;
* **embed warm** — the runs after it on the same root (median and maximum
  of ``--repeat``), alternating between the first and the last CPU this
  process may use (``taskset -c``), so a cache that only holds on the CPU
  that wrote it would show as multi-second runs;
* **fake presets** — ``--driver fake --host-spec P`` for every preset
  (no libvirt at all: imports plus the tracker);
* **floor** — ``python -c pass``.

``--baseline DIR`` (repeatable) runs every command also from the checkout
at DIR (e.g. ``git archive <commit> | tar -x -C /tmp/before``),
interleaved with this one's runs and on its own state directory, for
before/after figures taken side by side.  The embed rows are skipped,
and the goal with them, when libvirt's QEMU driver or a ``qemu-system``
binary is missing.

Goal (``--check`` exits 1 when missed), from issue 13: the warm embed
report's maximum over the warm runs ≤ 0.3 s.  The plot
(``results/report.png``) is every warm run's time in order, each checkout
a line, the floor for scale.

Usage::

    python benchmarks/bench_report.py [--repeat N] [--smoke] [--json]
        [--check] [--baseline DIR]
"""

from __future__ import annotations

import importlib.util
import os
import pathlib
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import benchlib  # beside this script

benchlib.use_checkout()
from virtdriver.drivers.fake_host import PRESETS  # noqa: E402
from virtdriver.drivers.libvirt import connection  # noqa: E402

GOAL_WARM_MAX_S = 0.3
#: Runs per fake preset (their median is reported).
PRESET_RUNS = 3
#: Starts the command from one checkout, as the console script does.
LAUNCH = ("import sys; sys.path.insert(0, sys.argv.pop(1)); "
          "from virtdriver.cli import main; sys.exit(main())")


def command(checkout: pathlib.Path, *argv: str) -> list[str]:
    """``virtdriver ARGV`` run from ``checkout``'s sources."""
    return [sys.executable, "-c", LAUNCH, str(checkout), *argv]


def cpus() -> list[int]:
    """The two CPUs warm runs alternate between (one if only one)."""
    usable = sorted(os.sched_getaffinity(0)) if hasattr(
        os, "sched_getaffinity") else []
    return sorted({usable[0], usable[-1]}) if usable else []


def timed(argv: list[str], env: dict[str, str], cpu: int | None = None
          ) -> tuple[float, int, str]:
    """Seconds ``argv`` took, its exit status and its last stderr line;
    on CPU ``cpu`` (``taskset -c``, or the affinity call) when given."""
    preexec = None
    if cpu is not None:
        if shutil.which("taskset"):
            argv = ["taskset", "-c", str(cpu), *argv]
        else:
            def preexec():
                os.sched_setaffinity(0, {cpu})
    start = time.perf_counter()
    done = subprocess.run(argv, env=env, stdout=subprocess.DEVNULL,
                          stderr=subprocess.PIPE, text=True, check=False,
                          preexec_fn=preexec)
    elapsed = time.perf_counter() - start
    lines = done.stderr.strip().splitlines()
    return elapsed, done.returncode, lines[-1] if lines else ""


def embed_args(root: pathlib.Path) -> list[str]:
    """The report's arguments for ``qemu:///embed`` at ``root``: none when
    it is the default choice (no daemon), as the README runs it."""
    if not any(connection.is_socket(s) for s in connection.DAEMON_SOCKETS):
        return []
    # A daemon answers here: name the embed root, prepared as the default
    # choice prepares it.
    connection.prepare_embed_root(root / "embed")
    return ["--uri", connection.embed_uri(root / "embed")]


def bytecode(checkout: pathlib.Path) -> str:
    """``fresh/all``: how many of ``checkout``'s modules have compiled
    bytecode at least as new as their source (Python compiles the others
    on every run when it may not write ``__pycache__``)."""
    sources = list((checkout / "virtdriver").rglob("*.py"))
    fresh = 0
    for source in sources:
        cached = pathlib.Path(importlib.util.cache_from_source(str(source)))
        if cached.exists() and \
                cached.stat().st_mtime >= source.stat().st_mtime:
            fresh += 1
    return f"{fresh}/{len(sources)}"


def summary(samples: list[float]) -> dict:
    return {"median_s": statistics.median(samples), "max_s": max(samples),
            "min_s": min(samples), "runs": len(samples)}


def measure(args) -> dict:
    checkouts = {"this": benchlib.REPO}
    for directory in args.baseline:
        label = directory.resolve().name or str(directory)
        while label in checkouts:
            label += "'"
        checkouts[label] = directory.resolve()
    warm_runs = 3 if args.smoke else args.repeat
    alternate = cpus()
    embed_ok = bool(connection.find_qemu_driver()
                    and connection.find_qemu_binary())
    report: dict = {"warm_runs": warm_runs, "cpus": alternate,
                    "embed_available": embed_ok, "checkouts": {}}
    with tempfile.TemporaryDirectory(prefix="bench-report-") as scratch:
        envs = {}
        for label, checkout in checkouts.items():
            state = pathlib.Path(scratch) / label
            state.mkdir()
            envs[label] = {**os.environ, "VIRTDRIVER_STATE_DIR": str(state)}
            report["checkouts"][label] = {
                "path": str(checkout), "bytecode": bytecode(checkout),
                "warm": [], "errors": []}
        labels = list(checkouts)

        def run(label, argv, cpu=None):
            seconds, status, last = timed(
                command(checkouts[label], *argv), envs[label], cpu)
            if status != 0:
                report["checkouts"][label]["errors"].append(
                    f"{' '.join(argv)}: exit {status}: {last}")
            return seconds

        floor = [timed([sys.executable, "-c", "pass"], os.environ)[0]
                 for _ in range(warm_runs)]
        report["floor"] = summary(floor)
        if embed_ok:
            argv = {label: ["report", *embed_args(
                pathlib.Path(envs[label]["VIRTDRIVER_STATE_DIR"]))]
                for label in labels}
            for label in labels:
                report["checkouts"][label]["cold_s"] = run(label,
                                                           argv[label])
            for index in range(warm_runs):
                cpu = alternate[index % len(alternate)] if alternate \
                    else None
                # Alternate which checkout goes first, too.
                for label in (labels if index % 2 == 0 else labels[::-1]):
                    report["checkouts"][label]["warm"].append(
                        {"cpu": cpu, "s": run(label, argv[label], cpu)})
            for label in labels:
                entry = report["checkouts"][label]
                entry["embed_warm"] = summary([w["s"] for w in entry["warm"]])
        presets = list(PRESETS)[:1] if args.smoke else list(PRESETS)
        for preset in presets:
            samples: dict[str, list[float]] = {label: [] for label in labels}
            for index in range(PRESET_RUNS):
                for label in (labels if index % 2 == 0 else labels[::-1]):
                    samples[label].append(run(label, [
                        "report", "--driver", "fake", "--host-spec", preset]))
            for label in labels:
                report["checkouts"][label].setdefault("fake", {})[preset] = \
                    statistics.median(samples[label])
    this = report["checkouts"]["this"]
    warm_max = this["embed_warm"]["max_s"] if embed_ok else None
    report["goals"] = [benchlib.goal(
        "report warm max, qemu:///embed (s)", warm_max, GOAL_WARM_MAX_S,
        unit=" s")]
    if any(entry["errors"] for entry in report["checkouts"].values()):
        report["goal_met"] = False  # a failing command is no measurement
    return report


def print_table(report: dict) -> None:
    labels = list(report["checkouts"])
    print(f"virtdriver report, end to end ({report['warm_runs']} warm runs, "
          f"CPUs {report['cpus'] or 'not chosen'}); floor `python -c pass` "
          f"median {report['floor']['median_s']:.3f} s")
    print(f"{'':28}" + "".join(f"{label[:13]:>14}" for label in labels))
    rows = [("modules with bytecode", lambda e: e["bytecode"])]
    if report["embed_available"]:
        rows += [
            ("embed cold (s)", lambda e: f"{e['cold_s']:.2f}"),
            ("embed warm median (s)",
             lambda e: f"{e['embed_warm']['median_s']:.3f}"),
            ("embed warm max (s)",
             lambda e: f"{e['embed_warm']['max_s']:.3f}"),
        ]
    else:
        print("(qemu:///embed rows skipped: no QEMU driver or binary)")
    for preset in report["checkouts"][labels[0]].get("fake", {}):
        rows.append((f"fake {preset} median (s)",
                     lambda e, p=preset: f"{e['fake'][p]:.3f}"))
    for name, cell in rows:
        print(f"{name:28}" + "".join(
            f"{cell(report['checkouts'][label]):>14}" for label in labels))
    if report["embed_available"]:
        for label in labels:
            runs = " ".join(f"{w['s']:.2f}@{w['cpu']}"
                            for w in report["checkouts"][label]["warm"])
            print(f"  {label} warm runs (s@cpu): {runs}")
    for label in labels:
        for error in report["checkouts"][label]["errors"]:
            print(f"  {label} FAILED: {error}")


def main(argv: list[str] | None = None) -> int:
    parsed = benchlib.parser(
        __doc__, repeat=10, repeat_help="warm embed runs",
        check_help=f"exit 1 if a warm embed report takes more than "
                   f"{GOAL_WARM_MAX_S} s (or a command fails)")
    parsed.add_argument("--baseline", type=pathlib.Path, action="append",
                        default=[], metavar="DIR",
                        help="also time the checkout at DIR, side by side "
                        "(before/after figures; repeatable; labelled by "
                        "the directory's name)")
    args = benchlib.parse(parsed, argv)
    report = measure(args)
    plot = None
    if report["embed_available"]:
        series = {label: [(i + 1, w["s"]) for i, w in enumerate(entry["warm"])]
                  for label, entry in report["checkouts"].items()}
        series["python -c pass (median)"] = [
            (1, report["floor"]["median_s"]),
            (report["warm_runs"], report["floor"]["median_s"])]
        plot = {"title": "virtdriver report, qemu:///embed, warm runs "
                         "(alternating CPUs)",
                "series": series, "xlabel": "warm run",
                "ylabel": "seconds"}
    return benchlib.finish(report, args, print_table, name="report",
                           plot=plot)


if __name__ == "__main__":
    sys.exit(main())
