"""NovaDriver passes a Nova-shaped driver through and turns Nova's
ReshapeNeeded and HypervisorUnavailable (by class name) into virtdriver's;
tested here without Nova (tests/nova_compat/run_nova_drivers.py runs
Nova's own drivers)."""

from __future__ import annotations

import pytest

from virtdriver.drivers.base import (
    DriverError, HypervisorUnavailable, ReshapeNeeded)
from virtdriver.drivers.nova_wrapper import NovaDriver
from virtdriver.resource_tracker.provider_tree import ProviderTree


class NovaException(Exception):
    pass


class ReshapeNeededNova(NovaException):
    pass


ReshapeNeededNova.__name__ = "ReshapeNeeded"


class HypervisorUnavailableNova(NovaException):
    pass


HypervisorUnavailableNova.__name__ = "HypervisorUnavailable"


class NovaShaped:
    capabilities = {"supports_multiattach": True}

    def __init__(self, virtapi):
        self.raise_ = None

    def init_host(self, host):
        self.host = host

    def get_available_nodes(self, refresh=False):
        return ["n2", "n1"]

    def update_provider_tree(self, provider_tree, nodename,
                             allocations=None):
        if self.raise_ is not None:
            raise self.raise_
        provider_tree.update_inventory(nodename, {"VCPU": {"total": 2}})


def wrapped() -> NovaDriver:
    driver = NovaDriver(driver=NovaShaped(None))
    driver.init_host("h")
    return driver


def test_it_passes_the_nova_driver_through():
    driver = wrapped()
    assert driver.capabilities == {"supports_multiattach": True}
    assert driver.get_available_nodes() == ["n1", "n2"]
    tree = ProviderTree()
    tree.new_root("n1", "0c6b6a3e-1b6b-4b8c-9a38-6f1f6a0e0a01")
    driver.update_provider_tree(tree, "n1")
    assert tree.data("n1").inventory["VCPU"]["total"] == 2
    assert driver.ownership is None   # it owns what it sets


@pytest.mark.parametrize(("nova", "ours"), [
    (ReshapeNeededNova(), ReshapeNeeded),
    (HypervisorUnavailableNova("down"), HypervisorUnavailable)])
def test_novas_exceptions_become_virtdrivers(nova, ours):
    driver = wrapped()
    driver.nova.raise_ = nova
    with pytest.raises(ours) as info:
        driver.update_provider_tree(ProviderTree(), "n1")
    assert info.value.__cause__ is nova


def test_other_exceptions_pass_unchanged():
    driver = wrapped()
    driver.nova.raise_ = KeyError("x")
    with pytest.raises(KeyError):
        driver.update_provider_tree(ProviderTree(), "n1")


def test_a_target_that_does_not_import_is_a_driver_error():
    class Missing(NovaDriver):
        nova_target = "no_such_module_anywhere:Driver"

    with pytest.raises(DriverError, match="cannot import"):
        Missing()
    with pytest.raises(DriverError, match="nova_target"):
        NovaDriver()
