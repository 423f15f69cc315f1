"""Cell CPUs read by column (large cells) give exactly what reading them one
by one gives, and anything odd in a column still gets the per-element error.
"""

from __future__ import annotations

import pytest
from lxml import etree

from virtdriver.capabilities import CapabilityXMLError, parse_host_capabilities
from virtdriver.capabilities.host import CellCPU
from virtdriver.capabilities.xmlsafe import attribute_columns, digit_column
from virtdriver.cpuset import parse_cpuset

CPUS = 32  # above the column threshold


def _host(cpus: list[dict[str, str]]) -> bytes:
    rows = "\n".join(
        "<cpu " + " ".join(f"{k}='{v}'" for k, v in attrs.items()) + "/>"
        for attrs in cpus)
    return (f"<capabilities>\n<host>\n<topology><cells num='1'>\n"
            f"<cell id='0'>\n<cpus num='{len(cpus)}'>\n{rows}\n</cpus>\n"
            f"</cell>\n</cells></topology>\n</host>\n</capabilities>"
            ).encode()


def _smt(n: int = CPUS) -> list[dict[str, str]]:
    half = n // 2
    return [{"id": str(i), "socket_id": "0", "core_id": str(i % half),
             "siblings": f"{i % half},{i % half + half}"} for i in range(n)]


def _expected(data: bytes) -> list[CellCPU]:
    """Each CPU read independently, by name, with plain lxml."""
    def num(value):
        return None if value is None else int(value)
    return [CellCPU(int(c.get("id")), num(c.get("socket_id")),
                    num(c.get("die_id")), num(c.get("cluster_id")),
                    num(c.get("core_id")),
                    parse_cpuset(c.get("siblings", "")))
            for c in etree.fromstring(data).iter("cpu")]


@pytest.mark.parametrize("change", [
    "none", "one_without_core_id", "ranges", "mixed_lengths", "no_siblings",
    "repeated_die", "padded_first", "leading_zeros"])
def test_columns_give_what_reading_each_cpu_gives(change):
    cpus = _smt()
    if change == "one_without_core_id":
        del cpus[5]["core_id"]
    elif change == "ranges":
        for cpu in cpus:
            cpu["siblings"] = "0-1"
    elif change == "mixed_lengths":
        cpus[3]["siblings"] = "3"
    elif change == "no_siblings":
        for cpu in cpus:
            del cpu["siblings"]
    elif change == "repeated_die":
        for cpu in cpus:
            cpu["die_id"] = "2"
    elif change == "padded_first":
        cpus[0]["core_id"] = " 7 "
    elif change == "leading_zeros":
        cpus[9]["id"] = "009"
    data = _host(cpus)
    caps = parse_host_capabilities(data, "columns.xml")
    got = list(caps.cells[0].cpus)
    expected = _expected(data)
    if change == "padded_first":
        expected[0] = CellCPU(0, 0, None, None, 7, expected[0].siblings)
    assert got == expected
    assert len(got) == CPUS


@pytest.mark.parametrize("at", [0, 1, CPUS // 2, CPUS - 1])
@pytest.mark.parametrize("attr,value,reason", [
    ("id", "x", "attribute id 'x' is not a non-negative integer"),
    ("core_id", "-1", "attribute core_id '-1' is not a non-negative integer"),
    ("socket_id", "9" * 21, "attribute socket_id '" + "9" * 21
     + "' is larger than any 64-bit value libvirt writes"),
    ("siblings", "3,,4", "attribute siblings: invalid CPU set '3,,4'"),
    ("siblings", "70000,1", "attribute siblings: invalid CPU set '70000,1'"),
])
def test_a_bad_value_anywhere_in_a_column_is_refused_at_its_line(
        at, attr, value, reason):
    cpus = _smt()
    cpus[at][attr] = value
    data = _host(cpus)
    line = 6 + at  # one CPU a line, after five lines of header
    with pytest.raises(CapabilityXMLError) as info:
        parse_host_capabilities(data, "bad.xml")
    assert info.value.reason.startswith(f"<cpu>: {reason}")
    assert info.value.line == line


def test_the_column_read_is_taken_for_a_large_regular_cell(monkeypatch):
    from virtdriver.capabilities import host_xml
    results = []

    def spy(els):
        results.append(host_xml_columns(els))
        return results[-1]

    host_xml_columns = host_xml._cpu_columns
    monkeypatch.setattr(host_xml, "_cpu_columns", spy)
    caps = parse_host_capabilities(_host(_smt()), "columns.xml")
    assert len(results) == 1 and results[0] == caps.cells[0].cpus
    cpus = _smt()
    cpus[4]["core_id"] = "x4"
    with pytest.raises(CapabilityXMLError):
        parse_host_capabilities(_host(cpus), "bad.xml")
    assert results[-1] is None  # refused by the per-CPU read


def test_a_missing_id_in_a_large_cell_is_the_per_cpu_error():
    cpus = _smt()
    del cpus[7]["id"]
    with pytest.raises(CapabilityXMLError) as info:
        parse_host_capabilities(_host(cpus), "bad.xml")
    assert info.value.reason == "<cpu>: required attribute id is missing"
    assert info.value.line == 6 + 7


def test_attribute_columns_need_one_layout():
    els = [etree.fromstring(x) for x in
           (b"<c a='1' b='2'/>", b"<c a='3' b='4'/>")]
    assert attribute_columns(els) == {"a": ("1", "3"), "b": ("2", "4")}
    reordered = els + [etree.fromstring(b"<c b='5' a='6'/>")]
    assert attribute_columns(reordered) is None
    assert attribute_columns([]) is None


@pytest.mark.parametrize("values,ok", [
    (("0", "17", "65535"), True), (("1", ""), False), (("1", " 2"), False),
    (("1", "\u0663"), False), (("9" * 21,), False), (("9" * 20,), True),
    (("1", "-2"), False)])
def test_digit_column(values, ok):
    assert digit_column(values) is ok
