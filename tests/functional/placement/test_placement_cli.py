"""``virtdriver sync`` through ``cli.main``: the fake and ironic drivers,
a real Placement on loopback (``--placement-url``, ``[placement]`` with
keystone auth) or embedded in the process (the default, run in a child
process: one process serves one embedded database)."""

from __future__ import annotations

import json
import os
import pathlib
import socket
import sqlite3
import stat
import subprocess
import sys
import textwrap
import threading
import time
import uuid as uuidlib
from wsgiref import simple_server

import os_traits
import pytest
from placement_helpers import (
    Api, Host, assert_placement_equals, expected_writes)

from virtdriver import cli
from virtdriver.drivers.fake import FakeDriver
from virtdriver.filelock import exclusive_lock
from virtdriver.placement.ownership import TrackerOwnership
from virtdriver.placement.sync import Syncer
from virtdriver.resource_tracker.tracker import LOCK_FILE, ResourceTracker

FAKE = ["--driver", "fake", "--host-spec", "numa2-ht"]


@pytest.fixture
def state_dir(tmp_path, monkeypatch):
    path = tmp_path / "state"
    monkeypatch.setenv("VIRTDRIVER_STATE_DIR", str(path))
    return path


def run_sync(capsys, *args: str) -> tuple[int, dict | None, str]:
    """``virtdriver sync --format json ARGS``: status, document, stderr."""
    status = cli.main(["sync", "--format", "json", *args])
    captured = capsys.readouterr()
    return (status, json.loads(captured.out) if captured.out else None,
            captured.err)


def expected_tree(tmp_path):
    """The tree the fake numa2-ht host gives (same uuids as the CLI's)."""
    return Host(tmp_path / "expected").tree


# -- --placement-url: a real Placement on loopback -----------------------------


def test_first_sync_creates_the_second_makes_no_writes(
        tmp_path, state_dir, placement, api, capsys):
    url = ["--placement-url", placement.url]
    tree = expected_tree(tmp_path)

    status, first, err = run_sync(capsys, *url, *FAKE)

    assert (status, err) == (0, "")
    assert first["sync"]["ok"] and first["sync"]["changed"]
    assert {p["uuid"] for p in first["tree"]["providers"]} == {
        p.uuid for p in tree.providers()}
    assert {o["uuid"] for o in first["sync"]["providers"]
            if o["created"]} == {p.uuid for p in tree.providers()}
    assert first["sync"]["requests"]["writes"] == expected_writes(tree)
    # GET / (the microversion), our marked providers (none yet) and the
    # new root's tree.
    assert first["sync"]["requests"]["reads"] == 3
    assert_placement_equals(api, tree)

    status, second, _ = run_sync(capsys, *url, *FAKE)

    assert status == 0
    assert second["sync"]["requests"] == {
        "total": 1, "reads": 1, "writes": 0, "by_method": {"GET": 1}}
    assert second["sync"]["providers"] == []
    assert second["sync"]["summary"].startswith("no changes, 0 writes; ")
    assert second["tree"] == first["tree"]

    assert cli.main(["sync", *url, *FAKE]) == 0
    out = capsys.readouterr().out
    assert "fake-numa2-ht_NUMA1 (" in out            # the tree, as report
    assert out.splitlines()[-1].startswith(
        "sync: no changes, 0 writes; 1 request (1 read), ")


def write_nodes(path, count: int) -> list[str]:
    uuids = [str(uuidlib.uuid5(uuidlib.NAMESPACE_URL, f"cli-node-{i}"))
             for i in range(count)]
    path.write_text(json.dumps({"nodes": [
        {"uuid": uuid, "name": f"node-{i}", "resource_class":
         "baremetal.gold", "traits": ["CUSTOM_RAID5"]}
        for i, uuid in enumerate(uuids)]}))
    return uuids


