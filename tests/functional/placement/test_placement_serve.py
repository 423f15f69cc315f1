"""``virtdriver placement serve``: the state directory's embedded Placement
on loopback, as osc-placement reads it (a real sync writes it first; a
plain HTTP GET reads it, and osc-placement's ``openstack`` too when it is
installed), with the token of the run in the state directory."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import urllib.request

import pytest

from virtdriver.cli import main

CLI = [sys.executable, "-m", "virtdriver.cli"]


@pytest.fixture
def synced(tmp_path) -> dict[str, str]:
    """The environment of a state directory whose embedded Placement a
    real `virtdriver sync` of the fake small host wrote."""
    env = dict(os.environ, VIRTDRIVER_STATE_DIR=str(tmp_path / "state"))
    done = subprocess.run([*CLI, "sync", "--driver", "fake", "--host-spec",
                           "small"], env=env, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    return env


def test_serve_answers_the_provider_list_then_stops_on_sigterm(synced):
    proc = subprocess.Popen([*CLI, "placement", "serve"], env=synced,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    try:
        first = proc.stdout.readline()  # blocks until it answers
        found = re.match(r"serving the embedded Placement of (\S+) on "
                         r"(http://127\.0\.0\.1:\d+)$", first.strip())
        assert found, first + proc.stderr.read()
        assert found[1] == synced["VIRTDRIVER_STATE_DIR"]
        url = found[2]
        rest = [proc.stdout.readline().strip() for _ in range(4)]
        assert rest[-1] == "openstack resource provider list"
        token_file = os.path.join(found[1],
                                  f"placement-serve-{url.rsplit(':', 1)[1]}"
                                  ".token")
        assert (f'OS_ENDPOINT={url} OS_TOKEN="$(cat {token_file})"'
                in rest[-2])
        with open(token_file) as stream:
            token = stream.read().strip()
        request = urllib.request.Request(
            url + "/resource_providers",
            headers={"X-Auth-Token": token,
                     "OpenStack-API-Version": "placement 1.39"})
        with urllib.request.urlopen(request, timeout=30) as answer:
            names = {p["name"] for p in
                     json.load(answer)["resource_providers"]}
        assert names == {"fake-small", "fake-small_NUMA0"}
        osc = shutil.which("openstack")
        if osc is not None:  # osc-placement installed: the real client
            listed = subprocess.run(
                [osc, "resource", "provider", "list", "-f", "value",
                 "-c", "name"], capture_output=True, text=True, timeout=120,
                env=dict(synced, OS_AUTH_TYPE="admin_token", OS_ENDPOINT=url,
                         OS_TOKEN=token, OS_PLACEMENT_API_VERSION="1.39"))
            assert set(listed.stdout.split()) == names, listed.stderr
            refused = subprocess.run(
                [osc, "resource", "provider", "list"], capture_output=True,
                text=True, timeout=120,
                env=dict(synced, OS_AUTH_TYPE="admin_token", OS_ENDPOINT=url,
                         OS_TOKEN="admin", OS_PLACEMENT_API_VERSION="1.39"))
            assert refused.returncode != 0 and "401" in refused.stderr
    finally:
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    assert err == ""


def test_serve_without_an_embedded_placement_is_one_line(tmp_path, capsys,
                                                         monkeypatch):
    monkeypatch.setenv("VIRTDRIVER_STATE_DIR", str(tmp_path / "empty"))
    assert main(["placement", "serve"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"virtdriver: no embedded Placement in "
                          f"{tmp_path / 'empty'}: ")
    assert "run `virtdriver sync` first" in err
    assert len(err.splitlines()) == 1
