import pytest

from virtdriver.cpuset import (
    MAX_CPU_ID, CPUSetError, cpu_runs, format_cpuset, parse_cpuset)


@pytest.mark.parametrize("spec, expected", [
    ("0", {0}),
    ("0-3", {0, 1, 2, 3}),
    ("0-3,^2,8-11", {0, 1, 3, 8, 9, 10, 11}),
    ("^2,0-3", {0, 1, 3}),
    (" 1 , 5 ", {1, 5}),
    ("0-7,^2-5", {0, 1, 6, 7}),
    ("", set()),
])
def test_parse_cpuset(spec, expected):
    assert parse_cpuset(spec) == frozenset(expected)


@pytest.mark.parametrize("spec, token", [
    ("0-3,x", "x"),
    ("0-3,,4", ""),
    ("5-1", "5-1"),
    ("1-", "1-"),
    ("^", "^"),
    ("-1", "-1"),
    ("0-99999999999", "0-99999999999"),
    ("٣", "٣"),  # a non-ASCII digit is not a CPU id
])
def test_parse_cpuset_error_quotes_bad_token(spec, token):
    with pytest.raises(CPUSetError) as info:
        parse_cpuset(spec)
    assert info.value.token == token
    assert repr(token) in str(info.value)
    assert repr(spec) in str(info.value)


def test_largest_cpu_id_is_accepted():
    assert parse_cpuset(str(MAX_CPU_ID)) == {MAX_CPU_ID}


@pytest.mark.parametrize("cpus, text", [
    ([0, 1, 2, 3, 8], "0-3,8"),
    ([5, 0, 4], "0,4-5"),
    ([], ""),
    ([7], "7"),
])
def test_format_cpuset(cpus, text):
    assert format_cpuset(cpus) == text
    assert parse_cpuset(text) == frozenset(cpus)


def test_cpu_runs():
    assert cpu_runs([8, 0, 1, 2, 2]) == [(0, 2), (8, 8)]
    assert cpu_runs([]) == []
