"""The suite's own scheduling (tests/xdist_scopes.py): units, their order."""

from __future__ import annotations

import pathlib

from tests import xdist_scopes
from tests.xdist_scopes import SECONDS, longest_first, misplaced, unit_of

REPO = pathlib.Path(__file__).resolve().parents[2]


def test_every_measured_unit_still_exists():
    """A renamed module would silently lose its place at the front."""
    for unit in SECONDS:
        if unit in ("postgres", "embed"):
            continue
        assert (REPO / unit).is_file(), unit
    for module in xdist_scopes.POSTGRES_MODULES:
        assert (REPO / module).is_file(), module


def test_modules_are_units_and_the_groups_are_one_each():
    assert unit_of("tests/unit/test_cpuset.py::test_x[1]") == \
        "tests/unit/test_cpuset.py"
    assert unit_of("tests/real/test_placement_postgres.py::t") == "postgres"
    assert unit_of("tests/real/test_postgres_cluster.py::t") == "postgres"
    assert unit_of("tests/real/test_embed.py::t") == "embed"
    assert unit_of("tests/real/test_libvirt_driver.py::C::t") == "embed"


def test_longest_first_puts_a_long_one_test_module_before_many_short_tests():
    agreement = "tests/functional/placement/test_placement_agreement.py"
    many = "tests/unit/test_many_small.py"
    order = longest_first([(many, 100), (agreement, 1), ("postgres", 26),
                           ("tests/unit/test_few.py", 3)])
    # The measured units by their seconds (23, 11), the 100 unmeasured
    # tests at the default rate (8 s) between them, the small one last.
    assert order == ["postgres", agreement, many, "tests/unit/test_few.py"]


def test_ties_keep_their_collection_order():
    units = [(f"tests/unit/test_{n}.py", 5) for n in "abc"]
    assert longest_first(units) == [u for u, _ in units]


def test_a_grouped_fixture_outside_its_unit_is_named():
    problem = misplaced("tests/functional/test_x.py::t", ["embed_uri"])
    assert problem is not None
    assert "'embed_uri'" in problem and "'embed'" in problem
    assert misplaced("tests/real/test_embed.py::t", ["embed_uri"]) is None
    assert misplaced("tests/functional/test_x.py::t", ["tmp_path"]) is None
