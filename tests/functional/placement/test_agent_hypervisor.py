"""A driver's ``HypervisorUnavailable`` (Nova's exception, virtdriver's
class): the agent's cycle is pending (3), the node is left exactly as it
was, and the next cycle, the hypervisor back, catches up; ``agent
--once`` exits 3 (real Placement on loopback)."""

from __future__ import annotations

import importlib.metadata

import os_resource_classes as orc
from placement_helpers import Api
from stevedore.extension import ExtensionManager

from virtdriver import agent as agent_lib
from virtdriver import cli
from virtdriver.cli.errors import exit_status
from virtdriver.drivers.base import ComputeDriver, HypervisorUnavailable
from virtdriver.drivers.loader import NAMESPACE

NODE = "flaky-node"


class FlakyDriver(ComputeDriver):
    """Nova-style; its hypervisor answers while ``up``."""

    capabilities = {}
    up = True
    vcpus = 4

    def init_host(self, host):
        return None

    def get_available_nodes(self, refresh=False):
        return [NODE]

    def update_provider_tree(self, tree, nodename, allocations=None):
        if not FlakyDriver.up:
            raise HypervisorUnavailable(f"hypervisor of {nodename} is down")
        tree.update_inventory(nodename, {
            orc.VCPU: {"total": FlakyDriver.vcpus}})
        tree.add_traits(nodename, "CUSTOM_FLAKY")


def test_the_agent_leaves_the_node_and_retries_next_cycle(
        tmp_path, placement):
    lines: list[str] = []
    agent = agent_lib.Agent(lambda: agent_lib.Setup(
        key=None, directory=tmp_path, driver_name="flaky",
        make_driver=FlakyDriver, hostname="h", provider_config=None,
        target="test", connect=placement.client),
        interval=0, log=lines.append,
        classify=lambda e: exit_status(e) or 2)
    api = Api(placement)
    try:
        FlakyDriver.up, FlakyDriver.vcpus = True, 4
        assert agent.cycle().status == agent_lib.OK
        [uuid] = api.providers()
        before = (api.inventories(uuid), api.traits(uuid))

        FlakyDriver.up, FlakyDriver.vcpus = False, 8
        down = agent.cycle()
        assert down.status == agent_lib.PENDING
        assert set(down.failed) == {NODE}
        assert "nothing removed" in lines[-1]
        assert (api.inventories(uuid), api.traits(uuid)) == before

        FlakyDriver.up = True
        back = agent.cycle()
        assert back.status == agent_lib.OK, lines[-1]
        assert api.inventories(uuid)["VCPU"]["total"] == 8
        assert "CUSTOM_FLAKY" in api.traits(uuid)
    finally:
        FlakyDriver.up = True
        agent.close()


def test_agent_once_exits_3(tmp_path, placement, monkeypatch, capsys):
    monkeypatch.setitem(ExtensionManager.ENTRY_POINT_CACHE, NAMESPACE, [
        importlib.metadata.EntryPoint("flaky", f"{__name__}:FlakyDriver",
                                      NAMESPACE)])
    monkeypatch.setenv("VIRTDRIVER_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setattr(FlakyDriver, "up", False)
    status = cli.main(["agent", "--once", "--driver", "flaky",
                       "--placement-url", placement.url])
    assert status == 3
    assert Api(placement).providers() == {}
