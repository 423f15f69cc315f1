"""The fast paths of the parsers refuse exactly what the slow ones did.

Each bad value is planted into a real corpus document at one element; the
parse must fail with CapabilityXMLError naming that element's line and the
attribute, never succeed and never raise anything else.
"""

from __future__ import annotations

import pytest
from lxml import etree

from virtdriver.capabilities import (
    CapabilityXMLError, parse_domain_capabilities, parse_host_capabilities)

from tests.corpus import CORPUS

REAL_HOST = "hostcaps/caps-qemu-real-full.xml"
BAD_INTEGERS = ["x", "-1", "", "1.5", "9" * 21, "\u0663", "0x10", "1_0"]


def _plant(name: str, xpath: str, attr: str, value: str) -> tuple[bytes, int]:
    root = etree.fromstring((CORPUS / name).read_bytes())
    target = root.xpath(xpath)[-1]  # the last one: earlier ones parse fine
    target.set(attr, value)
    return etree.tostring(root), target.sourceline


@pytest.mark.parametrize("value", BAD_INTEGERS)
@pytest.mark.parametrize("xpath,attr", [
    ("//cells/cell/cpus/cpu", "id"),
    ("//cells/cell/cpus/cpu", "socket_id"),
    ("//cells/cell/cpus/cpu", "die_id"),
    ("//cells/cell/cpus/cpu", "cluster_id"),
    ("//cells/cell/cpus/cpu", "core_id"),
    ("//guest/arch/machine", "maxCpus"),
    ("//cache/bank", "size"),
    ("//cells/cell/pages", "size"),
])
def test_bad_integer_attributes_are_refused_at_their_line(xpath, attr, value,
                                                           corpus_dir):
    data, line = _plant(REAL_HOST, xpath, attr, value)
    with pytest.raises(CapabilityXMLError) as info:
        parse_host_capabilities(data, "planted.xml")
    assert info.value.line == line
    assert f"attribute {attr}" in info.value.reason


@pytest.mark.parametrize("value", ["5-1", "0,,1", "70000", "x", "1-"])
def test_bad_siblings_are_refused_at_their_line(value, corpus_dir):
    data, line = _plant(REAL_HOST, "//cells/cell/cpus/cpu", "siblings", value)
    with pytest.raises(CapabilityXMLError) as info:
        parse_host_capabilities(data, "planted.xml")
    assert info.value.line == line
    assert "attribute siblings: invalid CPU set" in info.value.reason


def test_a_missing_cpu_id_is_refused_before_its_other_attributes(corpus_dir):
    root = etree.fromstring((CORPUS / REAL_HOST).read_bytes())
    cpu = root.xpath("//cells/cell/cpus/cpu")[3]
    del cpu.attrib["id"]
    cpu.set("core_id", "x")
    with pytest.raises(CapabilityXMLError) as info:
        parse_host_capabilities(etree.tostring(root), "planted.xml")
    assert info.value.reason == "<cpu>: required attribute id is missing"
    assert info.value.line == cpu.sourceline


def test_padded_integers_are_still_accepted(corpus_dir):
    data, _ = _plant(REAL_HOST, "//cells/cell/cpus/cpu", "core_id", " 7 ")
    caps = parse_host_capabilities(data, "planted.xml")
    assert caps.cells[-1].cpus[-1].core_id == 7


@pytest.mark.parametrize("value", ["x", "-1", "9" * 21])
def test_bad_sev_and_sgx_values_name_their_element(value, corpus_dir):
    name = "domcaps/qemu_11.0.0-q35.x86_64+sgx.xml"
    root = etree.fromstring((CORPUS / name).read_bytes())
    section = root.xpath("//sgx/sections/section")[-1]
    section.set("size", value)
    with pytest.raises(CapabilityXMLError) as info:
        parse_domain_capabilities(etree.tostring(root), "planted.xml")
    assert info.value.line == section.sourceline
    assert "<section>: attribute size" in info.value.reason


def test_exclamation_marks_alone_do_not_trip_the_dtd_scan():
    caps = parse_host_capabilities(
        b"<capabilities><host><uuid>yes!</uuid></host></capabilities>")
    assert caps.uuid == "yes!"


@pytest.mark.parametrize("doc", [
    b"<!-- ! --><!DOCTYPE capabilities><capabilities/>",
    b"<?xml version='1.0'?>\n!\n<!ENTITY x 'y'><capabilities/>",
])
def test_a_dtd_after_other_exclamation_marks_is_still_refused(doc):
    with pytest.raises(CapabilityXMLError) as info:
        parse_host_capabilities(doc, "evil.xml")
    assert "DTD" in info.value.reason


@pytest.mark.parametrize("doc", [b"", b" \t\n\r\x0b\x0c", "  \n", bytearray(b" ")])
def test_blank_documents_of_every_kind_are_empty(doc):
    with pytest.raises(CapabilityXMLError, match="document is empty"):
        parse_domain_capabilities(doc, "blank.xml")
