"""``virtdriver explain`` over every provider of the node (issue 26): a
trait is explained on the provider that carries it — ``HW_NUMA_ROOT`` and
the CPU features on the NUMA cells, a provider config trait on the
provider its entry names — with a provider column, ``--provider NAME``,
and "not owned: dropped" for what the tracker would take off.

Through ``cli.main``: a snapshot of a corpus host with four NUMA cells
(the libvirt path), the fake driver's two-cell host and a driver of this
module (``--driver``)."""

from __future__ import annotations

import importlib.metadata
import json
from collections.abc import Mapping
from typing import Any

import os_traits
import pytest
from stevedore.extension import ExtensionManager

from tests.corpus import CORPUS
from virtdriver import cli
from virtdriver.capabilities.traits.apply import apply_report
from virtdriver.capabilities.traits.derive import TraitReport
from virtdriver.capabilities.traits.model import (
    Evidence, TraitResult, TraitState)
from virtdriver.capabilities.traits.ownership import Ownership
from virtdriver.drivers.base import ComputeDriver, NodeCapabilities
from virtdriver.drivers.identity import root_uuid
from virtdriver.drivers.loader import NAMESPACE

HOST = CORPUS / "hostcaps" / "vircaps-x86_64-basic.xml"   # 4 NUMA cells
CELLS = [f"cmp1_NUMA{i}" for i in range(4)]
HEAD = "meta: {schema_version: '1.0'}\nproviders:\n"


@pytest.fixture
def host(corpus_dir, tmp_path):
    """A snapshot of the corpus host, a provider config directory and a
    config file naming both the directory and the host ``cmp1``."""
    snapshot = tmp_path / "snapshot"
    snapshot.mkdir()
    (snapshot / "capabilities.xml").write_text(HOST.read_text())
    directory = tmp_path / "provider_config"
    directory.mkdir()
    conf = tmp_path / "virtdriver.conf"
    conf.write_text(f"[DEFAULT]\nhost = cmp1\n[compute]\n"
                    f"provider_config_location = {directory}\n")
    return ["--snapshot", str(snapshot), "--config-file", str(conf)], \
        directory


def run(capsys, *args):
    status = cli.main(list(args))
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def rows(capsys, *args):
    status, out, err = run(capsys, "explain", "--format", "json", *args)
    assert status == 0, err
    return json.loads(out)


def test_numa_root_is_asserted_on_each_cell(capsys, host):
    options, _ = host

    found = rows(capsys, *options, os_traits.HW_NUMA_ROOT)

    assert [(r["provider"], r["status"]) for r in found] == [
        (cell, "asserted") for cell in CELLS]
    assert found[2]["evidence"][0]["element"] == (
        "host/topology/cells/cell[@id='2']")
    assert found[2]["sentence"].startswith(
        f"{os_traits.HW_NUMA_ROOT} on 'cmp1_NUMA2': asserted")


def test_the_table_has_every_provider_and_says_which(capsys, host):
    options, _ = host

    table = rows(capsys, *options)

    by_provider: dict[str, set[str]] = {}
    for row in table:
        by_provider.setdefault(row["provider"], set()).add(row["trait"])
    assert list(by_provider) == ["cmp1", *CELLS]   # root first, in order
    assert os_traits.COMPUTE_NODE in by_provider["cmp1"]
    assert os_traits.HW_NUMA_ROOT not in by_provider["cmp1"]
    cpu = {t for t in by_provider["cmp1_NUMA0"] if t.startswith("HW_CPU_")}
    assert cpu and all(by_provider[c] == by_provider["cmp1_NUMA0"]
                       for c in CELLS)
    assert not cpu & by_provider["cmp1"]
    # The text table: the provider is the first column.
    status, out, _ = run(capsys, "explain", *options, "--family", "NUMA")
    assert status == 0
    assert out.splitlines()[0].split()[:2] == ["PROVIDER", "TRAIT"]
    assert [line.split()[:3] for line in out.splitlines()[1:]
            if line[:1] != " "] == [
        [cell, os_traits.HW_NUMA_ROOT, "asserted"] for cell in CELLS]


def test_a_provider_config_trait_on_a_cell_is_that_cells(capsys, host):
    options, directory = host
    _, tree, _ = run(capsys, "report", "--format", "json", *options)
    uuid = next(p["uuid"] for p in json.loads(tree)["providers"]
                if p["name"] == "cmp1_NUMA3")
    (directory / "cells.yaml").write_text(
        HEAD + "  - identification: {name: cmp1_NUMA1}\n"
        "    traits: {additional: [CUSTOM_FAST_MEMORY]}\n"
        f"  - identification: {{uuid: {uuid}}}\n"
        "    traits: {additional: [CUSTOM_FAST_MEMORY]}\n")

    found = rows(capsys, *options, "CUSTOM_FAST_MEMORY")

    assert [(r["provider"], r["status"]) for r in found] == [
        ("cmp1_NUMA1", "provider config"), ("cmp1_NUMA3", "provider config")]
    assert found[0]["provider_config"]["line"] == 4
    assert found[0]["provider_config"]["provider"] == (
        "provider 'cmp1_NUMA1' (by name)")
    assert found[1]["provider_config"]["provider"] == (
        "provider 'cmp1_NUMA3' (by uuid)")


