"""A refused provider config file through ``virtdriver report`` and
``sync`` (issue 26): every problem of every file is said in one run, and
the command exits 2 after doing what is safe — the tree without the
files, what they applied before kept on the providers, Placement synced.
"""

from __future__ import annotations

import json

import os_traits
import pytest

from virtdriver import cli

FAKE = ["--driver", "fake", "--host-spec", "numa2-ht"]
HEAD = "meta: {schema_version: '1.0'}\nproviders:\n"
GOOD = HEAD + """\
  - identification: {uuid: $COMPUTE_NODE}
    traits: {additional: [CUSTOM_RACK_7]}
"""
# Three problems, on lines 6, 8 and 11.
BAD = HEAD + """\
  - identification: {uuid: $COMPUTE_NODE}
    traits:
      additional: [CUSTOM_RACK_7, CUSTOM_NEW,
                   rack 8]
  - identification: {name: fake-numa2-ht_NUMA0}
    trait: {additional: [CUSTOM_TYPO]}
    inventories:
      additional:
        - CUSTOM_FPGA: {total: -1}
"""


@pytest.fixture
def site(tmp_path, monkeypatch):
    """A provider config directory, the config file naming it, and a
    state directory."""
    directory = tmp_path / "provider_config"
    directory.mkdir()
    conf = tmp_path / "virtdriver.conf"
    conf.write_text(f"[compute]\nprovider_config_location = {directory}\n")
    monkeypatch.setenv("VIRTDRIVER_STATE_DIR", str(tmp_path / "state"))
    return directory, ["--config-file", str(conf)]


def run(capsys, *args):
    status = cli.main(list(args))
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def problems(err: str, path) -> list[str]:
    """The lines of stderr naming a line of ``path``."""
    return [line.strip() for line in err.splitlines()
            if line.strip().startswith(f"{path}:")]


def test_report_names_every_problem_of_the_file_and_exits_2(capsys, site):
    directory, conf = site
    (directory / "site.yaml").write_text(BAD)

    status, out, err = run(capsys, "report", "--format", "json", *FAKE,
                           *conf)

    assert status == 2
    where = directory / "site.yaml"
    found = problems(err, where)
    assert [line.split(":")[1] for line in found] == ["6", "8", "11"]
    assert "'rack 8' is not a CUSTOM_ trait" in found[0]
    assert "unknown field 'trait'" in found[1]
    assert "CUSTOM_FPGA" in found[2]
    # The last line says what it means, once.
    assert err.strip().splitlines()[-1].startswith(
        f"virtdriver: the provider config files in {directory} were "
        "refused")
    # The tree is still shown: the driver's, without the file's trait.
    tree = json.loads(out)
    root = next(p for p in tree["providers"]
                if p["parent_provider_uuid"] is None)
    assert os_traits.COMPUTE_NODE in root["traits"]
    assert "CUSTOM_RACK_7" not in root["traits"]


def test_every_refused_file_is_named(capsys, site):
    directory, conf = site
    (directory / "a.yaml").write_text(BAD)
    (directory / "b.yaml").write_text(HEAD + "  - identification: {}\n")

    status, _, err = run(capsys, "report", *FAKE, *conf)

    assert status == 2
    assert len(problems(err, directory / "a.yaml")) == 3
    assert len(problems(err, directory / "b.yaml")) == 1
    assert "4 problems" in err


def test_every_trait_the_driver_owns_in_a_file_is_refused(
        capsys, site, tmp_path):
    directory, conf = site
    host = tmp_path / "host.yaml"
    host.write_text("name: rack-host\ncells: 1\ncores_per_cell: 2\n"
                    "traits: [CUSTOM_OWNED_A, CUSTOM_OWNED_B]\n")
    (directory / "site.yaml").write_text(
        HEAD + "  - identification: {uuid: $COMPUTE_NODE}\n"
        "    traits:\n      additional:\n"
        "        - CUSTOM_OWNED_A\n        - CUSTOM_FINE\n"
        "        - CUSTOM_OWNED_B\n")

    status, _, err = run(capsys, "report", "--driver", "fake",
                         "--host-spec", str(host), *conf)

    assert status == 2
    found = problems(err, directory / "site.yaml")
    assert [line.split(":")[1] for line in found] == ["6", "8"]
    assert "CUSTOM_OWNED_A is owned by the driver" in found[0]
    assert "CUSTOM_OWNED_B is owned by the driver" in found[1]


def test_sync_with_a_refused_file_syncs_the_rest_and_exits_2(
        capsys, site, placement, api):
    directory, conf = site
    url = ["--placement-url", placement.url]
    (directory / "site.yaml").write_text(GOOD)
    status, first, _ = run(capsys, "sync", "--format", "json", *url, *FAKE,
                           *conf)
    assert status == 0
    root = next(p["uuid"] for p in json.loads(first)["tree"]["providers"]
                if p["parent_provider_uuid"] is None)
    assert "CUSTOM_RACK_7" in api.traits(root)

    (directory / "site.yaml").write_text(BAD)
    api.remove_traits(root, os_traits.COMPUTE_NODE)
    status, out, err = run(capsys, "sync", "--format", "json", *url, *FAKE,
                           *conf)

    assert status == 2
    assert len(problems(err, directory / "site.yaml")) == 3
    assert json.loads(out)["sync"]["ok"]
    traits = api.traits(root)
    # What is safe is done: the driver's trait put back, the file's old
    # trait kept, nothing of the refused file added.
    assert os_traits.COMPUTE_NODE in traits
    assert "CUSTOM_RACK_7" in traits
    assert "CUSTOM_NEW" not in traits