def test_a_steady_sync_reads_once_whatever_the_roots(
        tmp_path, state_dir, placement, api, capsys):
    inventory = tmp_path / "nodes.json"
    uuids = write_nodes(inventory, 3)
    args = ["--placement-url", placement.url, "--driver", "ironic",
            "--inventory", str(inventory)]

    status, first, _ = run_sync(capsys, *args)
    assert status == 0
    assert set(api.providers()) == set(uuids)
    assert "CUSTOM_RAID5" in api.traits(uuids[0])

    status, second, _ = run_sync(capsys, *args)
    assert status == 0
    roots = [p for p in second["tree"]["providers"]
             if p["parent_provider_uuid"] is None]
    assert len(roots) == 3
    # One listing of this state directory's marked providers.
    assert second["sync"]["requests"]["by_method"] == {"GET": 1}


def test_a_foreign_trait_survives_and_an_owned_one_comes_back(
        tmp_path, state_dir, placement, api, capsys):
    url = ["--placement-url", placement.url]
    assert run_sync(capsys, *url, *FAKE)[0] == 0
    root = expected_tree(tmp_path).roots[0].uuid
    api.add_traits(root, "CUSTOM_RACK_7")
    api.remove_traits(root, os_traits.COMPUTE_NODE)

    status, doc, _ = run_sync(capsys, *url, *FAKE)

    assert status == 0
    assert {"CUSTOM_RACK_7", os_traits.COMPUTE_NODE} <= api.traits(root)
    outcome, = doc["sync"]["providers"]
    assert outcome["uuid"] == root
    assert outcome["traits_added"] == [os_traits.COMPUTE_NODE]
    assert outcome["traits_removed"] == []
    assert outcome["removed_by_others"] == [os_traits.COMPUTE_NODE]
    # The moved root is re-read (3 parts); its traits are the one write.
    assert doc["sync"]["requests"]["by_method"] == {"GET": 4, "PUT": 1}

    status, doc, _ = run_sync(capsys, *url, *FAKE)
    assert doc["sync"]["requests"]["writes"] == 0
    assert "CUSTOM_RACK_7" in api.traits(root)


def test_dry_run_writes_nothing(tmp_path, state_dir, placement, api,
                                capsys):
    url = ["--placement-url", placement.url]

    status, doc, _ = run_sync(capsys, *url, *FAKE, "--dry-run")

    assert status == 0
    assert doc["sync"]["dry_run"] and doc["sync"]["changed"]
    assert doc["sync"]["requests"]["writes"] == 0
    assert all(o["created"] for o in doc["sync"]["providers"])
    assert api.providers() == {}

    assert run_sync(capsys, *url, *FAKE)[0] == 0
    root = expected_tree(tmp_path).roots[0].uuid
    api.remove_traits(root, os_traits.COMPUTE_NODE)
    cli.main(["sync", *url, *FAKE, "--dry-run"])
    out = capsys.readouterr().out
    assert f"+{os_traits.COMPUTE_NODE}" in out
    assert out.splitlines()[-1].startswith(
        "sync: dry run, nothing written: 1 provider would change, 0 writes")
    assert os_traits.COMPUTE_NODE not in api.traits(root)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_an_unreachable_placement_exits_3_and_the_next_run_catches_up(
        tmp_path, state_dir, own_placement, capsys):
    url = ["--placement-url", f"http://127.0.0.1:{free_port()}"]

    status, doc, err = run_sync(capsys, *url, *FAKE)

    assert status == 3
    assert doc["sync"]["pending"] and not doc["sync"]["ok"]
    assert err.count("\n") == 1 and "Traceback" not in err
    assert err.startswith("virtdriver: sync pending (the next `virtdriver "
                          "sync` catches up): GET /: Placement at "
                          "http://127.0.0.1:")
    assert "not reachable (Connection refused)" in err

    own_placement.stop()
    url = ["--placement-url", own_placement.url]
    status, _, err = run_sync(capsys, *url, *FAKE)
    assert status == 3 and "Traceback" not in err
    own_placement.start().wait_ready()
    status, doc, _ = run_sync(capsys, *url, *FAKE)
    assert status == 0 and doc["sync"]["ok"]
    assert_placement_equals(Api(own_placement), expected_tree(tmp_path))


