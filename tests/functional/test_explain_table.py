"""``virtdriver explain`` with no trait names: the whole table, its
filters and JSON, and the provenance of provider config file traits.

Everything runs through ``cli.main`` replaying a snapshot built from the
corpus, as an operator would run it.
"""

from __future__ import annotations

import json
import socket

import os_traits
import pytest

from tests.corpus import CORPUS
from virtdriver import cli
from virtdriver.capabilities.traits.explain import STATUSES
from virtdriver.capabilities.traits.registry import LIBVIRT_OWNERSHIP

HOST = CORPUS / "hostcaps" / "caps-qemu-real-full.xml"
Q35 = CORPUS / "domcaps" / "qemu_8.2.0-q35.x86_64.xml"

SITE = """\
meta:
  schema_version: '1.0'
providers:
  - identification:
      uuid: $COMPUTE_NODE
    traits:
      additional:
        - CUSTOM_RACK_7
        - CUSTOM_POWER_CAPPED
"""


@pytest.fixture
def snapshot(corpus_dir, tmp_path):
    """A hand-written snapshot: corpus host and domain capabilities."""
    root = tmp_path / "snapshot"
    root.mkdir()
    (root / "capabilities.xml").write_text(HOST.read_text())
    (root / "domcaps.xml").write_text(Q35.read_text())
    return root


@pytest.fixture
def config_dir(tmp_path):
    """An empty provider config directory, and a config file naming it."""
    directory = tmp_path / "provider_config"
    directory.mkdir()
    conf = tmp_path / "virtdriver.conf"
    conf.write_text(f"[compute]\nprovider_config_location = {directory}\n")
    return directory, conf


def run(capsys, snapshot, *options):
    status = cli.main(["explain", "--snapshot", str(snapshot), *options])
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def table_json(capsys, snapshot, *options):
    status, out, err = run(capsys, snapshot, "--format", "json", *options)
    assert status == 0, err
    return json.loads(out)


def line_of(text, needle):
    """1-based line of ``needle`` in ``text``."""
    return next(number for number, line in
                enumerate(text.splitlines(), 1) if needle in line)


def test_whole_table_has_every_owned_trait_once_with_a_status(
        capsys, snapshot):
    rows = table_json(capsys, snapshot)
    names = [row["trait"] for row in rows]
    # Once per provider: the corpus host has one NUMA cell.
    assert len(names) == len(set(names))
    assert LIBVIRT_OWNERSHIP.static <= set(names)
    assert all(LIBVIRT_OWNERSHIP.owns(name) for name in names)
    assert {row["status"] for row in rows} <= set(STATUSES)
    # The corpus host asserts some traits and leaves others unasserted.
    assert {"asserted", "unasserted"} <= {row["status"] for row in rows}
    assert all(row["summary"] for row in rows)


@pytest.mark.parametrize("options, beside", [
    ((), False),  # long names and statuses: evidence under each row
    (("--family", "firmware"), True),  # narrow columns: evidence beside
])
def test_text_table_lists_each_trait_on_one_row_aligned(
        capsys, snapshot, options, beside):
    status, out, _ = run(capsys, snapshot, *options)
    assert status == 0
    lines = out.splitlines()
    assert lines[0].split()[:4] == ["PROVIDER", "TRAIT", "STATUS", "FAMILY"]
    assert ("EVIDENCE" in lines[0]) is beside
    if beside:
        column, body = lines[0].index("EVIDENCE"), lines[1:]
    else:
        column, body = lines[1].index("EVIDENCE"), lines[2:]
        assert lines[1].strip() == "EVIDENCE"
    starts = [tuple(line.split()[:2]) for line in body if line[:1] != " "]
    assert starts == [
        (row["provider"], row["trait"])
        for row in table_json(capsys, snapshot, *options)]
    for line in body:
        if line[:1] == " ":  # evidence, in its column
            assert line[:column].strip() == "" and line[column] != " "
        # Within 100 columns, unless one word is wider than its column.
        assert len(line) <= 100 or len(line.split()[-1]) > 30, line
    row = next(line for line in body if line[:1] != " " and
               line.split()[1] == os_traits.COMPUTE_FIRMWARE_UEFI)
    assert row.split()[2:4] == ["asserted", "firmware"]


def test_status_filter_repeatable_and_comma_list(capsys, snapshot):
    everything = table_json(capsys, snapshot)
    chosen = table_json(capsys, snapshot, "--status", "asserted,unknown",
                        "--status", "invalid")
    expected = [row for row in everything
                if row["status"] in ("asserted", "unknown", "invalid")]
    assert chosen == expected
    assert chosen and len(chosen) < len(everything)


