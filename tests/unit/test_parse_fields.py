"""Every field of the hot, positionally built models against plain lxml.

The parsers build CPU models, cell CPUs, machines, host-model features and
cache banks with positional fast constructors; a field out of place would
show here, where each is read independently, by name, with XPath.
"""

from __future__ import annotations

import pytest
from lxml import etree

from virtdriver.capabilities import (
    parse_domain_capabilities, parse_host_capabilities)
from virtdriver.cpuset import parse_cpuset

from tests.corpus import corpus_files

YES_NO = {"yes": True, "no": False}


def _int(value):
    return None if value is None else int(value)


@pytest.mark.parametrize("path", corpus_files("hostcaps"),
                         ids=lambda p: p.name)
def test_host_cpus_machines_and_banks(path, corpus_dir):
    data = path.read_bytes()
    root = etree.fromstring(data)
    caps = parse_host_capabilities(data, path.name)
    expected_cpus = [
        (int(c.get("id")), _int(c.get("socket_id")), _int(c.get("die_id")),
         _int(c.get("cluster_id")), _int(c.get("core_id")),
         parse_cpuset(c.get("siblings", "")))
        for c in root.xpath("/capabilities/host/topology/cells/cell/cpus/cpu")]
    assert [(c.id, c.socket_id, c.die_id, c.cluster_id, c.core_id,
             c.siblings) for cell in caps.cells for c in cell.cpus] \
        == expected_cpus
    expected_machines = [
        (m.text.strip(), m.get("canonical"), _int(m.get("maxCpus")),
         m.get("deprecated") == "yes")
        for m in root.xpath("/capabilities/guest/arch/machine")]
    assert [(m.name, m.canonical, m.max_cpus, m.deprecated)
            for g in caps.guests for m in g.machines] == expected_machines
    expected_banks = [
        (int(b.get("id")), int(b.get("level")), b.get("type"),
         parse_cpuset(b.get("cpus")))
        for b in root.xpath("/capabilities/host/cache/bank")]
    assert [(b.id, b.level, b.type, b.cpus) for b in caps.cache] \
        == expected_banks


@pytest.mark.parametrize("path", corpus_files("domcaps"),
                         ids=lambda p: p.name)
def test_domain_cpu_models_and_host_model_features(path, corpus_dir):
    data = path.read_bytes()
    root = etree.fromstring(data)
    caps = parse_domain_capabilities(data, path.name)
    expected_models = [
        (m.text.strip(), YES_NO.get(m.get("usable")), m.get("vendor"),
         m.get("deprecated") == "yes", m.get("canonical"))
        for m in root.xpath("/domainCapabilities/cpu/mode[@name='custom']"
                            "/model")]
    assert [(m.name, m.usable, m.vendor, m.deprecated, m.canonical)
            for m in caps.cpu.custom.models] == expected_models
    expected_features = [
        (f.get("name"), f.get("policy"))
        for f in root.xpath("/domainCapabilities/cpu/mode[@name='host-model']"
                            "/feature")]
    assert [(f.name, f.policy) for f in caps.cpu.host_model.features] \
        == expected_features
    disk = root.xpath("/domainCapabilities/devices/disk")
    if disk:
        assert caps.devices.disk.supported is YES_NO[disk[0].get("supported")]
        assert caps.devices.disk.enums == tuple(
            (enum.get("name"), tuple(v.text for v in enum.findall("value")))
            for enum in disk[0].findall("enum"))
    else:
        assert caps.devices.disk.reported is False


def test_the_corpus_exercises_every_field(corpus_dir):
    """The comparisons above are not vacuous: the corpus has each field."""
    hosts = [etree.parse(str(p)) for p in corpus_files("hostcaps")]
    domains = [etree.parse(str(p)) for p in corpus_files("domcaps")]
    for attr in ("die_id", "cluster_id", "siblings"):
        assert any(t.xpath(f"//cells//cpu[@{attr}]") for t in hosts), attr
    for attr in ("canonical", "maxCpus", "deprecated"):
        assert any(t.xpath(f"//guest/arch/machine[@{attr}]") for t in hosts)
    assert any(t.xpath("//cache/bank") for t in hosts)
    for attr in ("vendor", "canonical", "deprecated"):
        assert any(t.xpath(f"//mode[@name='custom']/model[@{attr}]")
                   for t in domains), attr
    assert any(t.xpath("//mode[@name='custom']/model[@usable='no']")
               for t in domains)
