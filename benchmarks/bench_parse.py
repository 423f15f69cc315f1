#!/usr/bin/env python3
"""Parse time per corpus document: our parsers against a bare lxml parse.

For every document of the libvirt corpus (host and domain capabilities) the
script times, side by side in one run, ``parse_host_capabilities`` /
``parse_domain_capabilities`` and a bare ``lxml.etree.fromstring`` of the
same bytes, and reports the medians and their ratio.  The goal (issue 13)
is a median ratio over the corpus of at most 2.0, parsing staying eager;
see README.md beside this file.  ``--smoke`` takes 5 samples per document
instead of 31 (every document is still measured, and the goal with it).

Usage::

    python benchmarks/bench_parse.py [--corpus DIR] [--repeat N] [--json]
                                     [--check] [--smoke] [--results DIR]
                                     [--profile NAME]
"""

from __future__ import annotations

import cProfile
import gc
import pathlib
import pstats
import statistics
import sys
import time
from collections.abc import Callable

import benchlib  # beside this script
from lxml import etree

DEFAULT_CORPUS = benchlib.REPO.parent / "shared" / "corpus" / "libvirt"
#: Median over the corpus of our parse time / bare lxml's (issue 13).
GOAL = 2.0
#: --smoke: timed samples per document (the goal is still measured).
SMOKE_REPEAT = 5
#: Each timed sample runs the parse this long at least, so that timer
#: resolution and call overhead do not dominate tiny documents.
MIN_SAMPLE_NS = 200_000

benchlib.use_checkout()
from virtdriver.capabilities import (  # noqa: E402
    parse_domain_capabilities, parse_host_capabilities)

PARSERS: dict[str, Callable[..., object]] = {
    "hostcaps": parse_host_capabilities,
    "domcaps": parse_domain_capabilities,
}


def documents(corpus: pathlib.Path) -> list[tuple[str, bytes, Callable]]:
    """(name, bytes, our parser) for every corpus document, sorted."""
    found = []
    for kind, parser in PARSERS.items():
        for path in sorted((corpus / kind).glob("*.xml")):
            found.append((f"{kind}/{path.name}", path.read_bytes(), parser))
    return found


def _bare(data: bytes) -> object:
    return etree.fromstring(data)


def _time(func: Callable, data: bytes, loops: int) -> float:
    """Nanoseconds per call of ``func(data)``, averaged over ``loops``."""
    start = time.perf_counter_ns()
    for _ in range(loops):
        func(data)
    return (time.perf_counter_ns() - start) / loops


def measure(data: bytes, ours: Callable, repeat: int) -> dict[str, float]:
    """Median ns per parse, bare and ours, interleaved sample by sample."""
    for _ in range(3):  # warm up caches, the thread-local parser, imports
        _bare(data)
        ours(data)
    single = max(_time(_bare, data, 1), 1.0)
    loops = max(1, int(MIN_SAMPLE_NS // single))
    bare, mine = [], []
    for i in range(repeat):
        # Alternate which goes first so neither always runs on a warm cache.
        if i % 2:
            mine.append(_time(ours, data, loops))
            bare.append(_time(_bare, data, loops))
        else:
            bare.append(_time(_bare, data, loops))
            mine.append(_time(ours, data, loops))
    bare_median = statistics.median(bare)
    ours_median = statistics.median(mine)
    return {"bare_us": bare_median / 1000, "ours_us": ours_median / 1000,
            "ratio": ours_median / bare_median, "loops": loops}


def run(corpus: pathlib.Path, repeat: int) -> dict:
    results = []
    gc_was_enabled = gc.isenabled()
    gc.disable()  # as timeit does: collection pauses are noise here
    try:
        for name, data, parser in documents(corpus):
            row = measure(data, parser, repeat)
            results.append({"file": name, "bytes": len(data), **row})
    finally:
        if gc_was_enabled:
            gc.enable()
    ratios = [row["ratio"] for row in results]
    worst = max(results, key=lambda row: row["ratio"])
    median = statistics.median(ratios)
    return {
        "corpus": str(corpus), "repeat": repeat,
        "documents": results, "median_ratio": median,
        "worst_ratio": worst["ratio"], "worst_file": worst["file"],
        "goals": [benchlib.goal("median parse / bare lxml over the corpus",
                                median, GOAL, unit="x")],
    }


def plot(report: dict) -> dict:
    """The ratio against document size, one line per document kind."""
    series: dict[str, list] = {kind: [] for kind in PARSERS}
    for row in report["documents"]:
        series[row["file"].split("/")[0]].append((row["bytes"], row["ratio"]))
    series[f"goal ({GOAL}x, median)"] = [
        (min(row["bytes"] for row in report["documents"]), GOAL),
        (max(row["bytes"] for row in report["documents"]), GOAL)]
    return {"title": "capability XML parse vs bare lxml.etree.fromstring",
            "series": series, "xlabel": "document size (bytes)",
            "ylabel": "our parse time / bare parse time"}


def print_table(report: dict) -> None:
    rows = report["documents"]
    width = max(len(row["file"]) for row in rows)
    print(f"{'file':<{width}} {'bytes':>7} {'bare µs':>9} {'ours µs':>9} "
          f"{'ratio':>6}")
    for row in rows:
        print(f"{row['file']:<{width}} {row['bytes']:>7} "
              f"{row['bare_us']:>9.1f} {row['ours_us']:>9.1f} "
              f"{row['ratio']:>6.2f}")
    print()
    print(f"documents:    {len(rows)} (median of {report['repeat']} "
          "interleaved samples each)")
    print(f"median ratio: {report['median_ratio']:.2f}")
    print(f"worst ratio:  {report['worst_ratio']:.2f} "
          f"({report['worst_file']})")


def profile(corpus: pathlib.Path, name: str, loops: int = 300) -> None:
    """Print where our parse of one document spends its time."""
    matches = [doc for doc in documents(corpus) if name in doc[0]]
    if not matches:
        sys.exit(f"no corpus document matches {name!r}")
    doc_name, data, parser = matches[0]
    profiler = cProfile.Profile()
    profiler.enable()
    for _ in range(loops):
        parser(data)
    profiler.disable()
    print(f"cProfile of {loops} parses of {doc_name}:")
    pstats.Stats(profiler).sort_stats("tottime").print_stats(20)


def main(argv: list[str] | None = None) -> int:
    parser = benchlib.parser(
        __doc__, repeat=31, repeat_help="timed samples per document and "
        "parser", check_help=f"exit 1 if the median ratio exceeds {GOAL}")
    parser.add_argument("--corpus", type=pathlib.Path, default=DEFAULT_CORPUS,
                        help="corpus root with hostcaps/ and domcaps/ "
                             "(default: %(default)s)")
    parser.add_argument("--profile", metavar="NAME",
                        help="instead of timing, cProfile our parse of the "
                             "first document whose name contains NAME")
    args = benchlib.parse(parser, argv)
    if not (args.corpus / "domcaps").is_dir():
        parser.error(f"no corpus at {args.corpus} (expected domcaps/ and "
                     "hostcaps/ in it)")
    if args.profile:
        profile(args.corpus, args.profile)
        return 0
    repeat = min(args.repeat, SMOKE_REPEAT) if args.smoke else args.repeat
    report = run(args.corpus, repeat)
    return benchlib.finish(report, args, print_table, name="parse",
                           plot=plot(report))


if __name__ == "__main__":
    sys.exit(main())
