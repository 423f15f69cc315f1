"""Record real libvirt, replay the snapshot through fakelibvirt with the
real driver code, and get exactly the same answers (but for where they
came from: the URI and the document sources)."""

from __future__ import annotations

import json

import pytest

from virtdriver import cli

pytestmark = pytest.mark.real
WHERE = {"uri", "uri_reason", "source"}


def without_origin(value):
    """``value`` with every URI/source field removed, recursively."""
    if isinstance(value, dict):
        return {k: without_origin(v) for k, v in value.items()
                if k not in WHERE}
    if isinstance(value, list):
        return [without_origin(v) for v in value]
    return value


def run_json(capsys, *argv):
    status = cli.main([*argv, "--format", "json"])
    captured = capsys.readouterr()
    assert status == 0, captured.err
    return json.loads(captured.out)


@pytest.fixture(params=["test", "embed"])
def uri(request):
    if request.param == "test":
        return "test:///default"
    return request.getfixturevalue("embed_uri")


def test_report_replays_exactly(uri, tmp_path, capsys):
    snapshot = tmp_path / "snap"
    assert cli.main(["snapshot", "--uri", uri, "-o", str(snapshot)]) == 0
    assert "recorded " + uri in capsys.readouterr().out

    live = run_json(capsys, "host", "--uri", uri)
    replayed = run_json(capsys, "host", "--snapshot", str(snapshot))

    assert replayed["uri_reason"] == f"replaying snapshot {snapshot}"
    # Devices unknown live (qemu:///embed, no node-device daemon) replay
    # as unknown, quoting the live reason: never as "no device".
    live_devices, replayed_devices = live.pop("devices"), \
        replayed.pop("devices")
    assert replayed_devices["known"] == live_devices["known"]
    if not live_devices["known"]:
        assert live_devices["reason"] in replayed_devices["reason"]
    else:
        assert without_origin(replayed_devices) == without_origin(
            live_devices)
    assert without_origin(replayed) == without_origin(live)
    assert live["traits"]["asserted"], "the comparison is not vacuous"


def test_tree_replays_exactly(uri, tmp_path, capsys):
    snapshot = tmp_path / "snap"
    assert cli.main(["snapshot", "--uri", uri, "-o", str(snapshot)]) == 0
    capsys.readouterr()

    def shape(document):
        return [(p["name"], p["inventories"], p["traits"])
                for p in document["providers"]]

    live = run_json(capsys, "report", "--uri", uri)
    replayed = run_json(capsys, "report", "--snapshot", str(snapshot))
    assert shape(replayed) == shape(live)
    assert len(live["providers"]) >= 2  # root and at least one NUMA cell


def test_refusals_replay_as_refusals(tmp_path, capsys):
    snapshot = tmp_path / "snap"
    cli.main(["snapshot", "--uri", "test:///default", "-o", str(snapshot)])
    capsys.readouterr()
    manifest = json.loads((snapshot / "manifest.json").read_text())
    (refused,) = manifest["domain_capabilities"]
    assert refused["error"]["code"] == 3  # VIR_ERR_NO_SUPPORT
    replayed = run_json(capsys, "host", "--snapshot", str(snapshot))
    assert replayed["domain"]["unknown"] is True
    assert replayed["domain"]["error_name"] == "VIR_ERR_NO_SUPPORT"
