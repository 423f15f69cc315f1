"""A refusal of the real Placement (a 4xx) is bad input in the one error
shape: ``virtdriver: <cause>``, at most one more line, exit 2, no
traceback (issue 26)."""

from __future__ import annotations

import json
import uuid as uuidlib

from virtdriver import cli

FAKE = ["--driver", "fake", "--host-spec", "small"]


def test_placement_refusing_a_write_is_one_cause_exit_2(
        tmp_path, monkeypatch, placement, api, capsys):
    monkeypatch.setenv("VIRTDRIVER_STATE_DIR", str(tmp_path / "state"))
    assert cli.main(["report", "--format", "json", *FAKE]) == 0
    root = json.loads(capsys.readouterr().out)["providers"][0]["name"]
    # Another service's provider holds our compute node's name: Placement
    # answers our create with 409 (names are unique).
    api.client.create_provider(str(uuidlib.uuid4()), root, None)
    status = cli.main(["sync", *FAKE, "--placement-url", placement.url])
    captured = capsys.readouterr()
    err = captured.err.splitlines()
    assert status == 2, captured.err
    assert 1 <= len(err) <= 2, err
    assert all(line.startswith("virtdriver: ") for line in err), err
    assert root in err[0]
    assert "Traceback" not in captured.err