def test_issue_wording_owned_unasserted_is_unasserted(capsys, snapshot):
    rows = table_json(capsys, snapshot, "--status", "owned-unasserted")
    assert rows and {row["status"] for row in rows} == {"unasserted"}


def test_family_filter(capsys, snapshot):
    rows = table_json(capsys, snapshot, "--family", "CPU Features",
                      "--status", "asserted")
    assert rows
    assert {row["family"] for row in rows} == {"cpu features"}
    assert {row["status"] for row in rows} == {"asserted"}
    assert os_traits.HW_CPU_X86_AVX2 in {row["trait"] for row in rows}


def test_json_shape(capsys, snapshot):
    rows = table_json(capsys, snapshot, "--family", "storage bus")
    assert isinstance(rows, list) and rows
    for row in rows:
        assert set(row) == {"provider", "trait", "status", "sentence",
                            "family", "summary", "evidence"}
        assert row["sentence"].startswith(
            f"{row['trait']} on {row['provider']!r}: ")
        assert isinstance(row["evidence"], list)


@pytest.mark.parametrize("option, value", [("--status", "bogus"),
                                           ("--family", "no such family")])
def test_unknown_filter_is_bad_input(capsys, snapshot, option, value):
    status, out, err = run(capsys, snapshot, option, value)
    assert status == 2
    assert out == ""
    assert repr(value) in err and "use one" in err
    assert len(err.strip().splitlines()) == 1


def test_no_match_says_so(capsys, snapshot, config_dir):
    status, out, _ = run(capsys, snapshot, "--status", "provider-config")
    assert status == 0
    assert out == "no trait matches the filters\n"


def test_config_trait_names_file_and_line(capsys, snapshot, config_dir):
    directory, conf = config_dir
    (directory / "site.yaml").write_text(SITE)
    site = str(directory / "site.yaml")
    line = line_of(SITE, "- CUSTOM_RACK_7")
    rows = table_json(capsys, snapshot, "--config-file", str(conf),
                      "--status", "provider-config")
    assert [row["trait"] for row in rows] == ["CUSTOM_POWER_CAPPED",
                                               "CUSTOM_RACK_7"]
    rack = rows[1]
    assert rack["provider_config"]["file"] == site
    assert rack["provider_config"]["line"] == line
    assert rack["provider_config"]["entry"] == 0
    assert "$COMPUTE_NODE" in rack["provider_config"]["provider"]

    status, out, _ = run(capsys, snapshot, "--config-file", str(conf))
    assert status == 0
    lines = out.splitlines()
    at = next(i for i, text in enumerate(lines)
              if text[:1] != " " and text.split()[1] == "CUSTOM_RACK_7")
    assert "provider config" in lines[at]
    evidence = []
    for text in lines[at + 1:]:
        if text[:1] != " ":
            break
        evidence.append(text.strip())
    assert f"{site}:{line} (providers[0])" in " ".join(evidence)

    status, out, _ = run(capsys, snapshot, "CUSTOM_RACK_7", "--config-file",
                         str(conf))
    assert status == 0
    assert (f"set by provider config file {site} line {line} (entry "
            "providers[0])") in out


def test_trait_in_no_file_is_explained_as_before(capsys, snapshot,
                                                 config_dir):
    directory, conf = config_dir
    (directory / "site.yaml").write_text(SITE)
    _, without, _ = run(capsys, snapshot, "CUSTOM_ELSEWHERE")
    _, with_config, _ = run(capsys, snapshot, "CUSTOM_ELSEWHERE",
                            "--config-file", str(conf))
    assert with_config == without
    assert "not ours" in with_config


def test_entry_for_this_host_by_name_wins_over_compute_node(
        capsys, snapshot, config_dir):
    directory, conf = config_dir
    mine = SITE + (
        "  - identification:\n"
        f"      name: {json.dumps(socket.gethostname())}\n"
        "    traits:\n"
        "      additional:\n"
        "        - CUSTOM_THIS_HOST\n")
    (directory / "site.yaml").write_text(mine)
    rows = table_json(capsys, snapshot, "--config-file", str(conf),
                      "--status", "provider-config")
    assert [row["trait"] for row in rows] == ["CUSTOM_THIS_HOST"]
    assert rows[0]["provider_config"]["line"] == line_of(
        mine, "- CUSTOM_THIS_HOST")
    assert rows[0]["provider_config"]["entry"] == 1


def test_refused_directory_warns_and_gives_no_provenance(
        capsys, snapshot, config_dir):
    directory, conf = config_dir
    (directory / "site.yaml").write_text(SITE + "        - not a trait\n")
    status, out, err = run(capsys, snapshot, "CUSTOM_RACK_7",
                           "--config-file", str(conf))
    assert status == 0
    assert "not ours" in out
    assert "provider config files not used by explain" in err
    assert "site.yaml" in err