@pytest.mark.parametrize("url", ["ftp://placement:8778", "http://",
                                 "placement:8778", "http://h:port/",
                                 "http://h/?x=1"])
def test_a_bad_placement_url_exits_2(state_dir, url, capsys):
    assert cli.main(["sync", "--placement-url", url, *FAKE]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"virtdriver: --placement-url {url!r} ")
    assert "e.g. http://placement.example:8778" in err
    assert not state_dir.exists()          # refused before anything ran


def test_a_url_that_is_not_placements_exits_2(state_dir, placement,
                                              capsys):
    status, doc, err = run_sync(
        capsys, "--placement-url", placement.url + "/not-placement", *FAKE)
    assert status == 2
    assert not doc["sync"]["pending"]
    assert err.startswith("virtdriver: sync failed: GET /: Placement "
                          "answered 404")


# -- [placement]: the keystone options ----------------------------------------


class FakeKeystone:
    """Keystone v3's token API on loopback: a token Placement's noauth2
    takes (``admin``), and a catalog naming ``placement_url``."""

    def __init__(self, placement_url: str) -> None:
        self.placement_url = placement_url
        self.calls: list[str] = []
        self.server = simple_server.make_server(
            "127.0.0.1", 0, self.app,
            handler_class=type("Quiet", (simple_server.WSGIRequestHandler,),
                               {"log_message": lambda *a: None}))
        self.url = f"http://127.0.0.1:{self.server.server_port}"
        threading.Thread(target=self.server.serve_forever,
                         daemon=True).start()

    def app(self, environ, start_response):
        self.calls.append(f"{environ['REQUEST_METHOD']} "
                          f"{environ['PATH_INFO']}")
        if environ["REQUEST_METHOD"] == "GET":       # version discovery
            start_response("200 OK", [("Content-Type", "application/json")])
            return [json.dumps({"version": {
                "id": "v3.14", "status": "stable",
                "updated": "2020-04-07T00:00:00Z",
                "links": [{"rel": "self", "href": f"{self.url}/v3/"}]}
            }).encode()]
        body = json.loads(environ["wsgi.input"].read(
            int(environ.get("CONTENT_LENGTH") or 0)) or b"{}")
        user = body.get("auth", {}).get("identity", {}).get(
            "password", {}).get("user", {})
        if user.get("password") != "secret":
            start_response("401 Unauthorized",
                           [("Content-Type", "application/json")])
            return [b'{"error": {"code": 401, "message": "no"}}']
        token = {"token": {
            "methods": ["password"], "expires_at": "2099-01-01T00:00:00Z",
            "issued_at": "2024-01-01T00:00:00Z",
            "user": {"id": "u", "name": "nova", "domain": {"id": "default"}},
            "project": {"id": "p", "name": "service",
                        "domain": {"id": "default"}},
            "catalog": [{"type": "placement", "name": "placement", "id": "s",
                         "endpoints": [
                             {"id": "i", "interface": "internal",
                              "region": "RegionTwo", "region_id": "RegionTwo",
                              "url": "http://127.0.0.1:1"},
                             {"id": "e", "interface": "internal",
                              "region": "RegionOne", "region_id": "RegionOne",
                              "url": self.placement_url}]}]}}
        start_response("201 Created", [("Content-Type", "application/json"),
                                       ("X-Subject-Token", "admin")])
        return [json.dumps(token).encode()]

    def close(self) -> None:
        if self.server.socket.fileno() != -1:
            self.server.shutdown()
            self.server.server_close()


@pytest.fixture
def keystone(placement):
    server = FakeKeystone(placement.url)
    yield server
    server.close()


def config(tmp_path, text: str) -> list[str]:
    path = tmp_path / "virtdriver.conf"
    path.write_text(textwrap.dedent(text))
    return ["--config-file", str(path)]


