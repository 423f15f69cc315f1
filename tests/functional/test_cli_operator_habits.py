"""OpenStack operators' habits (issue 19): ``--version``, options a
command would ignore, inventory changes old -> new, a ``fake:///`` URI on
the real libvirt and ``fakelibvirt_packages``."""

from __future__ import annotations

import json
import re
import pathlib
import socket
import subprocess
import sys
from importlib import metadata

import pytest

from virtdriver.cli import main
from virtdriver.placement.result import ProviderOutcome
from virtdriver.render.sync import render_sync
from virtdriver.providers.inventory import Inventory

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
            "allocation_ratio 1.0 -> 1.5), VCPU (total 8 -> 16)") in line
    # max_unit is Placement's default (2**31-1) on both: not a change.
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


# -- [DEFAULT] host, the disk options, what a snapshot records --------------

def report_json(capsys, *argv: str) -> dict:
    assert main(["report", "--format", "json", *argv]) == 0, \
        capsys.readouterr().err
    return json.loads(capsys.readouterr().out)


def root(tree: dict) -> dict:
    [provider] = [p for p in tree["providers"]
                  if p.get("parent_provider_uuid") is None]
    return provider


@pytest.fixture
def host_conf(tmp_path) -> pathlib.Path:
    path = tmp_path / "host.conf"
    path.write_text("[DEFAULT]\nhost = compute-7\n[compute]\n"
                    "reserved_host_disk_mb = 1500\n"
                    "disk_allocation_ratio = 2.0\n")
    return path


def test_default_host_names_the_node_and_disk_options_apply(
        capsys, host_conf, monkeypatch):
    from virtdriver.drivers.libvirt import driver
    monkeypatch.setattr(driver, "host_disk_gb", lambda: 40)
    tree = report_json(capsys, "--uri", "test:///default",
                       "--config-file", str(host_conf))
    node = root(tree)
    assert node["name"] == "compute-7"
    assert node["uuid"] == driver.node_uuid("compute-7")
    disk = node["inventories"]["DISK_GB"]
    assert (disk["total"], disk["reserved"], disk["allocation_ratio"]) == (
        40, 2, 2.0)  # 1500 MiB rounds up to 2 GiB, as Nova rounds it


def test_a_bad_disk_allocation_ratio_is_one_line(capsys, tmp_path):
    path = tmp_path / "bad.conf"
    path.write_text("[compute]\ndisk_allocation_ratio = 0\n")
    status = main(["report", "--uri", "test:///default", "--config-file",
                   str(path)])
    err = capsys.readouterr().err
    assert status == 2
    assert "[compute] disk_allocation_ratio" in err and "Traceback" not in err


def test_a_replay_shows_the_recorded_host_and_disk(capsys, tmp_path,
                                                   host_conf, monkeypatch):
    from virtdriver.drivers.libvirt import driver, recorder
    snapshot = tmp_path / "snap"
    monkeypatch.setattr(recorder, "host_disk_gb", lambda: 930)
    assert main(["snapshot", "-o", str(snapshot), "--uri", "test:///default",
                 "--config-file", str(host_conf)]) == 0
    capsys.readouterr()
    manifest = json.loads((snapshot / "manifest.json").read_text())
    assert (manifest["host"], manifest["disk_gb"]) == ("compute-7", 930)
    # Replayed elsewhere: another name, another disk, the default config.
    monkeypatch.setattr(socket, "gethostname", lambda: "replayer")
    monkeypatch.setattr(driver, "host_disk_gb", lambda: 7)
    node = root(report_json(capsys, "--snapshot", str(snapshot)))
    assert node["name"] == "compute-7"
    assert node["inventories"]["DISK_GB"]["total"] == 930
    assert node["inventories"]["DISK_GB"]["reserved"] == 0  # replayer's conf


def test_an_older_snapshot_is_read_without_host_or_disk(capsys, tmp_path,
                                                        monkeypatch):
    from virtdriver.drivers.libvirt import driver
    snapshot = tmp_path / "old"
    assert main(["snapshot", "-o", str(snapshot), "--uri",
                 "test:///default"]) == 0
    capsys.readouterr()
    manifest = json.loads((snapshot / "manifest.json").read_text())
    del manifest["host"], manifest["disk_gb"]
    manifest["hostname"] = "recorded-by-libvirt"
    (snapshot / "manifest.json").write_text(json.dumps(manifest))
    monkeypatch.setattr(socket, "gethostname", lambda: "replayer")
    monkeypatch.setattr(driver, "host_disk_gb", lambda: 7)
    node = root(report_json(capsys, "--snapshot", str(snapshot)))
    assert node["name"] == "recorded-by-libvirt"
    assert "DISK_GB" not in node["inventories"]  # not the replayer's disk


