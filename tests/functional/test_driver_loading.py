"""Loading virt drivers through stevedore, against real plugins.

``tests/plugins/virtdriver_example`` (a working out-of-tree driver) and
``tests/plugins/virtdriver_broken`` (one whose module fails to import) are
real distributions; this module registers them for itself
(:func:`tests.plugins.registry.registered`: their dist-info in a temporary
directory on ``sys.path``, nothing installed), and the tests find them
through their ``virtdriver.drivers`` entry points exactly as a compute
service would.
"""

from __future__ import annotations

import importlib.metadata
import io
import json
import os
import subprocess
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import os_resource_classes as orc
import os_traits
import pytest
from stevedore.extension import ExtensionManager

from tests.plugins.registry import registered
from virtdriver import cli
from virtdriver.drivers.base import (
    ComputeDriver, DriverError, NodeCapabilities, NodeNotFoundError)
from virtdriver.drivers.identity import root_uuid
from virtdriver.drivers.loader import (
    NAMESPACE, DriverInfo, DriverLoadError, UnknownDriverError,
    available_drivers, load_driver, load_driver_class)
from virtdriver.render.drivers import render_drivers

BROKEN_TARGET = "virtdriver_broken.driver:BrokenDriver"
EXAMPLE_TARGET = "virtdriver_example.driver:ExampleDriver"
HOST = "compute-1"


@pytest.fixture(autouse=True, scope="module")
def plugin_paths(tmp_path_factory: pytest.TempPathFactory):
    """The two test plugins, registered for this module's tests; the
    paths a fresh process needs on ``PYTHONPATH``."""
    with registered(tmp_path_factory.mktemp("plugins")) as paths:
        yield paths


def _by_name(infos: Iterable[DriverInfo]) -> dict[str, DriverInfo]:
    return {info.name: info for info in infos}


# --- loading the out-of-tree example by name ------------------------------

def test_example_loads_by_name_as_its_own_class() -> None:
    from virtdriver_example.driver import ExampleDriver

    driver = load_driver("example")

    assert type(driver) is ExampleDriver
    assert load_driver_class("example") is ExampleDriver


def test_example_reports_one_node_with_traits_and_evidence() -> None:
    driver = load_driver("example")
    driver.init_host(HOST)

    assert driver.get_available_nodes() == [HOST]
    caps = driver.node_capabilities(HOST)
    assert caps.nodename == HOST
    assert caps.traits is not None
    assert caps.traits.asserted == {os_traits.HW_CPU_X86_AVX2,
                                    "CUSTOM_EXAMPLE_TIER_GOLD"}
    assert caps.traits.unasserted == {os_traits.HW_CPU_X86_AVX512F}
    evidence = caps.traits.results[os_traits.HW_CPU_X86_AVX512F].evidence
    assert "lacks CPU flag 'avx512f'" in evidence[0].sentence()
    assert caps.facts["vcpus"] == 8
    assert driver.capabilities["supports_image_type_raw"] is True


def test_keyword_arguments_reach_the_driver_constructor() -> None:
    driver = load_driver("example", cpu_flags=["AVX512F"], tier="silver 2")
    driver.init_host(HOST)

    traits = driver.node_capabilities(HOST).traits
    assert traits is not None
    assert traits.asserted == {os_traits.HW_CPU_X86_AVX512F,
                               "CUSTOM_EXAMPLE_TIER_SILVER_2"}


def test_every_trait_the_example_reports_is_owned_by_the_driver() -> None:
    driver = load_driver("example", cpu_flags=["avx2", "avx512f"])
    driver.init_host(HOST)

    traits = driver.node_capabilities(HOST).traits
    assert traits is not None and traits.invalid == ()
    assert [name for name in traits.results
            if not driver.ownership.owns(name)] == []


def test_unknown_node_names_the_node_and_the_drivers_nodes() -> None:
    driver = load_driver("example")
    driver.init_host(HOST)

    with pytest.raises(NodeNotFoundError) as info:
        driver.node_capabilities("compute-2")

    assert info.value.available == (HOST,)
    assert "'compute-2'" in str(info.value) and HOST in str(info.value)


# --- update_provider_tree against a tree with the contract's calls --------

@dataclass
class _Provider:
    uuid: str
    traits: set[str] = field(default_factory=set)
    inventory: dict[str, Mapping[str, Any]] = field(default_factory=dict)


class _Tree:
    """The ProviderTreeLike calls, recorded: enough to watch a driver."""

    def __init__(self) -> None:
        self.providers: dict[str, _Provider] = {}

    def new_root(self, name: str, uuid: str) -> str:
        self.providers[name] = _Provider(uuid)
        return uuid

    def new_child(self, name: str, parent: str,
                  uuid: str | None = None) -> str:
        raise AssertionError("the example driver has no children")

    def exists(self, provider: str) -> bool:
        return provider in self.providers

    def data(self, provider: str) -> _Provider:
        return self.providers[provider]

    def update_inventory(self, provider: str,
                         inventory: Mapping[str, Mapping[str, Any]]) -> bool:
        self.providers[provider].inventory = dict(inventory)
        return True

    def update_traits(self, provider: str, traits: Iterable[str]) -> bool:
        self.providers[provider].traits = set(traits)
        return True


