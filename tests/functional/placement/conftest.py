"""A real Placement on loopback for every test, empty at its start.

``openstack-placement`` runs as an HTTP service on 127.0.0.1 in a child
process, on SQLite in a temporary directory.  Starting one costs ~0.7 s of
CPU, so the tests share one, emptied through its API before each test
(``placement``); a test that stops its service gets its own
(``own_placement``).

Skipped (failed under CI) when openstack-placement is not installed.
"""

from __future__ import annotations

import importlib.util

import pytest
from placement_helpers import Api, Host, Pool

from virtdriver.placement.loopback import PlacementServer


@pytest.fixture(scope="session")
def placement_pool(tmp_path_factory, in_ci):
    # Not find_spec("placement"): this very directory is a namespace
    # package of that name when tests/functional is on sys.path.
    if importlib.util.find_spec("placement.deploy") is None:
        message = ("openstack-placement is not installed; `./run setup` "
                   "installs it")
        if in_ci:
            pytest.fail(message)
        pytest.skip(message)
    pool = Pool(tmp_path_factory.mktemp("placement"))
    yield pool
    pool.close()


@pytest.fixture
def placement(placement_pool) -> PlacementServer:
    """The shared Placement, emptied: no provider, allocation, CUSTOM_
    trait or resource class.  Do not stop it (use ``own_placement``)."""
    return placement_pool.take_shared()


@pytest.fixture
def own_placement(placement_pool) -> PlacementServer:
    """A Placement of the test's own, on a new database: stop and restart
    it at will."""
    server = placement_pool.take_own()
    yield server
    placement_pool.release(server)


@pytest.fixture
def client(placement):
    """A fresh client for the test's Placement."""
    return placement.client()


@pytest.fixture
def api(placement) -> Api:
    return Api(placement)


@pytest.fixture
def host(tmp_path) -> Host:
    return Host(tmp_path / "state")
