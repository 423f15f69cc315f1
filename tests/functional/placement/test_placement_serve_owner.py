"""``virtdriver placement serve`` answers the user who started it and no
one else, and does not stop that user's own commands (issue 26).

Another local user is played for real: a process running as ``nobody``
(uid 65534) sends requests to the service and tries to read its token.
The service runs as the real CLI in a subprocess; the owner's commands
run through ``main()`` beside it.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import urllib.error
import urllib.request
import uuid as uuidlib

import pytest

from virtdriver import cli

CLI = [sys.executable, "-m", "virtdriver.cli"]
FAKE = ["--driver", "fake", "--host-spec", "small"]
NOBODY = 65534
#: A Python every user may run (the suite's may live under /root).
OTHER_PYTHON = "/usr/bin/python3"
MICROVERSION = {"OpenStack-API-Version": "placement 1.39"}

needs_other_user = pytest.mark.skipif(
    os.geteuid() != 0 or not os.access(OTHER_PYTHON, os.X_OK),
    reason="playing another user needs root and a system python3")


class Served:
    """A running ``placement serve``: its process, URL and token file."""

    def __init__(self, env: dict[str, str]) -> None:
        self.proc = subprocess.Popen(
            [*CLI, "placement", "serve"], env=env, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True)
        self.banner = [self.proc.stdout.readline() for _ in range(5)]
        found = re.match(r"serving the embedded Placement of \S+ on "
                         r"(http://127\.0\.0\.1:\d+)$", self.banner[0].strip())
        assert found, "".join(self.banner) + self.proc.stderr.read()
        self.url = found[1]
        path = re.search(r"the token in (\S+);", self.banner[1])
        assert path, self.banner[1]
        self.token_file = path[1]

    def token(self) -> str:
        with open(self.token_file) as stream:
            return stream.read().strip()

    def stop(self) -> tuple[str, str]:
        self.proc.send_signal(signal.SIGTERM)
        out, err = self.proc.communicate(timeout=60)
        assert self.proc.returncode == 0, err
        return out, err


def call(url: str, method: str = "GET", token: str | None = None,
         body: dict | None = None) -> tuple[int, dict]:
    headers = dict(MICROVERSION)
    if token is not None:
        headers["X-Auth-Token"] = token
    data = None
    if body is not None:
        data = json.dumps(body).encode()
        headers["Content-Type"] = "application/json"
    request = urllib.request.Request(url, data=data, headers=headers,
                                     method=method)
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(request, timeout=60) as answer:
            text = answer.read()
            return answer.status, json.loads(text) if text else {}
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"{}")


@pytest.fixture(scope="module")
def served():
    """A synced state directory that other users may traverse (as root's
    ``/var/lib/virtdriver`` is, ``0755``) and its ``placement serve``."""
    top = tempfile.mkdtemp(prefix="virtdriver-serve-")
    os.chmod(top, 0o755)
    env = dict(os.environ, VIRTDRIVER_STATE_DIR=os.path.join(top, "state"))
    try:
        done = subprocess.run([*CLI, "sync", *FAKE], env=env,
                              capture_output=True, text=True, timeout=180)
        assert done.returncode == 0, done.stderr
        service = Served(env)
        try:
            yield service, env
        finally:
            if service.proc.poll() is None:
                service.stop()
    finally:
        shutil.rmtree(top, ignore_errors=True)


def providers(service: Served) -> dict[str, str]:
    status, body = call(service.url + "/resource_providers",
                        token=service.token())
    assert status == 200, body
    return {p["name"]: p["uuid"] for p in body["resource_providers"]}


def test_the_banner_names_the_token_file_not_the_token(served):
    service, env = served
    token = service.token()
    info = os.lstat(service.token_file)
    assert stat.S_ISREG(info.st_mode) and info.st_uid == os.geteuid()
    assert stat.S_IMODE(info.st_mode) == 0o600
    assert os.path.dirname(service.token_file) == \
        env["VIRTDRIVER_STATE_DIR"]
    assert len(token) >= 40 and token != "admin"
    assert token not in "".join(service.banner)
    assert "OS_TOKEN=admin" not in "".join(service.banner)
    assert (f'OS_TOKEN="$(cat {service.token_file})"'
            in service.banner[3]), service.banner


def test_requests_without_the_token_are_refused(served):
    service, _ = served
    for token in (None, "admin", "admin:admin", "x" * 43,
                  service.token()[:-1]):
        for path in ("/", "/resource_providers", "/traits"):
            status, body = call(service.url + path, token=token)
            assert status == 401, (token, path, body)
            assert service.token_file in body["errors"][0]["detail"]


OTHER_USER_SCRIPT = r"""
import json, sys, urllib.error, urllib.request
url, victim, token_file = sys.argv[1:4]
opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
def status(method, path, token, body=None):
    headers = {"OpenStack-API-Version": "placement 1.39"}
    if token is not None:
        headers["X-Auth-Token"] = token
    data = None
    if body is not None:
        data = json.dumps(body).encode()
        headers["Content-Type"] = "application/json"
    request = urllib.request.Request(url + path, data=data, headers=headers,
                                     method=method)
    try:
        with opener.open(request, timeout=60) as answer:
            return answer.status
    except urllib.error.HTTPError as exc:
        return exc.code
