"""The <os>, <loader> and <features> sections against plain lxml, per corpus
document: each field read independently, by name, with XPath (the readers
walk each section once and share the models of flag-only elements).
"""

from __future__ import annotations

import pytest
from lxml import etree

from virtdriver.capabilities import parse_domain_capabilities
from virtdriver.capabilities.domain import Features, Support
from virtdriver.capabilities.domain_xml import _SIMPLE_FEATURES

from tests.corpus import corpus_files

FLAGS = {"yes": True, "no": False, None: None}


def _enum(el, name):
    found = el.xpath(f"enum[@name='{name}']") if el is not None else []
    return tuple(v.text.strip() for v in found[0].findall("value")) \
        if found else ()


def _support(el):
    if el is None:
        return Support()
    return Support(FLAGS[el.get("supported")], tuple(
        (enum.get("name"), tuple(v.text.strip() for v in enum.findall("value")))
        for enum in el.findall("enum")))


@pytest.mark.parametrize("path", corpus_files("domcaps"), ids=lambda p: p.name)
def test_os_loader_and_features(path, corpus_dir):
    data = path.read_bytes()
    root = etree.fromstring(data)
    caps = parse_domain_capabilities(data, path.name)
    os_el = root.find("os")
    loader = root.find("os/loader")
    assert caps.os.supported is (None if os_el is None
                                 else FLAGS[os_el.get("supported")])
    assert caps.os.firmware == _enum(os_el, "firmware")
    assert caps.os.firmware_features == _support(
        root.find("os/firmwareFeatures"))
    assert caps.os.loader.supported is (None if loader is None
                                        else FLAGS[loader.get("supported")])
    assert caps.os.loader.paths == tuple(
        v.text.strip() for v in root.findall("os/loader/value"))
    for field, enum in (("types", "type"), ("readonly", "readonly"),
                        ("secure", "secure")):
        assert getattr(caps.os.loader, field) == _enum(loader, enum)
    for field, tag in _SIMPLE_FEATURES.items():
        assert getattr(caps.features, field) == _support(
            root.find(f"features/{tag}")), field
    for field in ("sev", "sgx"):
        el = root.find(f"features/{field}")
        assert getattr(caps.features, field).supported is (
            None if el is None else FLAGS[el.get("supported")])


def test_the_corpus_has_each_section_with_and_without_children(corpus_dir):
    roots = [etree.parse(str(p)).getroot() for p in corpus_files("domcaps")]
    assert any(r.xpath("os/loader/value") for r in roots)
    assert any(r.xpath("os/enum[@name='firmware']/value") for r in roots)
    assert any(r.xpath("features/sgx/*") for r in roots)
    assert any(r.xpath("features/sgx[not(*)]") for r in roots)
    assert any(r.xpath("features/*[not(*)][@supported='yes']") for r in roots)
    assert len(Features.__dataclass_fields__) == len(_SIMPLE_FEATURES) + 2


def test_the_first_of_a_repeated_element_wins():
    caps = parse_domain_capabilities(
        b"<domainCapabilities><os supported='yes'>"
        b"<loader supported='yes'><value>/a</value>"
        b"<enum name='type'><value>rom</value></enum>"
        b"<enum name='type'><value>pflash</value></enum></loader>"
        b"<loader supported='no'/></os>"
        b"<features><gic supported='yes'/><gic supported='no'/>"
        b"<sev supported='no'/><sev supported='yes'/></features>"
        b"<devices><disk supported='no'/><disk supported='yes'/></devices>"
        b"</domainCapabilities>")
    assert caps.os.loader.supported is True
    assert caps.os.loader.paths == ("/a",)
    assert caps.os.loader.types == ("rom",)
    assert caps.features.gic.supported is True
    assert caps.features.sev.supported is False
    assert caps.devices.disk.supported is False


def test_the_last_cpu_mode_of_a_name_wins_and_others_are_ignored():
    caps = parse_domain_capabilities(
        b"<domainCapabilities><cpu>"
        b"<mode name='custom' supported='no'/>"
        b"<mode name='custom' supported='yes'><model usable='yes'>EPYC</model>"
        b"</mode><mode name='bogus' supported='yes'/><other name='maximum'/>"
        b"<mode supported='yes'/><mode name='maximum' supported='yes'/>"
        b"</cpu><devices/></domainCapabilities>")
    assert caps.cpu.custom.supported is True
    assert caps.cpu.custom.usable_models == ("EPYC",)
    assert caps.cpu.maximum.supported is True
    assert caps.cpu.host_passthrough.reported is False
    assert caps.cpu.host_model.supported is None
    assert caps.devices.disk.reported is False