def test_a_manifest_disk_gb_that_is_not_a_size_is_refused(capsys, tmp_path):
    snapshot = tmp_path / "snap"
    assert main(["snapshot", "-o", str(snapshot), "--uri",
                 "test:///default"]) == 0
    capsys.readouterr()
    manifest = json.loads((snapshot / "manifest.json").read_text())
    manifest["disk_gb"] = -1
    (snapshot / "manifest.json").write_text(json.dumps(manifest))
    assert main(["report", "--snapshot", str(snapshot)]) == 2
    err = capsys.readouterr().err
    assert "disk_gb must be a whole number" in err


# -- default config files and --config-dir ----------------------------------

def cells(tree: dict) -> list[dict]:
    return [p for p in tree["providers"] if p.get("parent_provider_uuid")]


@pytest.fixture
def etc(tmp_path, monkeypatch) -> pathlib.Path:
    """A stand-in for /etc/virtdriver: virtdriver.conf pins two CPUs,
    virtdriver.conf.d/ reserves 1024 MiB."""
    etc = tmp_path / "etc-virtdriver"
    (etc / "virtdriver.conf.d").mkdir(parents=True)
    (etc / "virtdriver.conf").write_text(
        "[compute]\ncpu_dedicated_set = 0-1\n")
    (etc / "virtdriver.conf.d" / "10-memory.conf").write_text(
        "[compute]\nreserved_host_memory_mb = 1024\n")
    (etc / "virtdriver.conf.d" / "README").write_text("not a .conf file")
    monkeypatch.setenv("VIRTDRIVER_CONFIG_DIRS",
                       f"{tmp_path / 'missing'}:{etc}")
    return etc


def test_the_default_file_and_directory_are_read(capsys, etc):
    first = cells(report_json(capsys, *FAKE))[0]["inventories"]
    assert first["PCPU"]["total"] == 2
    assert first["MEMORY_MB"]["reserved"] == 1024


def test_config_file_replaces_only_the_default_file(capsys, etc, tmp_path):
    mine = tmp_path / "mine.conf"
    mine.write_text("[compute]\ncpu_shared_set = 0-3\n")
    first = cells(report_json(capsys, *FAKE, "--config-file",
                              str(mine)))[0]["inventories"]
    assert "PCPU" not in first                     # the default file: not read
    assert first["MEMORY_MB"]["reserved"] == 1024  # the default dir: read


def test_config_dir_replaces_the_default_directory(capsys, etc, tmp_path):
    other = tmp_path / "other.d"
    other.mkdir()
    (other / "a.conf").write_text("[compute]\nreserved_host_memory_mb = 0\n")
    (other / "b.conf").write_text("[compute]\nreserved_host_memory_mb = 7\n")
    first = cells(report_json(capsys, *FAKE, "--config-dir",
                              str(other)))[0]["inventories"]
    assert first["PCPU"]["total"] == 2               # the default file
    assert first["MEMORY_MB"]["reserved"] == 7       # b.conf after a.conf


def test_a_typo_in_a_config_dir_file_is_refused(capsys, tmp_path):
    other = tmp_path / "typo.d"
    other.mkdir()
    (other / "x.conf").write_text("[compute]\ncpu_dedicated_sett = 1\n")
    assert main(["report", *FAKE, "--config-dir", str(other)]) == 2
    err = capsys.readouterr().err
    assert f"[compute] cpu_dedicated_sett in {other / 'x.conf'}" in err
    assert main(["report", *FAKE, "--config-dir",
                 str(tmp_path / "nope.d")]) == 2
    assert "check the --config-dir path" in capsys.readouterr().err


