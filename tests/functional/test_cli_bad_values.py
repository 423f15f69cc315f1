"""Bad values are refused where they are read: one ``virtdriver: ...``
line, exit 2, never an internal error — through ``cli.main``, in-process,
with the fake driver and a state directory in tmp_path (issue 19)."""

from __future__ import annotations

import json
import os
import pathlib
import threading

import pytest

from virtdriver import cli

FAKE = ["--driver", "fake", "--host-spec", "small"]
UUID = "11111111-2222-3333-4444-555555555555"


@pytest.fixture(autouse=True)
def state(tmp_path, monkeypatch) -> pathlib.Path:
    path = tmp_path / "state"
    monkeypatch.setenv("VIRTDRIVER_STATE_DIR", str(path))
    return path


def run(capsys, *argv: str) -> tuple[int, str]:
    status = cli.main(list(argv))
    err = capsys.readouterr().err
    assert "internal error" not in err and "Traceback" not in err, err
    return status, err


def refused(capsys, *argv: str) -> str:
    """The one error line of a command that must exit 2."""
    status, err = run(capsys, *argv)
    lines = [line for line in err.splitlines() if line.strip()]
    assert status == 2, err
    assert lines and lines[-1].startswith("virtdriver: "), err
    return lines[-1]


def conf_file(tmp_path, text: str) -> str:
    path = tmp_path / "virtdriver.conf"
    path.write_text(text)
    return str(path)


# -- agent --interval --------------------------------------------------------

@pytest.mark.parametrize("interval", ["nan", "inf", "0", "-5"])
def test_an_interval_that_is_no_pause_or_never_is_refused(capsys, interval,
                                                          state):
    line = refused(capsys, "agent", "--once", "--interval", interval, *FAKE)
    assert "--interval" in line and "above 0" in line
    assert not state.exists()  # refused before anything ran


# -- [placement] -------------------------------------------------------------

@pytest.mark.parametrize("setting, said", [
    ("timeout = 0", "[placement] timeout = 0 is not a number of seconds"),
    ("timeout = -5", "[placement] timeout = -5 is not a number of seconds"),
    ("timeout = abc", "[placement] timeout: could not convert string"),
    ("timeout = " + "9" * 5000, "[placement] timeout"),
])
def test_a_placement_timeout_that_cannot_work_is_refused(
        tmp_path, capsys, setting, said):
    path = conf_file(tmp_path, "[placement]\nendpoint_override = "
                     f"http://127.0.0.1:9\n{setting}\n")
    line = refused(capsys, "sync", *FAKE, "--config-file", path)
    assert said in line
    assert "set_int_max_str_digits" not in line


@pytest.mark.parametrize("command", ["sync", "agent"])
def test_an_endpoint_override_that_is_not_a_url_is_refused(
        tmp_path, capsys, command):
    path = conf_file(tmp_path, "[placement]\nendpoint_override = not a url\n")
    once = ["--once"] if command == "agent" else []
    status, err = run(capsys, command, *once, *FAKE, "--config-file", path)
    assert status == 2, err
    assert ("[placement] endpoint_override = 'not a url' is not an http:// "
            "or https:// URL") in err
    assert "not reachable" not in err


# -- allocation ratios -------------------------------------------------------

@pytest.mark.parametrize("option", ["cpu_allocation_ratio",
                                    "ram_allocation_ratio"])
def test_a_ratio_above_placements_maximum_is_refused(tmp_path, capsys,
                                                     option):
    path = conf_file(tmp_path, f"[compute]\n{option} = 1e39\n")
    line = refused(capsys, "sync", *FAKE, "--config-file", path)
    assert f"[compute] {option} = 1e+39" in line
    assert "3.40282e+38" in line and "Placement answered" not in line


def test_a_provider_config_ratio_above_placements_maximum_is_refused(
        tmp_path, capsys):
    location = tmp_path / "provider_config"
    location.mkdir()
    (location / "big.yaml").write_text(
        "meta:\n  schema_version: '1.0'\nproviders:\n"
        "  - identification:\n      name: fake-small\n    inventories:\n"
        "      additional:\n        - CUSTOM_X:\n            total: 4\n"
        "            allocation_ratio: 1.0e+39\n")
    path = conf_file(tmp_path, "[compute]\nprovider_config_location = "
                     f"{location}\n")
    status, err = run(capsys, "report", *FAKE, "--config-file", path)
    assert "big.yaml:10" in err and "allocation_ratio: 1e+39" in err
    assert "3.40282e+38" in err


# -- files that are not regular files ----------------------------------------

class Fifo:
    """A FIFO nobody writes to: opening it to read blocks.  A watchdog
    thread unblocks such a reader after :data:`RELEASE_AFTER` seconds and
    notes it in :attr:`released`, so a missing check fails the test rather
    than hanging it."""

    RELEASE_AFTER = 20.0

    def __init__(self, path: pathlib.Path) -> None:
        os.mkfifo(path)
        self.path = str(path)
        self.released = 0
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)
        self._thread.start()

    def _watch(self) -> None:
        if self._done.wait(self.RELEASE_AFTER):
            return
        while not self._done.wait(0.01):
            try:  # succeeds only while a reader waits in open()
                os.close(os.open(self.path, os.O_WRONLY | os.O_NONBLOCK))
            except OSError:
                continue
            self.released += 1

    def close(self) -> None:
        self._done.set()
        self._thread.join(timeout=10)


@pytest.fixture
def fifo(tmp_path):
    found = Fifo(tmp_path / "fifo")
    yield found
    found.close()


