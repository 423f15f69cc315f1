"""explain answers for device providers: one row per provider and trait,
with the family and the node-device element behind it; what it asserts
per provider is what the tracker puts there."""

from __future__ import annotations

import json

import pytest

from tests.device_hosts import gpu, sriov_nic
from virtdriver import cli
from virtdriver.capabilities.traits.device_providers import (
    DEVICE_OWNERSHIP)
from virtdriver.capabilities.traits.model import TraitState
from virtdriver.conf.options import make_conf
from virtdriver.drivers.libvirt.driver import LibvirtDriver
from virtdriver.fakelibvirt.builders import HostBuilder, host_documents
from virtdriver.resource_tracker.tracker import ResourceTracker

CONF = """
[DEFAULT]
host = devnode
[pci]
device_spec = {"product_id": "154c", "traits": "fast"}
[devices]
enabled_mdev_types = nvidia-35
"""
GPU, NIC = "devnode_pci_0000_84_00_0", "devnode_pci_0000_3b_00_0"


@pytest.fixture
def uri(fake_libvirt_host):
    return fake_libvirt_host(host_documents(
        host=HostBuilder(cells=2, cores=2),
        node_devices=[gpu("0000:84:00.0", numa=1),
                      *sriov_nic("0000:3b:00.0", 2, numa=0)]),
        name="explaindevs")


@pytest.fixture
def conf_file(tmp_path):
    path = tmp_path / "virtdriver.conf"
    path.write_text(CONF)
    return str(path)


def explain_json(uri, conf_file, capsys, *args):
    status = cli.main(["explain", "--uri", uri, "--config-file", conf_file,
                       "--format", "json", *args])
    out = capsys.readouterr().out
    assert status == 0, out
    return json.loads(out)


def rows_of(answer):
    return answer if isinstance(answer, list) else answer.get(
        "explanations", answer.get("rows", answer))


def test_each_device_trait_is_a_row_of_its_provider(uri, conf_file,
                                                    capsys):
    rows = rows_of(explain_json(uri, conf_file, capsys, "--provider", GPU))
    by_trait = {row["trait"]: row for row in rows}
    assert {row["provider"] for row in rows} == {GPU}
    vendor = by_trait["CUSTOM_PCI_VENDOR_10DE"]
    assert (vendor["status"], vendor["family"]) == ("asserted",
                                                    "pci vendor")
    assert vendor["evidence"][0]["element"] == \
        "capability[@type='pci']/vendor/@id"
    assert vendor["evidence"][0]["document"] == \
        "node device pci_0000_84_00_0"
    assert by_trait["CUSTOM_MDEV_TYPE_NVIDIA_35"]["status"] == "asserted"
    assert by_trait["HW_NIC_SRIOV"]["status"] == "unasserted"


def test_a_rule_trait_is_explained_on_its_provider(uri, conf_file, capsys):
    rows = rows_of(explain_json(uri, conf_file, capsys, "CUSTOM_FAST"))
    (row,) = rows
    assert (row["provider"], row["status"], row["family"]) == (
        NIC, "asserted", "device rule")
    assert "[pci] device_spec #1" in row["sentence"]


def test_explain_agrees_with_what_the_tracker_sets(uri, tmp_path):
    path = tmp_path / "agree.conf"
    path.write_text(CONF)
    driver = LibvirtDriver(conf=make_conf(config_files=[path]), uri=uri,
                           disk_gb=None)
    driver.init_host("devnode")
    tracker = ResourceTracker(driver, state_dir=tmp_path / "state")
    tracker.update_all()
    reports = driver.provider_traits("devnode")
    owned = driver.ownership_for("devnode")
    for name in (GPU, NIC):
        asserted = reports[name].names(TraitState.ASSERTED)
        on_tree = {t for t in tracker.tree.record(name).traits
                   if owned.owns(t)}
        assert asserted == on_tree, name
        assert asserted and all(DEVICE_OWNERSHIP.owns(t) or t == "CUSTOM_FAST"
                                for t in asserted)