def test_the_searched_places_are_oslo_configs(monkeypatch, tmp_path):
    from oslo_config import cfg

    from virtdriver.conf import locations
    monkeypatch.delenv("VIRTDRIVER_CONFIG_DIRS")
    monkeypatch.setenv("HOME", str(tmp_path))
    (tmp_path / ".virtdriver" / "virtdriver.conf.d").mkdir(parents=True)
    (tmp_path / "virtdriver.conf").write_text("")
    assert locations.default_files() == cfg.find_config_files(
        "virtdriver", "virtdriver")[:1] == [str(tmp_path / "virtdriver.conf")]
    assert locations.default_dirs() == cfg.find_config_dirs(
        "virtdriver", "virtdriver")[:1]
    assert locations.search_dirs()[2:4] == ["/etc/virtdriver", "/etc"]


# -- the log, through oslo.log ----------------------------------------------

def test_a_log_file_on_a_full_disk_is_one_line(capsys):
    status = main(["--log-file", "/dev/full", "report", *FAKE])
    out, err = capsys.readouterr()
    assert status == 2
    assert err == ("virtdriver: --log-file /dev/full: cannot write to it (No "
                   "space left on device); free space on its filesystem or "
                   "choose another file\n")
    assert out == ""  # stopped before the command ran


def test_log_dir_writes_virtdriver_log_in_oslo_logs_format(tmp_path, capsys):
    status = main(["report", *FAKE, "--log-dir", str(tmp_path)])
    assert status == 0, capsys.readouterr().err
    [line] = (tmp_path / "virtdriver.log").read_text().splitlines()
    assert re.fullmatch(
        r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3} \d+ INFO virtdriver\.cli\."
        r"logs \[-\] virtdriver \S+ report: logging to "
        + re.escape(str(tmp_path / "virtdriver.log")), line), line


def test_the_log_setup_is_put_back_after_the_command(tmp_path, capsys):
    import logging
    root = logging.getLogger()
    before = (list(root.handlers), root.level, sys.excepthook)
    assert main(["--log-file", str(tmp_path / "a.log"), "drivers"]) == 0
    assert (list(root.handlers), root.level, sys.excepthook) == before
    capsys.readouterr()


def test_use_journal_without_the_bindings_is_one_line(capsys):
    pytest.importorskip("oslo_log")
    from oslo_log import handlers
    if handlers.journal is not None:
        pytest.skip("the systemd bindings are installed here")
    assert main(["--use-journal", "drivers"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("virtdriver: --use-journal: oslo.log needs the "
                          "systemd Python bindings")
    assert len(err.splitlines()) == 1


def test_explain_disk_gb_says_where_it_comes_from(capsys):
    main(["explain", "--uri", "test:///default", "DISK_GB", "VCPU"])
    out = capsys.readouterr().out
    disk, vcpu = out.splitlines()
    assert disk.startswith("DISK_GB: not a valid trait name — a resource "
                           "class, not a trait")
    assert "size of the filesystem holding the state directory" in disk
    assert "reserved_host_disk_mb" in disk and "disk_allocation_ratio" in disk
    assert vcpu.endswith("`virtdriver report` shows the inventories")


def test_syslog_alone_leaves_stdout_to_the_output(capsys):
    # oslo.log falls back to a stdout handler when no file or journal is
    # named; the command keeps stdout for its own output.
    tree = report_json(capsys, *FAKE, "--use-syslog")
    assert {p["name"] for p in tree["providers"]} >= {"fake-numa2-ht"}


def test_a_default_host_that_is_not_a_host_name_is_one_line(capsys,
                                                             tmp_path):
    path = tmp_path / "host.conf"
    path.write_text("[DEFAULT]\nhost = bad host!\n")
    assert main(["report", "--uri", "test:///default", "--config-file",
                 str(path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("virtdriver: bad configuration: [DEFAULT] host: "
                          "bad host! is not a valid host address")
    assert len(err.splitlines()) == 1


def test_a_placement_request_context_does_not_stick_to_our_lines(tmp_path,
                                                                capsys):
    # What the in-process Placement leaves in the thread after a request.
    from oslo_context import context
    context.RequestContext(user_id="admin", project_id="admin")
    assert context.get_current() is not None
    log = tmp_path / "x.log"
    try:
        assert main(["--log-file", str(log), "drivers"]) == 0
    finally:
        del context._request_store.context  # not this test's to keep
    capsys.readouterr()
    [line] = log.read_text().splitlines()
    assert " INFO virtdriver.cli.logs [-] " in line, line
