"""pytest fixtures for testing a libvirt driver against fakelibvirt.

Installed with virtdriver as the ``pytest11`` entry point
``virtdriver_fakelibvirt``, so any test suite in an environment with
virtdriver gets them:

* ``fakelibvirt`` — ``libvirt`` is fakelibvirt for the test (see
  :func:`~virtdriver.fakelibvirt.swap.use_fakelibvirt`); yields the
  module.  Faults planned on the module are cleared afterwards.
* ``fake_libvirt_host`` — ``fake_libvirt_host(documents, name="host1")``
  serves a :class:`~virtdriver.fakelibvirt.HostDocuments` at
  ``fake:///<name>`` for the test and returns that URI.
* ``fakelibvirt_event_loop`` — fakelibvirt's default event loop
  registered and run by a thread for the test, as a libvirt-python
  program runs libvirt's; yields ``drain(timeout=60)``, which waits until
  every event so far has been delivered.

The ini option ``fakelibvirt_packages`` (one package a line) names
packages whose ``libvirt`` globals are rebound *besides* ``virtdriver``'s,
which always are (so the real libvirt driver your driver builds on reads
the fake too): list your driver's.  When :mod:`virtdriver.fakelibvirt.builders` is
installed it is loaded, so ``fakelibvirt.builders`` is there to build
documents with.
"""

from __future__ import annotations

import importlib
import importlib.util
from collections.abc import Callable, Iterator
from types import ModuleType

import pytest

from virtdriver.fakelibvirt.connection import (
    GLOBAL_FAULTS, register_host, unregister_host)
from virtdriver.fakelibvirt.documents import HostDocuments
from virtdriver.fakelibvirt.swap import use_fakelibvirt

BUILDERS = "virtdriver.fakelibvirt.builders"
#: The package whose ``libvirt`` the fixture always replaces.
SWAPPED_ALWAYS = "virtdriver"


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addini(
        "fakelibvirt_packages", type="linelist", default=[],
        help="packages whose module-level `libvirt` the fakelibvirt "
             "fixture replaces, in addition to virtdriver")


def swapped_packages(extra: list[str]) -> list[str]:
    """``virtdriver`` and then ``extra`` (the ini option), each once."""
    return list(dict.fromkeys([SWAPPED_ALWAYS, *extra]))


@pytest.fixture
def fakelibvirt(request: pytest.FixtureRequest) -> Iterator[ModuleType]:
    """``libvirt`` is fakelibvirt for this test; yields the module."""
    packages = swapped_packages(
        request.config.getini("fakelibvirt_packages"))
    with use_fakelibvirt(packages, warn_real=True) as module:
        if importlib.util.find_spec(BUILDERS) is not None:
            importlib.import_module(BUILDERS)
        try:
            yield module
        finally:
            GLOBAL_FAULTS.clear()


@pytest.fixture
def fake_libvirt_host(fakelibvirt: ModuleType
                      ) -> Iterator[Callable[..., str]]:
    """A factory: ``fake_libvirt_host(documents, name="host1") -> uri``;
    the hosts it registers are unregistered after the test."""
    names: list[str] = []

    def serve(documents: HostDocuments, name: str = "host1") -> str:
        names.append(name)
        return register_host(name, documents).uri

    yield serve
    for name in names:
        unregister_host(name)


@pytest.fixture
def fakelibvirt_event_loop() -> Iterator[Callable[..., bool]]:
    """fakelibvirt's event loop run by a thread for the test; yields
    :func:`~virtdriver.fakelibvirt.event_loop.drain`."""
    from virtdriver.fakelibvirt import event_loop

    with event_loop.running():
        yield event_loop.drain