def keystone_config(tmp_path, auth_url: str, *, password: str = "secret",
                    extra: str = "") -> list[str]:
    """``--config-file`` with a ``[placement]`` section that logs in to
    keystone at ``auth_url`` as nova (``extra``: more of its lines)."""
    lines = ["[placement]", "auth_type = password", f"auth_url = {auth_url}",
             "username = nova", f"password = {password}",
             "project_name = service", "user_domain_id = default",
             "project_domain_id = default",
             *textwrap.dedent(extra).splitlines()]
    return config(tmp_path, "\n".join(lines) + "\n")


def test_the_placement_section_logs_in_with_keystone(
        tmp_path, state_dir, keystone, placement, api, capsys):
    conf = keystone_config(tmp_path, f"{keystone.url}/v3", extra="""\
        region_name = RegionOne
        valid_interfaces = internal
        """)

    status, doc, err = run_sync(capsys, *conf, *FAKE)

    assert (status, err) == (0, "")
    assert keystone.calls == ["GET /v3", "POST /v3/auth/tokens"]
    assert "the service catalog, interface internal, region RegionOne" in \
        doc["sync"]["placement"]
    assert_placement_equals(api, expected_tree(tmp_path))
    status, doc, _ = run_sync(capsys, *conf, *FAKE)
    assert doc["sync"]["requests"]["writes"] == 0


def test_the_placement_section_refuses_what_keystone_would_not_take(
        tmp_path, state_dir, keystone, capsys):
    missing = config(tmp_path, "[placement]\nauth_type = password\n")
    assert cli.main(["sync", *missing, *FAKE]) == 2
    assert capsys.readouterr().err == (
        "virtdriver: bad configuration: [placement] auth_type = password "
        "needs [placement] auth_url; set it (see `virtdriver help configuration`)\n")

    typo = config(tmp_path, "[placement]\nauth_type = password\n"
                  "usrname = nova\n")
    assert cli.main(["sync", *typo, *FAKE]) == 2
    assert "[placement] usrname in " in capsys.readouterr().err

    refused = keystone_config(tmp_path, f"{keystone.url}/v3",
                              password="wrong")
    assert cli.main(["sync", *refused, *FAKE]) == 2
    err = capsys.readouterr().err
    assert err.startswith("virtdriver: keystone refused the [placement] "
                          "credentials or could not find Placement (")
    assert err.endswith("; check the [placement] auth options\n")

    keystone.close()
    assert cli.main(["sync", *refused, *FAKE]) == 3
    assert capsys.readouterr().err == (
        "virtdriver: sync pending (the next `virtdriver sync` catches up): "
        "keystone at the [placement] auth_url is not reachable (Connection "
        "refused); start it or fix auth_url\n")


def test_an_endpoint_override_alone_is_noauth2(tmp_path, state_dir,
                                               placement, api, capsys):
    conf = config(tmp_path, f"[placement]\nendpoint_override = "
                  f"{placement.url}\n")
    status, doc, _ = run_sync(capsys, *conf, *FAKE)
    assert status == 0
    assert doc["sync"]["placement"].startswith(
        f"Placement at {placement.url} ([placement] endpoint_override")
    assert_placement_equals(api, expected_tree(tmp_path))


def test_the_sample_config_has_the_keystone_options():
    found = subprocess.run(
        [os.path.join(os.path.dirname(sys.executable),
                      "oslo-config-generator"), "--namespace", "virtdriver"],
        capture_output=True, text=True, check=True).stdout
    section = found.split("\n[placement]\n")[1].split("\n[")[0]
    for name in ("auth_type", "auth_url", "username", "password",
                 "project_name", "valid_interfaces", "region_name",
                 "endpoint_override", "cafile", "timeout"):
        assert f"\n#{name} = " in section, name
    assert "\n#valid_interfaces = internal,public\n" in section


# -- the embedded default, in child processes ---------------------------------


