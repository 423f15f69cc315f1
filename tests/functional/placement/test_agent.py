"""``virtdriver agent`` against a real Placement on loopback: cycles in a
child process (one log line each, SIGTERM mid-cycle, ``--once``), and the
real libvirt driver on a fakelibvirt host losing its connection
(in-process: a child cannot be told to drop it)."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time

import pytest
from placement_helpers import Api

from virtdriver import agent as agent_lib
from virtdriver import fakelibvirt as fake_module
from virtdriver.cli.errors import exit_status
from virtdriver.conf import make_conf
from virtdriver.drivers.loader import load_driver
from virtdriver.drivers.libvirt.driver import LibvirtDriver
from virtdriver.drivers.libvirt.session import LibvirtSession
from virtdriver.fakelibvirt.presets import preset_documents

FAKE = ["--driver", "fake", "--host-spec", "numa2-ht"]


def start_agent(state, *args: str) -> subprocess.Popen:
    env = dict(os.environ, VIRTDRIVER_STATE_DIR=str(state))
    return subprocess.Popen(
        [sys.executable, "-m", "virtdriver.cli", "agent", *args],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def wait_for(predicate, what: str, log=None, timeout: float = 60.0) -> None:
    """Wait for ``predicate`` (``what`` it means) with a generous deadline;
    the failure names it and ends with the agent's log."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            seen = log.read_text()[-1500:] if log and log.exists() else ""
            raise AssertionError(f"{timeout:.0f} s without {what}; the "
                                 f"agent's log ends: {seen!r}")
        time.sleep(0.002)


def cycle_lines(log) -> list[str]:
    if not log.exists():
        return []
    return [line for line in log.read_text().splitlines()
            if " virtdriver.agent [-] cycle " in line]


def test_three_cycles_then_sigterm(tmp_path, placement):
    log = tmp_path / "agent.log"
    proc = start_agent(tmp_path / "state", "--placement-url", placement.url,
                       "--interval", "0.2", "--log-file", str(log), *FAKE)
    try:
        wait_for(lambda: len(cycle_lines(log)) >= 3, "3 cycle lines", log)
    finally:
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=60)
    assert (proc.returncode, out, err) == (0, "", "")
    lines = cycle_lines(log)
    assert "cycle 1: synced, 3 providers changed" in lines[0]
    for number, line in enumerate(lines[1:3], start=2):
        said = line.split(" virtdriver.agent [-] ", 1)[1]
        assert said.startswith(f"cycle {number}: no changes, 0 writes; "
                               "1 request (1 read), ")
    # One cycle start per 0.2 s, not back to back.
    assert len(lines) <= 3 + 2
    names = {p["name"] for p in Api(placement).providers().values()}
    assert names == {"fake-numa2-ht", "fake-numa2-ht_NUMA0",
                     "fake-numa2-ht_NUMA1"}


