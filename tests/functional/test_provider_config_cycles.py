"""Provider config files over real tracker cycles (the fake driver): what
the files apply survives the driver's updates, deleting an entry removes
it on the next cycle, a restart keeps the record, the driver's own traits
are refused.

Each cycle is the tracker's own ``update_all()`` with
``provider_config=`` the directory, as production runs it.
"""

from __future__ import annotations

import os_resource_classes as orc
import os_traits
import pytest

from virtdriver.drivers.fake import FakeDriver
from virtdriver.provider_config import ProviderConfigError, RecordFile
from virtdriver.providers.inventory import Inventory
from virtdriver.resource_tracker.tracker import ResourceTracker

NODE = "fake-numa2-ht"
CELL = f"{NODE}_NUMA0"
HEAD = "meta: {schema_version: '1.0'}\nproviders:\n"


class Service:
    """A tracker reading provider config files, as a compute service runs
    it: each cycle is ``update_all()``; the tracker plans and applies the
    files per node inside the node's update transaction."""

    def __init__(self, tmp_path, host="numa2-ht"):
        self.state = tmp_path / "state"
        self.config = tmp_path / "provider_config"
        self.config.mkdir(exist_ok=True)
        self.driver = FakeDriver(host)
        self.driver.init_host("compute-1")
        self.tracker = ResourceTracker(self.driver, state_dir=self.state,
                                       provider_config=self.config)
        self.records = RecordFile(self.state, self.tracker.driver_name)

    def write(self, text, name="site.yaml"):
        (self.config / name).write_text(HEAD + text)

    def cycle(self):
        """One update; a refusal of the files is raised for the tests
        (the tracker logs it and keeps the driver's update)."""
        self.tracker.update_all()
        problem = self.tracker.provider_config.problem
        if problem is not None:
            raise ProviderConfigError(problem)

    def traits(self, name):
        return self.tracker.tree.record(name).traits


SITE = """\
  - identification: {uuid: $COMPUTE_NODE}
    traits: {additional: [CUSTOM_RACK_7, CUSTOM_POWER_CAPPED]}
  - identification: {name: fake-numa2-ht_NUMA0}
    inventories:
      additional:
        - CUSTOM_FPGA: {total: 2, max_unit: 1}
    traits: {additional: [CUSTOM_FPGA_HOST]}
"""


def test_applied_traits_and_inventories_survive_the_drivers_updates(
        tmp_path):
    service = Service(tmp_path)
    service.write(SITE)
    for _ in range(3):
        service.cycle()
        root = service.traits(NODE)
        assert {"CUSTOM_RACK_7", "CUSTOM_POWER_CAPPED",
                os_traits.COMPUTE_NODE} <= root
        assert "CUSTOM_FPGA_HOST" in service.traits(CELL)
        cell = service.tracker.tree.record(CELL).inventory
        # The driver rewrites the cell's inventory; the file's is added.
        assert cell["CUSTOM_FPGA"] == Inventory(2, max_unit=1)
        assert {orc.VCPU, orc.MEMORY_MB} < set(cell)
    # The tracker counts the files' traits as foreign: no drift, no ledger.
    ledger = service.tracker.ledger
    assert not any(t.startswith("CUSTOM_") for t in
                   ledger.traits(service.tracker.tree.record(NODE).uuid))


def test_deleting_entries_removes_them_on_the_next_cycle(tmp_path):
    service = Service(tmp_path)
    service.write(SITE)
    service.cycle()
    service.write("""\
  - identification: {uuid: $COMPUTE_NODE}
    traits: {additional: [CUSTOM_RACK_7]}
""")
    service.cycle()
    assert "CUSTOM_RACK_7" in service.traits(NODE)
    assert "CUSTOM_POWER_CAPPED" not in service.traits(NODE)
    assert "CUSTOM_FPGA_HOST" not in service.traits(CELL)
    assert "CUSTOM_FPGA" not in service.tracker.tree.record(CELL).inventory
    (service.config / "site.yaml").unlink()
    service.cycle()
    assert not any(t.startswith("CUSTOM_") for t in service.traits(NODE))
    assert len(service.records.read()) == 0


def test_a_restart_keeps_the_record_and_deletion_still_works(tmp_path):
    first = Service(tmp_path)
    first.write(SITE)
    first.cycle()
    uuid = first.tracker.tree.record(NODE).uuid
    assert first.records.read().trait_source(uuid, "CUSTOM_RACK_7").line == 4

    second = Service(tmp_path)                   # a new process, new tree
    second.cycle()
    assert "CUSTOM_RACK_7" in second.traits(NODE)
    assert second.records.read().provider(uuid).traits[
        "CUSTOM_RACK_7"].added
    second.write("")
    second.cycle()
    assert "CUSTOM_RACK_7" not in second.traits(NODE)


def test_a_trait_the_driver_owns_is_refused_and_nothing_changes(tmp_path):
    host = {"name": "box", "cells": 1, "traits": ["CUSTOM_RACK_7"]}
    service = Service(tmp_path, host=host)
    service.write("""\
  - identification: {name: box}
    traits: {additional: [CUSTOM_GOLD]}
""")
    service.cycle()
    before = service.records.read()
    service.write("""\
  - identification: {uuid: $COMPUTE_NODE}
    traits: {additional: [CUSTOM_RACK_7]}
""")
    with pytest.raises(ProviderConfigError, match=r"site\.yaml:4: "
                       r"providers\[0\]\.traits: CUSTOM_RACK_7 is owned by "
                       "the driver on provider 'box'"):
        service.cycle()
    # Refused: nothing applied, nothing removed, the record unchanged.
    assert "CUSTOM_GOLD" in service.traits("box")
    assert service.records.read() == before


def test_a_class_the_driver_reports_is_refused_on_any_of_its_providers(
        tmp_path):
    service = Service(tmp_path)
    service.cycle()
    reported = "CUSTOM_MEM_PAGE_SIZE_2048"     # the driver's, on the cells
    assert reported in service.tracker.tree.record(CELL).inventory
    service.write(f"""\
  - identification: {{name: {NODE}}}
    inventories:
      additional:
        - {reported}: {{total: 4}}
""")
    with pytest.raises(ProviderConfigError, match=f"site\\.yaml:6: "
                       rf"providers\[0\]\.inventories: {reported} is a "
                       "resource class the driver reports on provider"):
        service.cycle()
    assert reported not in service.tracker.tree.record(NODE).inventory


def test_a_failed_update_applies_nothing_and_the_retry_applies_it(
        tmp_path, monkeypatch):
    service = Service(tmp_path)
    service.cycle()
    service.write(SITE)
    before = service.tracker.tree.to_json()

    def full(*args):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr("os.replace", full)
    with pytest.raises(Exception, match="cannot write"):
        service.cycle()
    assert service.tracker.tree.to_json() == before
    monkeypatch.undo()
    service.cycle()
    assert "CUSTOM_RACK_7" in service.traits(NODE)
    assert "CUSTOM_FPGA_HOST" in service.traits(CELL)