def cli_process(state: os.PathLike, *args: str) -> subprocess.Popen:
    """``cli.main(["sync", "--format", "json", *args])`` in a new process
    (the embedded Placement: one database per process)."""
    env = {**os.environ, "VIRTDRIVER_STATE_DIR": str(state)}
    code = ("import sys\nfrom virtdriver import cli\n"
            f"sys.exit(cli.main(['sync', '--format', 'json', "
            f"*{list(args)!r}]))")
    return subprocess.Popen([sys.executable, "-c", code], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)


def finish(process: subprocess.Popen) -> tuple[int, dict, str]:
    out, err = process.communicate(timeout=120)
    return process.returncode, json.loads(out) if out else None, err


def test_the_embedded_default_needs_nothing_running(tmp_path,
                                                    placement_pool):
    state = tmp_path / "state"

    status, first, err = finish(cli_process(state, *FAKE))

    assert (status, err) == (0, "")
    assert first["sync"]["placement"] == (
        "embedded Placement (in this process) on SQLite "
        f"{state / 'placement.sqlite'}")
    assert first["sync"]["requests"]["writes"] == expected_writes(
        expected_tree(tmp_path))
    assert (state / "placement.sqlite").stat().st_size > 0
    # Private like every state file (the machine may be shared).
    assert {p.name: stat.S_IMODE(p.stat().st_mode) for p in state.iterdir()
            if p.name.startswith("placement")} == {
        "placement.sqlite": 0o600, "placement-sync.json": 0o600,
        "placement.sqlite.stamp": 0o600, "placement-aggregate": 0o600}
    assert (state / "placement-sync.json").exists()
    assert (state / "ledger-fake.json").exists()

    # Nothing changed, the database is as the first run left it: the
    # embedded Placement is not even started.
    status, second, _ = finish(cli_process(state, *FAKE))
    assert status == 0
    assert second["sync"]["requests"]["total"] == 0
    assert second["sync"]["summary"].startswith(
        "no changes, 0 writes; 0 requests (0 reads)")
    assert any(note.startswith("embedded Placement not started")
               for note in second["sync"]["notes"])

    # Someone else writes the database (as Placement would: the trait row
    # and the generation), then puts its mtime back: the next sync starts
    # Placement, notices and repairs.
    root = next(p for p in first["tree"]["providers"]
                if p["parent_provider_uuid"] is None and p["traits"])
    trait = sorted(root["traits"])[0]
    db = state / "placement.sqlite"
    before = db.stat()
    remove_trait_behind_placements_back(db, root["uuid"], trait)
    os.utime(db, ns=(before.st_atime_ns, before.st_mtime_ns))

    status, third, _ = finish(cli_process(state, *FAKE))
    assert status == 0
    assert third["sync"]["requests"]["total"] > 0
    assert third["sync"]["requests"]["writes"] >= 1
    assert trait in trait_rows(db, root["uuid"])

    status, dry, _ = finish(cli_process(state, *FAKE, "--flat",
                                        "--dry-run"))
    assert status == 0 and dry["sync"]["dry_run"]
    assert dry["sync"]["requests"]["writes"] == 0


def remove_trait_behind_placements_back(db, uuid: str, trait: str) -> None:
    """Delete ``trait`` from provider ``uuid`` with sqlite3 and bump its
    generation, as Placement's own write would."""
    with sqlite3.connect(db) as connection:
        (provider,) = connection.execute(
            "SELECT id FROM resource_providers WHERE uuid = ?",
            (uuid,)).fetchone()
        deleted = connection.execute(
            "DELETE FROM resource_provider_traits WHERE resource_provider_id"
            " = ? AND trait_id = (SELECT id FROM traits WHERE name = ?)",
            (provider, trait)).rowcount
        connection.execute("UPDATE resource_providers SET generation = "
                           "generation + 1 WHERE id = ?", (provider,))
    connection.close()
    assert deleted == 1 and trait not in trait_rows(db, uuid)