def test_provider_filter_keeps_one_provider(capsys, host):
    options, _ = host

    found = rows(capsys, *options, "--provider", "cmp1_NUMA1")

    assert found and {r["provider"] for r in found} == {"cmp1_NUMA1"}
    assert os_traits.HW_NUMA_ROOT in {r["trait"] for r in found}
    # A name the provider does not know is answered for it.
    [answer] = rows(capsys, *options, "--provider", "cmp1",
                    os_traits.HW_NUMA_ROOT)
    assert answer["provider"] == "cmp1"
    assert answer["status"] == "owned, not derived"


def test_an_unknown_provider_is_one_line_naming_them_all(capsys, host):
    options, _ = host

    status, out, err = run(capsys, "explain", *options, "--provider",
                           "cmp1_NUMA9")

    assert (status, out) == (2, "")
    lines = err.strip().splitlines()
    assert len(lines) == 1
    assert lines[0].startswith("virtdriver: --provider 'cmp1_NUMA9': ")
    assert lines[0].endswith("give one of: " + ", ".join(["cmp1", *CELLS]))


def test_a_drivers_cells_through_driver(capsys):
    found = rows(capsys, "--driver", "fake", "--host-spec", "numa2-ht",
                 os_traits.HW_NUMA_ROOT)

    assert [(r["provider"], r["status"]) for r in found] == [
        ("fake-numa2-ht_NUMA0", "asserted"),
        ("fake-numa2-ht_NUMA1", "asserted")]


# -- a driver asserting a trait it does not own ------------------------------

UNOWNED = "CUSTOM_DROPPER_UNOWNED"
OWNED = "CUSTOM_DROPPER_OWNED"


class Dropper(ComputeDriver):
    """Asserts two traits; its ownership_for the node has only one."""

    capabilities: Mapping[str, bool] = {}
    ownership = Ownership(frozenset({OWNED}))
    root_uuid_kind = "dropper"

    def __init__(self, *, conf: object = None) -> None:
        self.host = ""

    def init_host(self, host: str) -> None:
        self.host = host

    def get_available_nodes(self, refresh: bool = False) -> list[str]:
        return [self.host]

    def node_capabilities(self, nodename: str) -> NodeCapabilities:
        results = {trait: TraitResult(trait, TraitState.ASSERTED, "dropper",
                                      (Evidence("the dropper", "says so"),))
                   for trait in (OWNED, UNOWNED)}
        # The report claims both; the driver's ownership has one.
        return NodeCapabilities(nodename, TraitReport(
            results, Ownership(frozenset({OWNED, UNOWNED}))))

    def update_provider_tree(self, tree, nodename: str,
                             allocations: Any = None) -> None:
        if not tree.exists(nodename):
            tree.new_root(nodename, root_uuid(self.root_uuid_kind, nodename))
        report = self.node_capabilities(nodename).traits
        tree.update_traits(nodename, apply_report(tree.data(nodename).traits,
                                                  report))


@pytest.fixture
def dropper(monkeypatch, tmp_path):
    monkeypatch.setitem(ExtensionManager.ENTRY_POINT_CACHE, NAMESPACE, [
        importlib.metadata.EntryPoint("dropper", f"{__name__}:Dropper",
                                      NAMESPACE)])
    monkeypatch.setenv("VIRTDRIVER_STATE_DIR", str(tmp_path / "state"))


@pytest.mark.usefixtures("dropper")
def test_a_trait_the_driver_does_not_own_is_not_owned_dropped(capsys):
    # What report does: the trait is taken off, with a warning.
    status, out, err = run(capsys, "report", "--driver", "dropper",
                           "--format", "json")
    assert status == 0
    [root] = json.loads(out)["providers"]
    assert OWNED in root["traits"] and UNOWNED not in root["traits"]
    assert "does not own" in err and UNOWNED in err

    found = rows(capsys, "--driver", "dropper")

    status_of = {r["trait"]: r["status"] for r in found}
    assert status_of == {OWNED: "asserted", UNOWNED: "not owned: dropped"}
    dropped = next(r for r in found if r["trait"] == UNOWNED)
    assert "takes it off" in dropped["sentence"]
    assert rows(capsys, "--driver", "dropper", "--status",
                "not-owned-dropped") == [dropped]


@pytest.mark.parametrize("source", ["snapshot", "fake"])
def test_what_explain_asserts_per_provider_is_what_report_puts_there(
        capsys, host, source):
    options, directory = host
    if source == "fake":
        options = ["--driver", "fake", "--host-spec", "numa2-ht",
                   *options[2:]]
    (directory / "site.yaml").write_text(
        HEAD + "  - identification: {uuid: $COMPUTE_NODE}\n"
        "    traits: {additional: [CUSTOM_RACK_7]}\n")
    status, tree, _ = run(capsys, "report", "--format", "json", *options)
    assert status == 0
    placed = {p["name"]: set(p["traits"])
              for p in json.loads(tree)["providers"]}

    table = rows(capsys, *options, "--status", "asserted,provider-config")

    said: dict[str, set[str]] = {name: set() for name in placed}
    for row in table:
        said[row["provider"]].add(row["trait"])
    assert said == placed
    assert len(placed) > 1 and all(placed.values())
