"""What every benchmark script shares: finding the checkout, and options.

Scripts run as ``python benchmarks/bench_X.py``, so this module is
importable beside them.
"""

from __future__ import annotations

import argparse
import json
import importlib.util
import pathlib
import sys

REPO = pathlib.Path(__file__).resolve().parents[1]


def use_checkout() -> None:
    """Make ``virtdriver`` importable from this checkout if not installed."""
    if importlib.util.find_spec("virtdriver") is None:
        sys.path.insert(0, str(REPO))


def parser(doc: str, *, repeat: int, repeat_help: str,
           check_help: str) -> argparse.ArgumentParser:
    """An argument parser with ``--repeat``, ``--json`` and ``--check``.

    The description is the first paragraph of ``doc``.
    """
    parsed = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    parsed.add_argument("--repeat", type=int, default=repeat,
                        help=f"{repeat_help} (default: %(default)s)")
    parsed.add_argument("--json", action="store_true",
                        help="print the report as JSON instead of a table")
    parsed.add_argument("--check", action="store_true", help=check_help)
    return parsed


def parse(parsed: argparse.ArgumentParser,
          argv: list[str] | None) -> argparse.Namespace:
    """Parse ``argv``, refusing a ``--repeat`` below 1."""
    args = parsed.parse_args(argv)
    if args.repeat < 1:
        parsed.error("--repeat must be at least 1")
    return args


def finish(report: dict, args: argparse.Namespace, print_table) -> int:
    """Print ``report`` (JSON or table); the exit status for ``--check``.

    ``report["goal_met"]`` says whether the script's goal held.
    """
    if args.json:
        json.dump(report, sys.stdout, indent=2)
        print()
    else:
        print_table(report)
    return 1 if args.check and not report["goal_met"] else 0