def trait_rows(db, uuid: str) -> set[str]:
    """Provider ``uuid``'s traits as the database has them."""
    with sqlite3.connect(db) as connection:
        rows = connection.execute(
            "SELECT t.name FROM traits t JOIN resource_provider_traits rt "
            "ON rt.trait_id = t.id JOIN resource_providers rp ON rp.id = "
            "rt.resource_provider_id WHERE rp.uuid = ?", (uuid,)).fetchall()
    connection.close()
    return {name for (name,) in rows}


def wait_until_open(processes, path, timeout: float = 120.0) -> None:
    """Wait until every process has ``path`` open (it is then waiting for
    the lock on it); fail naming those that did not within ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        waiting = [p.pid for p in processes if not has_open(p.pid, path)]
        if not waiting:
            return
        ended = [p.pid for p in processes if p.poll() is not None]
        if ended or time.monotonic() > deadline:
            raise AssertionError(
                f"waiting for {waiting} to open {path}; ended: {ended}")
        time.sleep(0.02)


def has_open(pid: int, path) -> bool:
    """Whether process ``pid`` holds ``path`` open."""
    fds = pathlib.Path(f"/proc/{pid}/fd")
    try:
        entries = list(fds.iterdir())
    except OSError:
        return False
    for fd in entries:
        try:
            if os.readlink(fd) == str(path):
                return True
        except OSError:
            continue
    return False


def test_two_syncs_at_once_take_turns_on_the_state_dir(tmp_path,
                                                       placement_pool):
    state = tmp_path / "state"
    state.mkdir()
    # Hold the directory's lock while both start, so they contend for it.
    with exclusive_lock(state / LOCK_FILE, purpose="the test"):
        processes = [cli_process(state, *FAKE) for _ in range(2)]
        wait_until_open(processes, state / LOCK_FILE)  # both reach the lock
        assert all(p.poll() is None for p in processes)   # and wait
    runs = [finish(p) for p in processes]

    assert [status for status, _, _ in runs] == [0, 0], runs
    writes = sorted(doc["sync"]["requests"]["writes"] for _, doc, _ in runs)
    tree = expected_tree(tmp_path)
    # One created everything; the other found it done, from the state
    # and the database stamp the first saved: not a request.
    assert writes == [0, expected_writes(tree)]
    second = next(doc for _, doc, _ in runs
                  if doc["sync"]["requests"]["writes"] == 0)
    assert second["sync"]["requests"]["by_method"] == {}
    assert second["sync"]["notes"][0].startswith(
        "embedded Placement not started")


# -- TrackerOwnership: the tracker's in-process proof --------------------------


class DeviceDriver(FakeDriver):
    """The fake host plus a device child with a uuid of its own (not
    derived from its parent and name), as a driver may publish one."""

    DEVICE = str(uuidlib.uuid4())

    def update_provider_tree(self, tree, nodename, allocations=None):
        super().update_provider_tree(tree, nodename, allocations)
        if not tree.exists(self.DEVICE):
            tree.new_child(f"{nodename}_gpu0", nodename, uuid=self.DEVICE)
        tree.update_inventory(self.DEVICE, {"VGPU": {"total": 4}})


def test_a_child_the_driver_made_with_its_own_uuid_is_synced(
        tmp_path, client, api):
    driver = DeviceDriver("numa2-ht")
    driver.init_host("host")
    tracker = ResourceTracker(driver, state_dir=tmp_path)
    owned = TrackerOwnership(tracker)
    owned.note(tracker.update_all())
    root = tracker.tree.roots[0]
    foreign = tracker.tree.new_child("cyborg-fpga", root.uuid,
                                     uuid=str(uuidlib.uuid4()))

    assert tracker.manages(DeviceDriver.DEVICE)
    assert owned(DeviceDriver.DEVICE) == owned(root.uuid)
    assert owned(foreign) is None
    result = Syncer(client, tmp_path).sync(tracker.tree, owned_for=owned)

    assert result.ok, result.describe()
    assert set(api.inventories(DeviceDriver.DEVICE)) == {"VGPU"}
    assert foreign in result.foreign
    assert foreign not in api.providers()
