"""The benchmarks still run (they import internals that change): each
cheap one with ``--smoke`` writes its JSON report with goal records and
its plot.  Timing goals are never checked here — they live in the suite
(``./run bench --check``), not in the tests."""

from __future__ import annotations

import importlib.util
import json
import pathlib
import subprocess
import sys

import pytest

from tests.corpus import CORPUS, MISSING

REPO = pathlib.Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("name", ["tracker", "provider_tree", "parse",
                                  "devices_parse", "devices",
                                  "device_candidates"])
def test_a_smoke_run_writes_its_report_and_goals(tmp_path, name):
    if name == "parse" and not CORPUS.is_dir():
        pytest.skip(MISSING)  # bench_parse times the corpus
    done = subprocess.run(
        [sys.executable, str(REPO / "benchmarks" / f"bench_{name}.py"),
         "--smoke", "--repeat", "1", "--results", str(tmp_path)],
        capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    report = json.loads((tmp_path / f"{name}.json").read_text())
    assert report["goals"], "a benchmark without goals"
    for goal in report["goals"]:
        assert goal["status"] in {"met", "missed", "skipped"}
        assert goal["status"] == "skipped" or goal["measured"] is not None
    assert report["goal_met"] == all(
        g["status"] != "missed" for g in report["goals"])
    plot = tmp_path / f"{name}.png"
    if importlib.util.find_spec("matplotlib") is None:
        assert not plot.exists()   # the plot is optional, the JSON is not
    else:
        assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