def test_update_provider_tree_creates_the_node_with_inventory() -> None:
    driver = load_driver("example", vcpus=16)
    driver.init_host(HOST)
    tree = _Tree()

    driver.update_provider_tree(tree, HOST)

    node = tree.providers[HOST]
    assert node.uuid == root_uuid("example", HOST)
    assert driver.recognizes_root(HOST, node.uuid)
    assert node.inventory[orc.VCPU]["total"] == 16
    assert set(node.inventory) == {orc.VCPU, orc.MEMORY_MB, orc.DISK_GB}
    assert node.traits == {os_traits.HW_CPU_X86_AVX2,
                           "CUSTOM_EXAMPLE_TIER_GOLD"}


def test_update_provider_tree_changes_only_owned_traits() -> None:
    driver = load_driver("example")
    driver.init_host(HOST)
    tree = _Tree()
    tree.new_root(HOST, "uuid-from-before")
    foreign = {"CUSTOM_OPERATOR_RACK_7", os_traits.COMPUTE_STATUS_DISABLED}
    tree.providers[HOST].traits = foreign | {
        os_traits.HW_CPU_X86_AVX512F,      # owned, now unasserted
        "CUSTOM_EXAMPLE_TIER_SILVER"}      # owned by prefix, no longer reported

    driver.update_provider_tree(tree, HOST)

    assert tree.providers[HOST].uuid == "uuid-from-before"
    assert tree.providers[HOST].traits == foreign | {
        os_traits.HW_CPU_X86_AVX2, "CUSTOM_EXAMPLE_TIER_GOLD"}


# --- failures: broken plugin, unknown name, not a driver ------------------

def test_broken_plugin_names_entry_point_target_and_import_error() -> None:
    with pytest.raises(DriverLoadError) as info:
        load_driver("broken")

    err = info.value
    assert (err.name, err.target) == ("broken", BROKEN_TARGET)
    assert err.provider == (
        f"virtdriver-broken {importlib.metadata.version('virtdriver-broken')}")
    assert isinstance(err.__cause__, ModuleNotFoundError)
    message = str(err)
    assert "'broken'" in message and BROKEN_TARGET in message
    assert "ModuleNotFoundError: No module named 'virtdriver_broken_sdk'" \
        in message
    assert "virtdriver drivers" in message


def test_broken_plugin_does_not_stop_the_example_loading() -> None:
    with pytest.raises(DriverLoadError):
        load_driver("broken")

    assert isinstance(load_driver("example"), ComputeDriver)


def test_unknown_name_lists_the_available_names() -> None:
    with pytest.raises(UnknownDriverError) as info:
        load_driver("exampel")

    err = info.value
    assert err.name == "exampel"
    assert {"example", "broken"} <= set(err.available)
    assert err.available == tuple(sorted(err.available))
    assert "'exampel'" in str(err)
    assert "example" in str(err).split("available:")[1]


def test_constructor_type_error_is_a_load_error_naming_the_arguments() -> None:
    with pytest.raises(DriverLoadError) as info:
        load_driver("example", vcpu=4)

    assert isinstance(info.value.__cause__, TypeError)
    assert "vcpu" in str(info.value) and "'example'" in str(info.value)


def test_driver_errors_from_the_constructor_pass_through() -> None:
    with pytest.raises(DriverError) as info:
        load_driver("example", tier="***")

    assert not isinstance(info.value, DriverLoadError)
    assert "'***'" in str(info.value)


class HalfDriver(ComputeDriver):
    """Declares nothing and implements nothing: abstract."""


@pytest.fixture
def synthetic_entry_points(monkeypatch: pytest.MonkeyPatch) -> None:
    """Replace stevedore's view of the namespace with targets that are not
    drivers (plus the example, to show it still loads beside them)."""
    eps = [
        importlib.metadata.EntryPoint("ordered", "collections:OrderedDict",
                                      NAMESPACE),
        importlib.metadata.EntryPoint("pi", "math:pi", NAMESPACE),
        importlib.metadata.EntryPoint(
            "half", f"{__name__}:HalfDriver", NAMESPACE),
        importlib.metadata.EntryPoint("example", EXAMPLE_TARGET, NAMESPACE),
    ]
    monkeypatch.setitem(ExtensionManager.ENTRY_POINT_CACHE, NAMESPACE, eps)


@pytest.mark.usefixtures("synthetic_entry_points")
@pytest.mark.parametrize(("name", "reason"), [
    ("ordered", "class OrderedDict, not a subclass of "
                "virtdriver.drivers.base.ComputeDriver"),
    ("pi", "float object, not a subclass"),
    ("half", "HalfDriver does not implement the abstract ComputeDriver "
             "members: capabilities, get_available_nodes, init_host, "
             "update_provider_tree"),
])
def test_target_that_is_not_a_concrete_driver_is_refused(
        name: str, reason: str) -> None:
    with pytest.raises(DriverLoadError) as info:
        load_driver_class(name)

    assert info.value.name == name
    assert reason in info.value.reason