seen = {}
for token in (None, "admin"):
    seen[f"list {token}"] = status("GET", "/resource_providers", token)
    seen[f"delete {token}"] = status(
        "DELETE", "/resource_providers/" + victim, token)
    seen[f"create {token}"] = status(
        "POST", "/resource_providers", token,
        {"name": "planted-by-nobody"})
    seen[f"trait {token}"] = status("PUT", "/traits/CUSTOM_NOBODY", token)
try:
    open(token_file).read()
    seen["read token"] = "read"
except PermissionError:
    seen["read token"] = "refused"
print(json.dumps(seen))
"""


@needs_other_user
def test_another_user_can_neither_change_placement_nor_read_the_token(
        served):
    service, _ = served
    before = providers(service)
    victim = before["fake-small_NUMA0"]

    done = subprocess.run(
        [OTHER_PYTHON, "-I", "-c", OTHER_USER_SCRIPT, service.url, victim,
         service.token_file], user=NOBODY, group=NOBODY, extra_groups=[],
        capture_output=True, text=True, timeout=120, cwd="/")

    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout)
    assert seen.pop("read token") == "refused"
    assert set(seen.values()) == {401}, seen
    assert providers(service) == before
    status, _ = call(service.url + "/traits/CUSTOM_NOBODY",
                     token=service.token())
    assert status == 404


def test_the_owners_commands_run_beside_the_service(
        served, tmp_path, monkeypatch, capsys):
    """The documented loop: serve, placement-request, schedule, claim —
    and a sync to the served URL; the service holds no lock meanwhile and
    the owner's commands find its token themselves."""
    service, env = served
    monkeypatch.setenv("VIRTDRIVER_STATE_DIR", env["VIRTDRIVER_STATE_DIR"])
    flavor = tmp_path / "flavor.json"
    flavor.write_text(json.dumps({"vcpus": 1, "memory_mb": 512,
                                  "extra_specs": {}}))
    image = tmp_path / "image.json"
    image.write_text(json.dumps({"properties": {}}))

    assert cli.main(["placement-request", "--flavor", str(flavor),
                     "--image", str(image), "--placement-url", service.url,
                     "--format", "json"]) == 0, capsys.readouterr().err
    (candidate,) = json.loads(capsys.readouterr().out)["candidates"]
    vm = str(uuidlib.uuid4())
    status, body = call(f"{service.url}/allocations/{vm}", "PUT",
                        service.token(), {
                            "allocations": {
                                uuid: {"resources": resources}
                                for uuid, resources in
                                candidate["allocations"].items()},
                            "project_id": str(uuidlib.uuid4()),
                            "user_id": str(uuidlib.uuid4()),
                            "consumer_generation": None,
                            "consumer_type": "INSTANCE"})
    assert status == 204, body
    instance = tmp_path / "vm.json"
    instance.write_text(json.dumps({
        "uuid": vm, "flavor": {"vcpus": 1, "memory_mb": 512,
                               "extra_specs": {}}}))

    assert cli.main(["claim", "--instance", str(instance), "--placement-url",
                     service.url, "--format", "json", *FAKE]) == 0, \
        capsys.readouterr().err
    assert json.loads(capsys.readouterr().out)["claim"]
    assert cli.main(["release", "--instance", str(instance), *FAKE]) == 0
    capsys.readouterr()
    assert cli.main(["sync", "--placement-url", service.url, *FAKE]) == 0, \
        capsys.readouterr().err
    assert f"the token in {service.token_file}" in capsys.readouterr().out
    # The embedded sync opens the served database itself (a process of
    # its own: one Placement database per process).
    embedded = subprocess.run([*CLI, "sync", *FAKE,
                               "--reserved-host-memory-mb", "1024"],
                              env=env, capture_output=True, text=True,
                              timeout=180)
    assert embedded.returncode == 0, embedded.stderr
    numa = providers(service)["fake-small_NUMA0"]
    status, body = call(f"{service.url}/resource_providers/{numa}"
                        "/inventories", token=service.token())
    assert status == 200, body
    assert body["inventories"]["MEMORY_MB"]["reserved"] == 1024  # served


def test_stopping_the_service_removes_its_token_file(served):
    _, env = served
    second = Served(env)
    assert os.path.exists(second.token_file)
    status, _ = call(second.url + "/resource_providers",
                     token=second.token())
    assert status == 200
    second.stop()
    assert not os.path.lexists(second.token_file)


def test_a_planted_token_file_is_not_followed(tmp_path, monkeypatch, capsys):
    """A link where a token file would be is refused before any request:
    the file it points to is neither read nor sent."""
    state = tmp_path / "state"
    state.mkdir()
    secret = tmp_path / "secret"
    secret.write_text("root-only\n")
    (state / "placement-serve-9.token").symlink_to(secret)
    monkeypatch.setenv("VIRTDRIVER_STATE_DIR", str(state))
    flavor = tmp_path / "flavor.json"
    flavor.write_text(json.dumps({"vcpus": 1, "memory_mb": 512,
                                  "extra_specs": {}}))
    image = tmp_path / "image.json"
    image.write_text(json.dumps({"properties": {}}))

    assert cli.main(["placement-request", "--flavor", str(flavor), "--image",
                     str(image), "--placement-url",
                     "http://127.0.0.1:9"]) == 2

    err = capsys.readouterr().err
    assert "placement-serve-9.token is a symbolic link" in err
    assert len(err.splitlines()) == 1