def test_sigterm_mid_cycle_leaves_whole_state_files(tmp_path, placement):
    state = tmp_path / "state"
    log = tmp_path / "agent.log"
    proc = start_agent(state, "--placement-url", placement.url,
                       "--interval", "0.01", "--log-file", str(log),
                       "--driver", "fake", "--host-spec", "numa4-large")
    # The ledger is saved by the update, before the sync: signal then.
    try:
        wait_for(lambda: (state / "ledger-fake.json").exists(),
                 "the agent's ledger")
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
    assert (proc.returncode, err) == (0, "")
    # Signalled in cycle 1 (after its update, during its sync): that
    # cycle was finished and logged, and no other started.
    [line] = cycle_lines(log)
    assert "cycle 1: synced, 5 providers changed" in line
    for name in ("ledger-fake.json", "placement-sync.json"):
        assert json.loads((state / name).read_text())
    assert not [p.name for p in state.iterdir() if p.name.startswith(".")
                or p.suffix == ".tmp"]
    # The lock was released: a one-shot sync gets it and has nothing to do.
    env = dict(os.environ, VIRTDRIVER_STATE_DIR=str(state))
    done = subprocess.run(
        [sys.executable, "-m", "virtdriver.cli", "sync", "--format", "json",
         "--placement-url", placement.url, "--driver", "fake",
         "--host-spec", "numa4-large"],
        env=env, capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["sync"]["requests"]["writes"] == 0


@pytest.mark.parametrize(("extra", "status", "said"), [
    ([], 0, "cycle 1: synced, 3 providers changed"),
    (["--host-spec", "no-such-preset.yaml"], 2, "cycle 1: failed: "),
])
def test_once_exits_with_the_cycle_status(tmp_path, placement, extra,
                                          status, said):
    args = ["--placement-url", placement.url, "--once", *FAKE, *extra]
    proc = start_agent(tmp_path / "state", *args)
    out, err = proc.communicate(timeout=60)
    assert (proc.returncode, out) == (status, "")
    assert said in err and len(err.splitlines()) == 1


def test_once_with_placement_unreachable_is_pending(tmp_path):
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    proc = start_agent(tmp_path / "state", "--once", "--placement-url",
                       f"http://127.0.0.1:{port}", *FAKE)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 3
    assert "cycle 1: pending, Placement unavailable" in err


def test_libvirt_drop_leaves_the_node_and_recovers(
        tmp_path, placement, fakelibvirt, fake_libvirt_host):
    documents = preset_documents("numa2-ht")
    uri = fake_libvirt_host(documents, name="agenthost")
    lines: list[str] = []

    def load() -> agent_lib.Setup:
        return agent_lib.Setup(
            key=None, directory=tmp_path, driver_name="libvirt",
            make_driver=lambda: LibvirtDriver(
                uri=uri, session=LibvirtSession(uri, backoff=(0.01, 0.01))),
            hostname="cmp1", provider_config=None, target="test",
            connect=placement.client)

    agent = agent_lib.Agent(load, interval=0, log=lines.append,
                            classify=lambda e: exit_status(e) or 2)
    api = Api(placement)
    try:
        assert agent.cycle().status == agent_lib.OK
        before = api.providers()
        uuids = set(before)
        traits = {u: api.traits(u) for u in uuids}
        assert len(uuids) == 3

        fakelibvirt.get_host("agenthost").drop()
        fakelibvirt.unregister_host("agenthost")  # and it stays away
        lost = agent.cycle()

        assert lost.status == agent_lib.PENDING
        assert set(lost.failed) == {"cmp1"}
        assert "node cmp1 unknown (not updated, nothing removed)" in lines[-1]
        assert set(api.providers()) == uuids
        assert {u: api.traits(u) for u in uuids} == traits

        fake_module.register_host("agenthost", documents)  # libvirt is back
        back = agent.cycle()
        assert back.status == agent_lib.OK, lines[-1]
        assert "cycle 3: no changes, 0 writes" in lines[-1]
        assert set(api.providers()) == uuids
    finally:
        agent.close()


def test_sighup_reloads_at_the_next_cycle(tmp_path, placement):
    config = tmp_path / "virtdriver.conf"
    config.write_text("[libvirt]\ncpu_mode = host-model\n")
    log = tmp_path / "agent.log"
    proc = start_agent(tmp_path / "state", "--placement-url", placement.url,
                       "--interval", "0.1", "--log-file", str(log),
                       "--config-file", str(config), *FAKE)
    said = lambda: log.read_text() if log.exists() else ""  # noqa: E731
    try:
        wait_for(lambda: len(cycle_lines(log)) >= 1, "a cycle line", log)
        proc.send_signal(signal.SIGHUP)
        wait_for(lambda: "reloaded: configuration unchanged" in said(),
                 "'reloaded: configuration unchanged'", log)
        config.write_text("[libvirt]\ncpu_mode = host-passthrough\n")
        proc.send_signal(signal.SIGHUP)
        wait_for(lambda: "reloaded: configuration changed" in said(),
                 "'reloaded: configuration changed'", log)
        count = len(cycle_lines(log))
        wait_for(lambda: len(cycle_lines(log)) > count,
                 "a cycle after the reload", log)
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
    assert (proc.returncode, err) == (0, "")
    assert "failed" not in said()


def in_process_agent(directory, placement, lines: list[str], driver_name: str,
                     driver, *, hostname: str = "cmp1") -> agent_lib.Agent:
    """An agent in this process syncing to ``placement``; ``driver()``
    gives each load's ``(key, make_driver)``; lines go to ``lines``."""
    def load() -> agent_lib.Setup:
        key, make_driver = driver()
        return agent_lib.Setup(
            key=key, directory=directory, driver_name=driver_name,
            make_driver=make_driver, hostname=hostname, provider_config=None,
            target="test", connect=placement.client)

    return agent_lib.Agent(load, interval=0, log=lines.append,
                           classify=lambda e: exit_status(e) or 2)


def test_a_reload_that_cannot_work_here_keeps_the_configuration(
        tmp_path, placement):
    config = tmp_path / "virtdriver.conf"
    config.write_text("[compute]\ncpu_allocation_ratio = 2.0\n")
    lines: list[str] = []

    def driver() -> tuple[str, object]:  # the file as it is at each load
        conf = make_conf(config_files=[config])
        return config.read_text(), lambda: load_driver(
            "fake", conf=conf, host="small", nested=True)

    agent = in_process_agent(tmp_path, placement, lines, "fake", driver)
    try:
        assert agent.cycle().status == agent_lib.OK
        kept = agent.setup
        # This host has CPUs 0-3: the new file cannot work here.
        config.write_text("[compute]\ncpu_dedicated_set = 0-99\n")
        agent.reload()
        report = agent.cycle()
        assert report.status == agent_lib.OK, lines
        assert lines[-2].startswith("reload refused, the configuration in "
                                    "use is kept: "), lines
        assert "cpu_dedicated_set names CPUs 4-99" in lines[-2]
        assert agent.setup is kept
        assert "cycle 2: no changes" in lines[-1]
    finally:
        agent.close()


def test_an_unreadable_ironic_inventory_is_not_called_this_host(
        tmp_path, placement):
    inventory = tmp_path / "nodes.json"
    node = {"uuid": "1be26c0b-03f2-4d2e-ae87-c02d7f33c123",
            "name": "rack1-u07", "resource_class": "baremetal.gold"}
    inventory.write_text(json.dumps({"nodes": [node]}))
    lines: list[str] = []
    ironic = lambda: load_driver("ironic", inventory_path=inventory)  # noqa: E731
    agent = in_process_agent(tmp_path, placement, lines, "ironic",
                             lambda: (None, ironic), hostname="this-host")
    try:
        assert agent.cycle().status == agent_lib.OK, lines
        inventory.write_text("{not json")
        os.utime(inventory, ns=(10**18, 10**18))  # surely a new signature
        broken = agent.cycle()
        assert broken.status == 2, lines
        assert set(broken.failed) == {agent_lib.NODE_LIST}
        assert ("the driver's node list could not be read (no node updated, "
                "nothing removed)") in lines[-1]
        assert "this-host" not in lines[-1]
    finally:
        agent.close()