@pytest.mark.usefixtures("synthetic_entry_points")
def test_listing_reports_non_drivers_and_still_loads_the_rest() -> None:
    infos = _by_name(available_drivers())

    assert sorted(infos) == ["example", "half", "ordered", "pi"]
    assert infos["example"].ok
    assert "not a subclass" in (infos["ordered"].error or "")
    assert "does not implement" in (infos["half"].error or "")


def test_two_entry_points_with_one_name_are_refused_naming_both(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(ExtensionManager.ENTRY_POINT_CACHE, NAMESPACE, [
        importlib.metadata.EntryPoint("example", EXAMPLE_TARGET, NAMESPACE),
        importlib.metadata.EntryPoint(
            "example", f"{__name__}:HalfDriver", NAMESPACE)])

    with pytest.raises(DriverLoadError) as info:
        load_driver_class("example")

    assert EXAMPLE_TARGET in info.value.target
    assert f"{__name__}:HalfDriver" in info.value.target
    assert "virtdriver-example" in str(info.value)
    assert "2 entry points share this name" in info.value.reason


# --- listing --------------------------------------------------------------

def test_available_drivers_lists_distribution_version_and_errors() -> None:
    infos = _by_name(available_drivers())

    example = infos["example"]
    assert (example.target, example.distribution, example.version) == (
        EXAMPLE_TARGET, "virtdriver-example",
        importlib.metadata.version("virtdriver-example"))
    assert example.ok and example.error is None
    broken = infos["broken"]
    assert not broken.ok
    assert broken.distribution == "virtdriver-broken"
    assert broken.error == ("ModuleNotFoundError: No module named "
                            "'virtdriver_broken_sdk'")
    # The in-tree drivers are registered by virtdriver itself; whether
    # their modules exist yet does not matter to the listing.
    for name in ("libvirt", "fake", "ironic"):
        assert infos[name].distribution == "virtdriver"
    assert list(infos) == sorted(infos)


def test_cli_drivers_text_table() -> None:
    out = io.StringIO()

    status = cli.run_drivers("text", out)

    lines = out.getvalue().splitlines()
    assert status == 0
    assert lines[0].split() == ["NAME", "TARGET", "PROVIDED", "BY", "STATUS"]
    rows = {line.split()[0]: line for line in lines[1:]}
    version = importlib.metadata.version("virtdriver-example")
    assert rows["example"].split()[1:] == [
        EXAMPLE_TARGET, "virtdriver-example", version, "ok"]
    assert rows["broken"].endswith(
        "load error: ModuleNotFoundError: No module named "
        "'virtdriver_broken_sdk'")
    # Columns line up: every target starts where the header's does.
    column = lines[0].index("TARGET")
    assert rows["example"].index(EXAMPLE_TARGET) == column
    assert rows["broken"].index(BROKEN_TARGET) == column


def test_cli_drivers_json_in_a_fresh_process(plugin_paths: list[str]
                                             ) -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [*plugin_paths, os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run(
        [sys.executable, "-m", "virtdriver.cli", "drivers", "--format",
         "json"], capture_output=True, text=True, check=False, timeout=120,
        env=env)

    assert done.returncode == 0, done.stderr
    entries = {entry["name"]: entry for entry in json.loads(done.stdout)}
    assert entries["example"] == {
        "name": "example", "target": EXAMPLE_TARGET,
        "distribution": "virtdriver-example",
        "version": importlib.metadata.version("virtdriver-example"),
        "ok": True, "error": None, "note": None}
    assert entries["broken"]["ok"] is False
    assert "virtdriver_broken_sdk" in entries["broken"]["error"]


def test_render_drivers_says_when_none_are_installed() -> None:
    assert "no virt drivers installed" in render_drivers([], "text")
    assert json.loads(render_drivers([], "json")) == []


# --- the contract's small parts -------------------------------------------

def test_node_capabilities_facts_are_read_only_copies() -> None:
    facts = {"arch": "x86_64"}
    caps = NodeCapabilities("n1", facts=facts)
    facts["arch"] = "aarch64"

    assert caps.facts["arch"] == "x86_64"
    with pytest.raises(TypeError):
        caps.facts["arch"] = "ppc64le"  # type: ignore[index]


def test_node_not_found_lists_a_few_nodes_and_the_count():
    from virtdriver.drivers.base import NodeNotFoundError
    many = NodeNotFoundError("x", [f"n{i:05d}" for i in range(10000)])
    assert "n00000, n00001" in str(many) and "(10000 in all)" in str(many)
    assert len(str(many)) < 400
    few = NodeNotFoundError("x", ["b", "a"])
    assert "(its nodes: a, b)" in str(few)
