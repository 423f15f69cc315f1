"""What every benchmark script shares: the checkout, options, goals, results.

Scripts run as ``python benchmarks/bench_X.py``, so this module is
importable beside them.  Each script builds a *report* (a JSON-able dict)
and hands it to :func:`finish`, which prints it (a table, or JSON with
``--json``), checks its goals, and writes ``<results>/<name>.json`` plus,
when the script gives scaling series, ``<results>/<name>.png``.  The
results folder is ``benchmarks/results/`` (not committed) unless
``--results DIR`` or ``$VIRTDRIVER_BENCH_RESULTS`` says otherwise.

Goals are :func:`goal` records in ``report["goals"]``; ``--check`` exits 1
when any is missed.  ``--smoke`` asks a script for its smallest sizes (a CI
smoke run); goals that need the large sizes are then reported as
``skipped``, never as met.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import pathlib
import resource
import sys

REPO = pathlib.Path(__file__).resolve().parents[1]
DEFAULT_RESULTS = REPO / "benchmarks" / "results"


def use_checkout() -> None:
    """Make ``virtdriver`` importable from this checkout if not installed."""
    if importlib.util.find_spec("virtdriver") is None:
        sys.path.insert(0, str(REPO))


def parser(doc: str, *, repeat: int, repeat_help: str,
           check_help: str) -> argparse.ArgumentParser:
    """An argument parser with the options every benchmark takes.

    ``--repeat``, ``--json``, ``--check``, ``--smoke`` and ``--results``;
    the description is the first paragraph of ``doc``.
    """
    parsed = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    parsed.add_argument("--repeat", type=int, default=repeat,
                        help=f"{repeat_help} (default: %(default)s)")
    parsed.add_argument("--json", action="store_true",
                        help="print the report as JSON instead of a table")
    parsed.add_argument("--check", action="store_true", help=check_help)
    parsed.add_argument("--smoke", action="store_true",
                        help="smallest sizes only (a quick CI run); goals "
                             "that need the large sizes are skipped")
    parsed.add_argument("--results", type=pathlib.Path, default=None,
                        help="folder for the JSON and PNG results (default: "
                             "$VIRTDRIVER_BENCH_RESULTS or benchmarks/results)")
    return parsed


def parse(parsed: argparse.ArgumentParser,
          argv: list[str] | None) -> argparse.Namespace:
    """Parse ``argv``, refusing a ``--repeat`` below 1."""
    args = parsed.parse_args(argv)
    if args.repeat < 1:
        parsed.error("--repeat must be at least 1")
    return args


def goal(name: str, measured: float | None, limit: float, *,
         unit: str = "", higher_is_better: bool = False) -> dict:
    """One goal of the issue: ``measured`` against ``limit``.

    ``measured`` of ``None`` means not measured in this run (``--smoke``,
    a missing optional part): the goal is ``skipped``, which ``--check``
    does not count as met or missed.
    """
    if measured is None:
        status = "skipped"
    elif higher_is_better:
        status = "met" if measured >= limit else "missed"
    else:
        status = "met" if measured <= limit else "missed"
    bound = ">=" if higher_is_better else "<="
    return {"goal": name, "measured": measured, "limit": limit,
            "bound": bound, "unit": unit, "status": status}


def goals_met(goals: list[dict]) -> bool:
    """Whether no goal was missed (skipped ones do not count)."""
    return all(each["status"] != "missed" for each in goals)


def peak_rss_mib() -> float:
    """This process's peak resident set size so far, in MiB (Linux)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def results_dir(args: argparse.Namespace) -> pathlib.Path:
    """Where this run writes its JSON and PNG (created if missing)."""
    folder = args.results or pathlib.Path(
        os.environ.get("VIRTDRIVER_BENCH_RESULTS") or DEFAULT_RESULTS)
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def plot_scaling(path: pathlib.Path, title: str, series: dict, *,
                 xlabel: str, ylabel: str, log: bool = True) -> bool:
    """Draw ``series`` (label → [(x, y), ...]) as lines into ``path`` (PNG).

    Returns False (and draws nothing) when matplotlib is not installed:
    the plot is a convenience, the JSON holds the numbers.
    """
    try:
        import matplotlib
        matplotlib.use("Agg")
        from matplotlib import pyplot
    except ImportError:
        return False
    figure, axes = pyplot.subplots(figsize=(6, 4), dpi=100)
    for label, points in series.items():
        xs, ys = zip(*sorted(points), strict=True) if points else ((), ())
        axes.plot(xs, ys, marker="o", label=label)
    if log:
        axes.set_xscale("log")
        axes.set_yscale("log")
    axes.set_title(title)
    axes.set_xlabel(xlabel)
    axes.set_ylabel(ylabel)
    axes.grid(True, which="both", alpha=0.3)
    axes.legend(fontsize="small")
    figure.tight_layout()
    figure.savefig(path)
    pyplot.close(figure)
    return True


def print_goals(goals: list[dict]) -> None:
    """The goals as a small table (after a script's own table)."""
    if not goals:
        return
    print("\ngoal                                              measured     "
          "limit  status")
    for each in goals:
        measured = ("-" if each["measured"] is None
                    else f"{each['measured']:.3g}{each['unit']}")
        limit = f"{each['bound']} {each['limit']:g}{each['unit']}"
        print(f"{each['goal'][:48]:48}  {measured:>10}  {limit:>9}  "
              f"{each['status']}")


def finish(report: dict, args: argparse.Namespace, print_table, *,
           name: str | None = None, plot: dict | None = None) -> int:
    """Print ``report``, save it, and return the exit status for ``--check``.

    The goals are ``report["goals"]`` (a list of :func:`goal` records);
    a script with a single yes/no goal may instead set
    ``report["goal_met"]``.  With ``name``, the report is written to
    ``<results>/<name>.json``; with ``plot`` (the keyword arguments of
    :func:`plot_scaling` but ``path``) also ``<results>/<name>.png``.
    """
    goals = report.setdefault("goals", [])
    report["goal_met"] = report.get("goal_met", True) and goals_met(goals)
    if name is not None:
        folder = results_dir(args)
        (folder / f"{name}.json").write_text(json.dumps(report, indent=2)
                                             + "\n")
        if plot is not None:
            plot_scaling(folder / f"{name}.png", **plot)
    if args.json:
        json.dump(report, sys.stdout, indent=2)
        print()
    else:
        print_table(report)
        print_goals(goals)
    return 1 if args.check and not report["goal_met"] else 0