@pytest.mark.parametrize("option", ["--config-file", "--host-spec"])
@pytest.mark.parametrize("kind", ["device", "fifo"])
def test_a_device_or_fifo_is_refused_before_it_is_read(
        capsys, fifo, option, kind):
    path = os.devnull if kind == "device" else fifo.path
    argv = (["report", "--driver", "fake", option, path]
            if option == "--host-spec" else ["report", *FAKE, option, path])
    line = refused(capsys, *argv)
    assert path in line and "not a regular file" in line
    assert not fifo.released, "a reader opened the FIFO and blocked"


def test_an_inventory_that_is_a_fifo_is_refused(capsys, fifo):
    line = refused(capsys, "report", "--driver", "ironic", "--inventory",
                   fifo.path)
    assert fifo.path in line and "not a regular file" in line
    assert not fifo.released, "a reader opened the FIFO and blocked"


# -- state and snapshot files ------------------------------------------------

def test_a_deeply_nested_snapshot_manifest_is_refused(tmp_path, capsys):
    snapshot = tmp_path / "snap"
    snapshot.mkdir()
    (snapshot / "manifest.json").write_text("[" * 100_000 + "]" * 100_000)
    line = refused(capsys, "report", "--snapshot", str(snapshot))
    assert "manifest.json: nested too deeply" in line


def test_a_damaged_provider_config_record_is_the_same_line_from_sync_and_agent(
        capsys, state):
    state.mkdir()
    record = state / "provider-config-fake.json"
    record.write_text("garbage{")
    line = refused(capsys, "sync", *FAKE)
    assert str(record) in line and "not valid JSON" in line
    status = cli.main(["agent", "--once", *FAKE])
    [logged] = [x for x in capsys.readouterr().err.splitlines() if x]
    assert status == 2
    assert line.removeprefix("virtdriver: ") in logged


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="no /dev/full")
def test_config_sample_on_a_full_disk_is_refused(capsys):
    line = refused(capsys, "config", "sample", "-o", "/dev/full")
    assert "--output /dev/full" in line and "No space left" in line


# -- flavors, instances, claims ----------------------------------------------

def instance(tmp_path, specs=None, allocations=None, text=None) -> str:
    path = tmp_path / "instance.json"
    path.write_text(text if text is not None else json.dumps({
        "uuid": UUID, "flavor": {"vcpus": 1, "memory_mb": 512,
                                 "extra_specs": specs or {}},
        "allocations": allocations or {}}))
    return str(path)


@pytest.mark.parametrize("specs, said", [
    ({"resources:MEMORY_MB": "0"}, "resources:MEMORY_MB='0' is not a "
     "positive integer"),
    ({"resources:MEMORY_MB": str(2**40)}, "at most 2147483647"),
    ({"resources:VCPU": str(10**14)}, "resources:VCPU='100000000000000' is "
     "not a non-negative integer (at most 2147483647)"),
    ({"resources\u00ff:VCPU": "1"}, "'\u00ff' is not a request group suffix"),
    ({"resources:vcpu lower": "1"}, "'vcpu lower' is neither"),
    ({"hw:cpu_po\u200blicy": "dedicated"}, "invisible character U+200B"),
    ({"hw:numa_nodes": "9" * 5000}, "(5000 characters)"),
])
def test_flavor_values_that_passed_are_refused(tmp_path, capsys, specs,
                                               said):
    line = refused(capsys, "claim", "--instance",
                   instance(tmp_path, specs), *FAKE)
    assert said in line


def test_a_request_group_suffix_placement_allows_is_read(tmp_path, capsys):
    assert cli.main(["claim", "--instance", instance(
        tmp_path, {"resources_ACCEL:VCPU": "1"}), *FAKE]) == 0


@pytest.mark.parametrize("resources, said", [
    ({"VCPU": 10**14}, "resources.VCPU: 100000000000000 is not a whole "
     "number from 0 to 2147483647"),
    ({"vcpu lower": 1}, "'vcpu lower' is neither"),
])
def test_allocations_that_passed_are_refused(tmp_path, capsys, resources,
                                             said):
    allocations = {UUID: {"resources": resources}}
    line = refused(capsys, "claim", "--instance",
                   instance(tmp_path, allocations=allocations), *FAKE)
    assert said in line


def test_a_5000_digit_number_is_not_advice_to_call_python(tmp_path, capsys):
    vcpus = "9" * 5000
    text = f'{{"uuid": "{UUID}", "flavor": {{"vcpus": {vcpus}, ' \
        '"memory_mb": 512}}'
    assert json.loads(text.replace(vcpus, "1"))  # JSON but for the number
    line = refused(capsys, "claim", "--instance",
                   instance(tmp_path, text=text), *FAKE)
    assert "a number of 5000 digits" in line
    assert "sys." not in line


def test_a_5000_digit_config_value_is_not_advice_to_call_python(
        tmp_path, capsys):
    path = conf_file(tmp_path, "[compute]\nreserved_host_memory_mb = "
                     + "9" * 5000 + "\n")
    line = refused(capsys, "report", *FAKE, "--config-file", path)
    assert "reserved_host_memory_mb: a number of 5000 digits" in line
    assert "set_int_max_str_digits" not in line


def test_a_5000_digit_number_in_a_state_file_is_not_advice_to_call_python(
        tmp_path, capsys, state):
    assert cli.main(["claim", "--instance", instance(tmp_path), *FAKE]) == 0
    claims = state / "claims-fake.json"
    claims.write_text(claims.read_text().replace(
        '"memory_mb": 512', '"memory_mb": ' + "9" * 5000, 1))
    capsys.readouterr()
    line = refused(capsys, "claims", *FAKE)
    assert f"{claims}: not valid JSON (a number of 5000 digits)" in line
