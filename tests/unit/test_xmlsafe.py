"""Hostile and malformed XML is refused with CapabilityXMLError, and only that."""

import pytest
from lxml import etree

from virtdriver.capabilities import (
    CapabilityXMLError, DEFAULT_MAX_BYTES, parse_domain_capabilities,
    parse_host_capabilities)
from virtdriver.capabilities import xmlsafe

BILLION_LAUGHS = b"""<?xml version="1.0"?>
<!DOCTYPE capabilities [
 <!ENTITY lol "lol">
 <!ENTITY lol1 "&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;">
 <!ENTITY lol2 "&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;">
 <!ENTITY lol3 "&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;">
 <!ENTITY lol4 "&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;">
 <!ENTITY lol5 "&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;">
 <!ENTITY lol6 "&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;">
 <!ENTITY lol7 "&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;">
 <!ENTITY lol8 "&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;">
 <!ENTITY lol9 "&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;">
]>
<capabilities><host><uuid>&lol9;</uuid></host></capabilities>
"""

EXTERNAL_ENTITY = b"""<?xml version="1.0"?>
<!DOCTYPE capabilities [<!ENTITY xxe SYSTEM "file:///etc/passwd">]>
<capabilities><host><uuid>&xxe;</uuid></host></capabilities>
"""


@pytest.fixture
def lxml_must_not_parse(monkeypatch):
    """Fail the test if the document reaches lxml at all."""
    def refuse(*args, **kwargs):
        raise AssertionError("hostile document was handed to lxml")
    monkeypatch.setattr(xmlsafe.etree, "fromstring", refuse)


@pytest.mark.parametrize("doc", [BILLION_LAUGHS, EXTERNAL_ENTITY],
                         ids=["billion-laughs", "external-entity"])
def test_dtd_documents_are_refused_before_parsing(doc, lxml_must_not_parse):
    with pytest.raises(CapabilityXMLError) as info:
        parse_host_capabilities(doc, "evil.xml")
    err = info.value
    assert err.source == "evil.xml"
    assert err.line == 2
    assert "DTD" in err.reason
    assert str(err).startswith("evil.xml, line 2:")


def test_dtd_hidden_by_utf16_encoding_is_still_refused():
    doc = EXTERNAL_ENTITY.decode().replace('version="1.0"',
                                           'version="1.0" encoding="UTF-16"')
    data = doc.encode("utf-16")
    assert b"<!DOCTYPE" not in data  # the byte scan cannot see it
    with pytest.raises(CapabilityXMLError) as info:
        parse_host_capabilities(data, "utf16.xml")
    assert "DTD" in info.value.reason
    assert "root:" not in str(info.value)  # /etc/passwd was never read


def test_xinclude_is_not_processed():
    doc = b"""<capabilities xmlns:xi="http://www.w3.org/2001/XInclude">
      <host><uuid><xi:include href="/etc/hostname" parse="text"/></uuid></host>
    </capabilities>"""
    caps = parse_host_capabilities(doc, "xinclude.xml")
    assert caps.uuid is None


def test_size_limit_is_enforced_and_configurable():
    doc = b"<capabilities>" + b" " * 2000 + b"</capabilities>"
    with pytest.raises(CapabilityXMLError) as info:
        parse_host_capabilities(doc, "big.xml", max_bytes=1000)
    assert "over the limit of 1000 bytes" in info.value.reason
    assert info.value.line is None
    assert parse_host_capabilities(doc, "big.xml", max_bytes=4000).cells == ()
    assert DEFAULT_MAX_BYTES == 16 * 1024 * 1024


def test_malformed_xml_names_source_and_line():
    doc = b"<capabilities>\n<host>\n<uuid>x</uuid>\n</hots>\n</capabilities>"
    with pytest.raises(CapabilityXMLError) as info:
        parse_host_capabilities(doc, "/tmp/caps.xml")
    err = info.value
    assert err.source == "/tmp/caps.xml"
    assert err.line == 4
    assert "malformed XML" in err.reason
    assert "/tmp/caps.xml, line 4" in str(err)


@pytest.mark.parametrize("doc", [b"", b"   \n", "  "])
def test_empty_document(doc):
    with pytest.raises(CapabilityXMLError, match="document is empty"):
        parse_domain_capabilities(doc, "qemu:///embed getDomainCapabilities")


def test_wrong_root_element_is_named():
    with pytest.raises(CapabilityXMLError) as info:
        parse_domain_capabilities(b"<capabilities/>", "x.xml")
    assert "root element is <capabilities>, expected <domainCapabilities>" \
        in info.value.reason


def test_excessive_nesting_is_refused():
    depth = 5000
    doc = (b"<capabilities><host>" + b"<a>" * depth + b"</a>" * depth
           + b"</host></capabilities>")
    with pytest.raises(CapabilityXMLError, match="malformed XML"):
        parse_host_capabilities(doc, "deep.xml")


@pytest.mark.parametrize("fragment, what", [
    ("<cell id='zero'/>", "attribute id 'zero'"),
    ("<cell id='-1'/>", "attribute id '-1'"),
    ("<cell id='0'><memory unit='KiB'>lots</memory></cell>", "text 'lots'"),
    ("<cell id='0'><memory unit='parsecs'>1</memory></cell>", "unknown unit"),
    ("<cell/>", "required attribute id is missing"),
    ("<cell id='0'><cpus><cpu id='1' siblings='1-x'/></cpus></cell>",
     "attribute siblings"),
])
def test_bad_values_name_element_and_line(fragment, what):
    doc = ("<capabilities>\n<host>\n<topology>\n<cells>\n" + fragment
           + "\n</cells></topology></host></capabilities>")
    with pytest.raises(CapabilityXMLError) as info:
        parse_host_capabilities(doc, "values.xml")
    assert what in info.value.reason
    assert info.value.line == 5


def test_str_input_with_encoding_declaration_is_accepted():
    doc = "<?xml version='1.0' encoding='UTF-8'?>\n<capabilities><host>" \
          "<uuid>abc</uuid></host></capabilities>"
    assert parse_host_capabilities(doc).uuid == "abc"


def test_parser_does_not_share_state_between_threads():
    import threading
    seen = []
    worker = threading.Thread(target=lambda: seen.append(xmlsafe._parser()))
    worker.start()
    worker.join()
    assert seen[0] is not xmlsafe._parser()
    assert isinstance(seen[0], etree.XMLParser)


def test_str_declaring_another_encoding_gets_a_clear_error():
    doc = "<?xml version='1.0' encoding='UTF-16'?>\n<capabilities/>"
    with pytest.raises(CapabilityXMLError) as info:
        parse_host_capabilities(doc, "decoded.xml")
    assert "non-UTF-8 encoding" in info.value.reason
    assert "pass the raw bytes" in str(info.value)


def test_huge_values_are_clipped_in_the_message():
    doc = ("<capabilities><host><topology><cells><cell id='0'><memory>"
           + "9" * 5000 + "</memory></cell></cells></topology></host>"
           "</capabilities>")
    with pytest.raises(CapabilityXMLError) as info:
        parse_host_capabilities(doc, "huge.xml")
    assert "larger than any 64-bit value" in info.value.reason
    assert "(5000 characters)" in info.value.reason
    assert len(str(info.value)) < 300
