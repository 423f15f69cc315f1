"""The out-of-tree driver of ``docs/driver-authors.md``, built as the guide
says and run by the commands an operator runs.

The package is written from the guide's listings (each fenced block
preceded by ``<!-- file: PATH -->``) into a temporary directory and
installed there with its entry point: setuptools reads its
``pyproject.toml`` and writes the distribution's metadata (``egg_info``;
pip would need ``wheel`` to do the same offline, and the venv has none),
beside a copy of the package, in a target directory put on
``PYTHONPATH`` — nothing is installed into the environment.  Then
``virtdriver report --driver example`` and ``virtdriver sync --driver
example`` (Placement embedded, on SQLite in ``VIRTDRIVER_STATE_DIR``)
each run in a fresh process.
"""

from __future__ import annotations

import json
import os
import pathlib
import re
import shutil
import socket
import subprocess
import sys

import os_resource_classes as orc
import os_traits

from virtdriver.drivers.identity import root_uuid

REPO = pathlib.Path(__file__).resolve().parents[2]
GUIDE = REPO / "docs" / "driver-authors.md"
EXAMPLE = REPO / "tests" / "plugins" / "virtdriver_example"
LISTING = re.compile(r"^<!-- file: (\S+) -->\n(```+)[a-z]*\n(.*?)^\2$",
                     re.S | re.M)
TIMEOUT = 180


def guide_files() -> dict[str, str]:
    """Path in the package → its text, as the guide lists them."""
    return {path: body for path, _fence, body in
            LISTING.findall(GUIDE.read_text(encoding="utf-8"))}


def test_the_guides_listings_are_the_example_plugin() -> None:
    files = guide_files()

    assert sorted(files) == ["pyproject.toml", "virtdriver_example/__init__.py",
                             "virtdriver_example/driver.py"]
    for path, text in files.items():
        assert (EXAMPLE / path).read_text(encoding="utf-8") == text, path


def run(argv: list[str], env: dict[str, str], cwd: pathlib.Path
        ) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(argv, env=env, cwd=cwd, capture_output=True,
                          text=True, timeout=TIMEOUT, check=False)
    assert done.returncode == 0, (argv, done.stdout, done.stderr)
    return done


def test_the_guides_package_installs_and_runs_report_and_sync(
        tmp_path: pathlib.Path) -> None:
    project = tmp_path / "virtdriver_example"
    for path, text in guide_files().items():
        (project / path).parent.mkdir(parents=True, exist_ok=True)
        (project / path).write_text(text, encoding="utf-8")
    site = tmp_path / "site"
    site.mkdir()
    env = {**os.environ, "PYTHONPATH": str(site),
           "VIRTDRIVER_STATE_DIR": str(tmp_path / "state")}
    run([sys.executable, "-c", "import setuptools; setuptools.setup()",
         "-q", "egg_info", "--egg-base", str(site)], env, project)
    shutil.copytree(project / "virtdriver_example",
                    site / "virtdriver_example")
    assert "example = virtdriver_example.driver:ExampleDriver" in (
        site / "virtdriver_example.egg-info" / "entry_points.txt"
    ).read_text()
    node = socket.gethostname()

    report = json.loads(run(
        [sys.executable, "-m", "virtdriver.cli", "report", "--driver",
         "example", "--format", "json"], env, tmp_path).stdout)
    synced = json.loads(run(
        [sys.executable, "-m", "virtdriver.cli", "sync", "--driver",
         "example", "--format", "json"], env, tmp_path).stdout)

    [provider] = report["providers"]
    assert (provider["name"], provider["uuid"]) == (
        node, root_uuid("example", node))
    assert provider["inventories"][orc.VCPU]["total"] == 8
    # COMPUTE_NODE is the tracker's, on every compute node (as Nova's).
    assert provider["traits"] == sorted(
        [os_traits.HW_CPU_X86_AVX2, "CUSTOM_EXAMPLE_TIER_GOLD",
         os_traits.COMPUTE_NODE])
    assert synced["tree"] == report
    sync = synced["sync"]
    assert sync["ok"] and "embedded Placement" in sync["placement"]
    assert [(p["uuid"], p["created"]) for p in sync["providers"]] == [
        (provider["uuid"], True)]
