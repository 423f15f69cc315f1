"""The driver constructor contract, and the commands that load a driver.

Every command builds its driver one way
(:func:`virtdriver.drivers.loader.build_driver` through
:mod:`virtdriver.cli.loading`): a constructor gets the offered arguments
its signature names, a required one nobody offers is refused by name,
``virtdriver drivers`` says ``ok`` only for what it could build, a
driver's own bug is reported as the driver's, and ``explain`` answers from
any driver's trait report.  The drivers here are small classes of this
module registered by name; the example plugin is registered beside them
(:func:`tests.plugins.registry.registered`).
"""

from __future__ import annotations

import importlib.metadata
import json
import pathlib
import socket
from collections.abc import Mapping
from typing import Any

import os_traits
import pytest
from stevedore.extension import ExtensionManager

from tests.plugins.registry import registered
from virtdriver import cli
from virtdriver.capabilities.traits.derive import TraitReport
from virtdriver.capabilities.traits.ownership import Ownership
from virtdriver.drivers.base import ComputeDriver, DriverError, NodeCapabilities
from virtdriver.drivers.identity import root_uuid
from virtdriver.drivers.loader import (
    NAMESPACE, DriverInfo, DriverLoadError, available_drivers, build_driver)
from virtdriver.render.drivers import render_drivers

EXAMPLE_TARGET = "virtdriver_example.driver:ExampleDriver"
HOST = "compute-1"


@pytest.fixture(autouse=True, scope="module")
def example_registered(tmp_path_factory: pytest.TempPathFactory):
    """The example plugin, registered for this module's tests."""
    with registered(tmp_path_factory.mktemp("plugins"),
                    ["virtdriver_example"]):
        yield


def _by_name(infos: list[DriverInfo]) -> dict[str, DriverInfo]:
    return {info.name: info for info in infos}


class OneNode(ComputeDriver):
    """A complete driver with one node and no owned traits."""

    capabilities: Mapping[str, bool] = {}
    ownership = Ownership(frozenset(), ())
    root_uuid_kind = "one-node"

    def __init__(self, *, conf: object = None) -> None:
        self.conf = conf
        self.host = ""

    def init_host(self, host: str) -> None:
        self.host = host

    def get_available_nodes(self, refresh: bool = False) -> list[str]:
        return [self.host]

    def node_capabilities(self, nodename: str) -> NodeCapabilities:
        return NodeCapabilities(nodename, TraitReport({}, self.ownership))

    def update_provider_tree(self, tree, nodename: str,
                             allocations: Any = None) -> None:
        if not tree.exists(nodename):
            tree.new_root(nodename, root_uuid(self.root_uuid_kind, nodename))


class NeedsEndpoint(OneNode):
    def __init__(self, endpoint: str, *, conf: object = None) -> None:
        super().__init__(conf=conf)


class TakesAll(OneNode):
    def __init__(self, **kwargs: object) -> None:
        super().__init__()
        self.given = kwargs


class CrashesWhenBuilt(OneNode):
    def __init__(self) -> None:
        raise KeyError("region")


class RefusesNoOptions(OneNode):
    def __init__(self, *, conf: object = None) -> None:
        raise DriverError("one-node driver: no region; pass region=...")


class CrashesInUpdate(OneNode):
    def update_provider_tree(self, tree, nodename: str,
                             allocations: Any = None) -> None:
        super().update_provider_tree(tree, nodename)
        self._count_cells()

    def _count_cells(self) -> float:
        return 1 / 0


class NoTraits(OneNode):
    def node_capabilities(self, nodename: str) -> NodeCapabilities:
        return NodeCapabilities(nodename)


CONTRACT = {"needy": "NeedsEndpoint", "takes-all": "TakesAll",
            "crash-build": "CrashesWhenBuilt", "refuses": "RefusesNoOptions",
            "crash-update": "CrashesInUpdate", "no-traits": "NoTraits",
            "one-node": "OneNode"}


@pytest.fixture
def contract_drivers(monkeypatch: pytest.MonkeyPatch,
                     tmp_path: pathlib.Path) -> None:
    """The drivers above registered by name (and the example beside them),
    for in-process commands with a state directory of their own."""
    eps = [importlib.metadata.EntryPoint(name, f"{__name__}:{attr}",
                                         NAMESPACE)
           for name, attr in CONTRACT.items()]
    eps.append(importlib.metadata.EntryPoint("example", EXAMPLE_TARGET,
                                             NAMESPACE))
    monkeypatch.setitem(ExtensionManager.ENTRY_POINT_CACHE, NAMESPACE, eps)
    monkeypatch.setenv("VIRTDRIVER_STATE_DIR", str(tmp_path / "state"))


def test_build_driver_passes_only_what_the_constructor_names() -> None:
    driver = build_driver("example", {"conf": object(), "uri": None,
                                      "tier": "silver"})
    driver.init_host(HOST)

    traits = driver.node_capabilities(HOST).traits
    assert traits is not None
    assert "CUSTOM_EXAMPLE_TIER_SILVER" in traits.asserted


@pytest.mark.usefixtures("contract_drivers")
def test_a_kwargs_constructor_is_offered_everything() -> None:
    driver = build_driver("takes-all", {"conf": "c", "uri": "u"})

    assert driver.given == {"conf": "c", "uri": "u"}


