"""parse_document's fed parse: the same trees and the same refusals as
fromstring(), and the DTD check on the tree wherever the byte scan is blind.
"""

from __future__ import annotations

import pytest
from lxml import etree

from virtdriver.capabilities import (
    CapabilityXMLError, parse_domain_capabilities, parse_host_capabilities)
from virtdriver.capabilities.xmlsafe import parse_document

from tests.corpus import corpus_files

DTD_DOC = ("<?xml version='1.0'?><!DOCTYPE capabilities [<!ENTITY e 'x'>]>"
           "<capabilities><host><uuid>&e;</uuid></host></capabilities>")


@pytest.mark.parametrize("codec", ["utf-16-le", "utf-16-be", "utf-32-le",
                                   "utf-32-be"])
def test_a_dtd_in_an_encoding_without_bom_is_refused(codec):
    data = DTD_DOC.encode(codec)
    assert b"<!" not in data  # the byte scan cannot see it
    with pytest.raises(CapabilityXMLError) as info:
        parse_host_capabilities(data, "bom-less.xml")
    assert "declares a DTD" in info.value.reason


def test_an_undefined_entity_keeps_fromstrings_precise_error():
    with pytest.raises(CapabilityXMLError) as info:
        parse_host_capabilities(
            b"<capabilities>\n<host><uuid>&foo;</uuid></host></capabilities>",
            "entity.xml")
    assert "Entity 'foo' not defined" in info.value.reason
    assert info.value.line == 2


@pytest.mark.parametrize("bad", [b"<capabilities><host>", b"<a><b></a>",
                                 b"<capabilities/><x/>", b"<a>&foo;</a>"])
def test_a_refused_document_leaves_the_next_parse_intact(bad):
    with pytest.raises(CapabilityXMLError, match="malformed XML"):
        parse_host_capabilities(bad, "bad.xml")
    caps = parse_host_capabilities(
        b"<capabilities><host><uuid>u-1</uuid></host></capabilities>")
    assert caps.uuid == "u-1"


@pytest.mark.parametrize("path", corpus_files("hostcaps")
                         + corpus_files("domcaps"), ids=lambda p: p.name)
def test_fed_tree_equals_fromstrings(path, corpus_dir):
    data = path.read_bytes()
    root_tag = ("capabilities" if path.parent.name == "hostcaps"
                else "domainCapabilities")
    fed = parse_document(data, source=path.name, root_tag=root_tag)
    plain = etree.fromstring(data, etree.XMLParser(remove_blank_text=True,
                                                   remove_comments=True,
                                                   remove_pis=True))
    assert etree.tostring(fed) == etree.tostring(plain)
    assert [el.sourceline for el in fed.iter()] == \
        [el.sourceline for el in plain.iter()]


def test_a_wrong_root_is_still_named_after_a_fed_parse():
    with pytest.raises(CapabilityXMLError, match="expected <domainCap"):
        parse_domain_capabilities(b"<capabilities/>", "wrong.xml")
