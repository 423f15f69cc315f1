"""OpenStack operators' habits (issue 19): ``--version``, options a
command would ignore, inventory changes old -> new, a ``fake:///`` URI on
the real libvirt and ``fakelibvirt_packages``."""

from __future__ import annotations

import subprocess
import sys
from importlib import metadata

import pytest

from virtdriver.cli import main
from virtdriver.placement.result import ProviderOutcome
from virtdriver.render.sync import render_sync
from virtdriver.resource_tracker.inventory import Inventory

FAKE = ["--driver", "fake", "--host-spec", "numa2-ht"]


def test_version_prints_the_installed_version(capsys):
    with pytest.raises(SystemExit) as done:
        main(["--version"])
    assert done.value.code == 0
    assert capsys.readouterr().out == (
        f"virtdriver {metadata.version('virtdriver')}\n")


def test_the_agent_has_no_format_to_ignore(capsys):
    with pytest.raises(SystemExit) as done:
        main(["agent", "--once", "--format", "json", *FAKE])
    assert done.value.code == 2
    assert "unrecognized arguments: --format json" in capsys.readouterr().err


def test_a_picture_output_refuses_format_json(tmp_path, capsys):
    picture = tmp_path / "x.png"
    status = main(["report", *FAKE, "--format", "json", "--output",
                   str(picture)])
    err = capsys.readouterr().err
    assert status == 2
    assert "--format json would not apply" in err and "drop" in err
    assert len(err.strip().splitlines()) == 1
    assert not picture.exists()


def test_an_inventory_change_shows_old_and_new():
    old = Inventory(total=4096, reserved=512, allocation_ratio=1.0)
    new = Inventory(total=4096, reserved=1024, allocation_ratio=1.5)
    vcpu = Inventory(total=8)
    outcome = ProviderOutcome(
        uuid="u1", name="cn1",
        inventory={"MEMORY_MB": (old, new),
                   "VCPU": (vcpu, Inventory(total=16)),
                   "DISK_GB": (None, Inventory(total=100))})
    line = outcome.describe()
    assert ("inventory +DISK_GB=100, MEMORY_MB (reserved 512 -> 1024, "
            "allocation_ratio 1.0 -> 1.5), VCPU (total 8 -> 16, "
            "max_unit 8 -> 16)") in line
    from virtdriver.placement.result import SyncResult
    text = render_sync(SyncResult(outcomes=(outcome,)), "embedded")
    assert "reserved 512 -> 1024" in text


def test_a_fake_uri_on_the_real_libvirt_is_a_clear_error():
    pytest.importorskip("libvirt")
    import libvirt

    from virtdriver.drivers.libvirt import connection
    assert connection.libvirt is libvirt  # the real module, not swapped
    with pytest.raises(connection.LibvirtConnectionError) as refused:
        connection.open_connection("fake:///host1")
    assert "a fakelibvirt URI reached the real libvirt" in str(refused.value)
    assert "fakelibvirt_packages" in str(refused.value)


def test_fakelibvirt_packages_add_to_virtdriver():
    from virtdriver.fakelibvirt.pytest_plugin import swapped_packages
    assert swapped_packages([]) == ["virtdriver"]
    assert swapped_packages(["mydriver"]) == ["virtdriver", "mydriver"]
    assert swapped_packages(["mydriver", "virtdriver"]) == [
        "virtdriver", "mydriver"]


def test_the_fixture_swaps_virtdriver_when_the_ini_names_another(tmp_path):
    # A suite whose ini lists its own package (here: json) still gets
    # virtdriver's libvirt swapped: its driver builds on ours.
    (tmp_path / "pytest.ini").write_text(
        "[pytest]\nfakelibvirt_packages =\n    json\n")
    (tmp_path / "test_swap.py").write_text(
        "def test_swapped(fakelibvirt):\n"
        "    from virtdriver.drivers.libvirt import connection\n"
        "    assert connection.libvirt is fakelibvirt\n")
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
         "-p", "no:xdist", str(tmp_path)], cwd=tmp_path,
        capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 passed" in done.stdout
