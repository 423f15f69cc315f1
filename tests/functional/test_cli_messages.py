"""Messages that used to mislead (issue 19), each through the production
call path: what they say now and the status they exit with."""

from __future__ import annotations

import json
import socket

import pytest

from virtdriver import cli
from virtdriver.agent import NODE_LIST, CycleReport
from virtdriver.drivers.base import DriverError
from virtdriver.placement.client import RequestCounts
from virtdriver.placement.result import ProviderOutcome, SyncResult
from virtdriver.render.sync import summary

FAKE = ["--driver", "fake", "--host-spec", "small"]
UUID = "11111111-2222-3333-4444-555555555555"


@pytest.fixture
def state(tmp_path, monkeypatch):
    path = tmp_path / "state"
    monkeypatch.setenv("VIRTDRIVER_STATE_DIR", str(path))
    return path


@pytest.fixture
def instance(tmp_path) -> str:
    path = tmp_path / "instance.json"
    path.write_text(json.dumps({"uuid": UUID, "flavor": {
        "vcpus": 1, "memory_mb": 512}}))
    return str(path)


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_release_of_an_empty_instance_names_the_option(state, capsys):
    assert cli.main(["release", "--instance", "", *FAKE]) == 2
    err = capsys.readouterr().err
    assert err == ("virtdriver: --instance '' names nothing; give the "
                   "instance's uuid or the path of its INSTANCE.json\n")


def test_a_second_claim_points_at_commands_not_python(state, capsys,
                                                      instance):
    assert cli.main(["claim", "--instance", instance, *FAKE]) == 0
    capsys.readouterr()
    assert cli.main(["claim", "--instance", instance, *FAKE]) == 1
    err = capsys.readouterr().err
    assert f"`virtdriver release --instance {UUID}`" in err
    assert "`virtdriver rebuild-check`" in err
    assert "rebuild_claim" not in err


def test_claims_of_a_renamed_host_name_the_file_and_the_way_out(
        state, capsys, instance):
    assert cli.main(["claim", "--instance", instance, *FAKE]) == 0
    path = state / "claims-fake.json"
    path.write_text(path.read_text().replace('"fake-small"', '"old-name"'))
    capsys.readouterr()
    assert cli.main(["claims", *FAKE, "--format", "json"]) == 0
    err = capsys.readouterr().err
    assert f"instance claims {path}: node 'old-name' holds 1 claim(s)" in err
    assert "rename the key 'old-name' under \"nodes\" to 'fake-small'" in err
    assert "delete that entry" in err
    assert "get_available_nodes" not in err


def test_explain_of_a_name_that_is_no_trait_exits_2(capsys):
    status = cli.main(["explain", "NOT_A_TRAIT", "--uri", "test:///default"])
    captured = capsys.readouterr()
    assert status == 2
    assert "NOT_A_TRAIT: not a valid trait name" in captured.out
    assert captured.err.startswith("virtdriver: NOT_A_TRAIT: not a trait")


def test_image_check_unreachable_gives_no_sync_advice(tmp_path, capsys):
    image = tmp_path / "image.json"
    image.write_text('{"properties": {}}')
    status = cli.main(["image-check", "--image", str(image),
                       "--placement-url", f"http://127.0.0.1:{closed_port()}",
                       "--provider", UUID])
    err = capsys.readouterr().err
    assert status == 3, err
    assert "not reachable" in err and "sync" not in err


def test_the_agent_line_names_the_node_list_not_this_host():
    report = CycleReport(2, failed={NODE_LIST: DriverError("unreadable")})
    line = report.line()
    assert ("the driver's node list could not be read (no node updated, "
            "nothing removed): unreadable") in line
    assert socket.gethostname() not in line


def test_a_refused_delete_is_news_not_no_changes():
    result = SyncResult(
        outcomes=(ProviderOutcome(UUID, "gone-node", kept=(
            "it still has allocations; delete or move them")),),
        counts=RequestCounts({"GET": 1, "DELETE": 1}))
    line = summary(result)
    assert line.startswith("1 provider not deleted (gone-node: it still has "
                           "allocations; delete or move them), 1 write")
    assert "no changes" not in line