@pytest.mark.usefixtures("contract_drivers")
def test_a_required_argument_nobody_offers_is_refused_naming_it() -> None:
    with pytest.raises(DriverLoadError) as info:
        build_driver("needy", {"conf": None})

    assert "requires 'endpoint'" in info.value.reason
    assert "offers this driver: conf" in info.value.reason
    assert info.value.__cause__ is None  # found before calling it


@pytest.mark.usefixtures("contract_drivers")
def test_listing_says_ok_only_for_what_can_be_built_here() -> None:
    infos = _by_name(available_drivers(offer=lambda name: {"conf": None}))

    assert infos["one-node"].ok and infos["one-node"].note is None
    assert infos["example"].ok
    assert infos["takes-all"].ok
    assert not infos["needy"].ok and "'endpoint'" in infos["needy"].error
    assert infos["crash-build"].error == (
        "constructing CrashesWhenBuilt with no arguments raised "
        "KeyError: 'region'")
    refuses = infos["refuses"]
    assert refuses.ok and refuses.note == (
        "one-node driver: no region; pass region=...")
    assert "ok (with no options: one-node driver: no region" in \
        render_drivers([refuses], "text")
    # Without an offer nothing is built, but signatures are still checked.
    unbuilt = _by_name(available_drivers())
    assert unbuilt["crash-build"].ok
    assert not unbuilt["needy"].ok


@pytest.mark.usefixtures("contract_drivers")
def test_cli_drivers_builds_each_driver(capsys) -> None:
    assert cli.main(["drivers", "--format", "json"]) == 0

    rows = {row["name"]: row for row in json.loads(capsys.readouterr().out)}
    assert rows["example"]["ok"] and rows["one-node"]["ok"]
    assert "KeyError: 'region'" in rows["crash-build"]["error"]
    assert "requires 'endpoint'" in rows["needy"]["error"]


@pytest.mark.usefixtures("contract_drivers")
def test_report_and_claims_build_the_keyword_only_example(capsys) -> None:
    assert cli.main(["report", "--driver", "example"]) == 0
    assert "CUSTOM_EXAMPLE_TIER_GOLD HW_CPU_X86_AVX2" in \
        capsys.readouterr().out
    assert cli.main(["claims", "--driver", "example"]) == 0
    assert "no claims held" in capsys.readouterr().out


@pytest.mark.usefixtures("contract_drivers")
@pytest.mark.parametrize("debug", [False, True])
def test_a_drivers_bug_in_update_is_its_failure_not_bad_input(
        capsys, debug: bool) -> None:
    status = cli.main(["report", "--driver", "crash-update"]
                      + (["--debug"] if debug else []))

    err = capsys.readouterr().err
    assert status == cli.EXIT_INTERNAL
    assert (f"virtdriver: driver 'crash-update' ({__name__}:CrashesInUpdate)"
            " failed: on node ") in err
    assert "ZeroDivisionError: division by zero" in err
    assert "bug in the driver, not in the input" in err
    assert ("Traceback" in err and "in _count_cells" in err) is debug
    assert ("rerun with --debug" in err) is not debug


@pytest.mark.usefixtures("contract_drivers")
def test_a_constructor_that_crashes_is_the_drivers_failure(capsys) -> None:
    assert cli.main(["sync", "--driver", "crash-build"]) == cli.EXIT_INTERNAL
    err = capsys.readouterr().err
    assert "driver 'crash-build'" in err and "KeyError: 'region'" in err
    assert "bug in the driver" in err


@pytest.mark.usefixtures("contract_drivers")
def test_explain_answers_from_any_drivers_trait_report(capsys) -> None:
    status = cli.main(["explain", "--driver", "example", "--format", "json",
                       os_traits.HW_CPU_X86_AVX512F])

    [answer] = json.loads(capsys.readouterr().out)
    assert status == 0
    assert (answer["trait"], answer["status"], answer["family"]) == (
        os_traits.HW_CPU_X86_AVX512F, "unasserted", "example hardware")
    assert "lacks CPU flag 'avx512f'" in answer["sentence"]


@pytest.mark.usefixtures("contract_drivers")
def test_explain_finds_a_provider_config_entry_by_the_drivers_root_uuid(
        capsys, tmp_path: pathlib.Path) -> None:
    node = socket.gethostname()
    config = tmp_path / "provider_config"
    config.mkdir()
    (config / "site.yaml").write_text(
        "meta:\n  schema_version: '1.0'\nproviders:\n"
        "  - identification:\n"
        f"      uuid: {root_uuid('example', node)}\n"
        "    traits:\n      additional: [CUSTOM_RACK_7]\n")
    conf = tmp_path / "virtdriver.conf"
    conf.write_text(f"[compute]\nprovider_config_location = {config}\n")

    status = cli.main(["explain", "--driver", "example", "--config-file",
                       str(conf), "--format", "json", "CUSTOM_RACK_7"])

    [answer] = json.loads(capsys.readouterr().out)
    assert status == 0
    assert answer["status"] == "provider config"
    assert answer["provider_config"]["provider"] == (
        f"compute node {node!r} (by uuid)")


@pytest.mark.usefixtures("contract_drivers")
def test_explain_refuses_a_driver_that_reports_no_traits(capsys) -> None:
    assert cli.main(["explain", "--driver", "no-traits"]) == cli.EXIT_FAILURE
    assert "reports no traits" in capsys.readouterr().err
