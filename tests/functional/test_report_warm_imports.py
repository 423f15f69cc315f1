"""`virtdriver report` imports only what it uses (issue 13: a warm report
was 60-70% imports).

Each test runs the command through ``virtdriver.cli.main`` in a fresh
interpreter and reads its ``sys.modules`` afterwards: a module another
test imported into pytest's process cannot hide one the command imports.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys

import pytest

#: Imported by the command, printed as JSON on the last line.
PROBE = """
import contextlib, io, json, sys
from virtdriver.cli import main
out = io.StringIO()
with contextlib.redirect_stdout(out):
    status = main(sys.argv[1:])
print(json.dumps({"status": status, "out": out.getvalue(),
                  "modules": sorted(sys.modules)}))
"""

#: What no report without a config file or option needs: oslo.config and
#: keystoneauth1 (and requests with it) read and check config files, YAML
#: reads provider config or host description files, fakelibvirt replays
#: snapshots, Placement is sync's.
NEVER = ("oslo_config", "keystoneauth1", "requests", "yaml",
         "virtdriver.fakelibvirt", "virtdriver.placement",
         "virtdriver.cli.sync", "virtdriver.cli.claims")


def report(tmp_path, *argv: str, command: str = "report") -> dict:
    env = {**os.environ, "VIRTDRIVER_STATE_DIR": str(tmp_path / "state")}
    done = subprocess.run(
        [sys.executable, "-c", PROBE, command, *argv], env=env,
        capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.splitlines()[-1])


def imported(result: dict, package: str) -> list[str]:
    return [name for name in result["modules"]
            if name == package or name.startswith(package + ".")]


def test_fake_report_imports_no_config_yaml_libvirt_or_fakelibvirt(tmp_path):
    result = report(tmp_path, "--driver", "fake")
    assert result["status"] == 0
    assert "fake-small_NUMA0" in result["out"]
    assert "MEMORY_MB 8192 (reserved 512)" in result["out"]  # the default
    for package in (*NEVER, "libvirt"):
        assert imported(result, package) == [], package


def test_libvirt_report_imports_no_config_yaml_or_fakelibvirt(tmp_path):
    # test:///default: the libvirt driver's whole path, no QEMU needed.
    result = report(tmp_path, "--uri", "test:///default")
    assert result["status"] == 0
    assert "libvirt URI: test:///default" in result["out"]
    assert imported(result, "libvirt") == ["libvirt"]
    for package in NEVER:
        assert imported(result, package) == [], package


@pytest.mark.parametrize("given", ["file", "option"])
def test_a_config_file_or_option_reads_through_oslo_config(tmp_path, given):
    if given == "file":
        conf = tmp_path / "virtdriver.conf"
        conf.write_text("[compute]\nreserved_host_memory_mb = 1024\n")
        argv = ("--config-file", str(conf))
    else:
        argv = ("--reserved-host-memory-mb", "1024")
    result = report(tmp_path, "--driver", "fake", *argv)
    assert "MEMORY_MB 8192 (reserved 1024)" in result["out"]
    assert imported(result, "oslo_config")


def test_a_provider_config_file_still_reads_yaml(tmp_path):
    configs = tmp_path / "provider_config"
    configs.mkdir()
    (configs / "custom.yaml").write_text(
        "meta:\n  schema_version: '1.0'\nproviders:\n"
        "  - identification:\n      uuid: $COMPUTE_NODE\n"
        "    traits:\n      additional:\n        - CUSTOM_WARM\n")
    conf = tmp_path / "virtdriver.conf"
    conf.write_text(f"[compute]\nprovider_config_location = {configs}\n")
    result = report(tmp_path, "--driver", "fake", "--config-file", str(conf))
    assert "CUSTOM_WARM" in result["out"]
    assert imported(result, "yaml")


def test_an_unchanged_embedded_sync_imports_no_placement(tmp_path):
    """Issue 22: the second sync finds the embedded database as the first
    left it and the tree unchanged, so it starts no Placement and reads
    no config (``placement/db_stamp.py``)."""
    if importlib.util.find_spec("placement.deploy") is None:
        pytest.skip("openstack-placement is not installed")
    argv = ("--driver", "fake", "--format", "json")
    first = report(tmp_path, *argv, command="sync")
    assert "placement.deploy" in first["modules"]   # it was started

    second = report(tmp_path, *argv, command="sync")

    doc = json.loads(second["out"])
    assert doc["sync"]["requests"]["total"] == 0
    assert doc["tree"] == json.loads(first["out"])["tree"]
    for package in ("placement", "oslo_config", "keystoneauth1",
                    "requests", "sqlalchemy"):
        assert imported(second, package) == [], package
