"""Fixtures shared by every test directory."""

from __future__ import annotations

import os
import pathlib
import sys

import hypothesis
import pytest

from tests import corpus, xdist_scopes
from tests.corpus import CORPUS

REPO = pathlib.Path(__file__).resolve().parents[1]
#: The pytest-xdist worker this process is ("gw0", "gw1", ...), or "main"
#: when the suite runs in one process.
WORKER = os.environ.get("PYTEST_XDIST_WORKER", "main")
#: State for tests that open qemu:///embed.  libvirt allows one embed root
#: per process, so each test process (each xdist worker) has its own; it
#: lives in the checkout (ignored by git) so QEMU's probed capabilities
#: stay cached between runs.
TEST_STATE_DIR = REPO / ".state" / "tests" / WORKER

#: Packages pytest marks for assertion rewriting because their
#: distributions register a pytest plugin (virtdriver's fakelibvirt
#: fixtures, hypothesis, xdist): their own ``assert`` statements need no
#: rewriting, and rewriting them is about a third of collecting the suite
#: in every worker (nothing is cached where bytecode is not written).
NOT_REWRITTEN = ("virtdriver", "hypothesis", "xdist")


def _rewrite_only_tests() -> None:
    for finder in sys.meta_path:
        marked = getattr(finder, "_must_rewrite", None)
        if type(finder).__name__ == "AssertionRewritingHook" and \
                isinstance(marked, set):
            marked.difference_update(NOT_REWRITTEN)


_rewrite_only_tests()

# No test may depend on how fast the machine is: Hypothesis's per-example
# deadline and its too-slow health check are wall-clock limits, so both are
# off for every property test (each still sets its own example count).
hypothesis.settings.register_profile(
    "virtdriver", deadline=None,
    suppress_health_check=[hypothesis.HealthCheck.too_slow])
hypothesis.settings.load_profile("virtdriver")


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """Spread the suite over xdist workers by :mod:`tests.xdist_scopes`."""
    return xdist_scopes.make_scheduler(config, log)


def pytest_collection_modifyitems(config, items):
    """Refuse a test whose fixtures belong to another unit of work than
    :mod:`tests.xdist_scopes` gives it (it would repeat their cost); and
    without the corpus, skip a test parametrized over its (now no) files
    with :data:`tests.corpus.MISSING`, not pytest's "got empty parameter
    set"."""
    problems = [problem for item in items
                if (problem := xdist_scopes.misplaced(
                    item.nodeid, getattr(item, "fixturenames", ())))]
    if problems:
        raise pytest.UsageError("\n".join(problems))
    if CORPUS.is_dir():
        return
    for item in items:
        if _empty_parameters(item) and _reads_the_corpus(item):
            item.add_marker(pytest.mark.skip(reason=corpus.MISSING),
                            append=False)


def _empty_parameters(item) -> bool:
    return any(str(mark.kwargs.get("reason", "")).startswith(
        "got empty parameter set") for mark in item.iter_markers("skip"))


def _reads_the_corpus(item) -> bool:
    module = getattr(item, "module", None)
    return module is not None and any(
        value is corpus or value is CORPUS or value is corpus.corpus_files
        for value in vars(module).values())


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item):
    """A fixture that reads a corpus file skips the test, with the one
    line :data:`tests.corpus.MISSING`, when the corpus is absent."""
    return (yield from _skipping_without_corpus())


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item):
    """The same for a test body that reads a corpus file."""
    return (yield from _skipping_without_corpus())


def _skipping_without_corpus():
    try:
        return (yield)
    except OSError as exc:
        if corpus.missing_corpus_file(exc):
            pytest.skip(corpus.MISSING)
        raise


@pytest.fixture(scope="session")
def corpus_dir() -> pathlib.Path:
    """The libvirt XML corpus beside the checkout (``../shared``)."""
    if not CORPUS.is_dir():
        pytest.skip(corpus.MISSING)
    return CORPUS


@pytest.fixture(scope="session", autouse=True)
def virtdriver_state_dir() -> pathlib.Path:
    """Point VIRTDRIVER_STATE_DIR at the tests' own state for the session."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("VIRTDRIVER_STATE_DIR", str(TEST_STATE_DIR))
        yield TEST_STATE_DIR


@pytest.fixture(scope="session", autouse=True)
def no_default_config_files() -> None:
    """The commands search no default config location (the machine's
    /etc/virtdriver/virtdriver.conf never reaches a test); subprocesses
    inherit it.  Tests of the search set $VIRTDRIVER_CONFIG_DIRS."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("VIRTDRIVER_CONFIG_DIRS", "")
        yield


@pytest.fixture(autouse=True)
def one_embedded_placement_per_test():
    """Placement configures its database once per process, and the
    embedded one refuses a second (``one process serves one database``):
    after a test that ran it in this process (``sync`` without
    ``--placement-url``, ``in_process_client``), forget it, as
    Placement's own functional tests do, so the next test's database is
    not refused because of where the scheduler put the two."""
    yield
    embedded = sys.modules.get("virtdriver.placement.embedded")
    if embedded is None or embedded._configured is None:
        return
    from oslo_db.sqlalchemy import enginefacade
    from placement import db_api
    from placement.objects import consumer_type, resource_class, trait

    db_api.configure.reset()
    db_api.placement_context_manager._root_factory = \
        enginefacade._TransactionFactory()
    # Synced once per process, into the first database only.
    trait._TRAITS_SYNCED = False
    resource_class._RESOURCE_CLASSES_SYNCED = False
    consumer_type._CONSUMER_TYPES_SYNCED = False
    embedded._configured = None


@pytest.fixture(autouse=True)
def no_libvirt_error_left_over():
    """libvirt keeps each thread's last error, and ``libvirtError(msg)``
    prefers it over ``msg``: an error one test left (a refused
    connection) must not become the message of another's."""
    libvirt = sys.modules.get("libvirt")
    if libvirt is not None and hasattr(libvirt, "virResetLastError"):
        libvirt.virResetLastError()
    yield


@pytest.fixture(scope="module", autouse=True)
def no_fake_event_loop_left_registered():
    """fakelibvirt's default event loop stays registered once a test
    registers it (as libvirt's does for a process), yet no thread runs it
    after that module: node-device callbacks a later module's driver then
    registers would be accepted and never called.  Each module starts as
    a fresh process would, with no loop registered and nothing queued
    (a module may run one loop for all its tests)."""
    yield
    event_loop = sys.modules.get("virtdriver.fakelibvirt.event_loop")
    if event_loop is not None:
        event_loop.reset()
        with event_loop._cond:
            event_loop._registered = False
            event_loop._woken = False


@pytest.fixture(scope="session")
def in_ci() -> bool:
    """Whether this runs under CI (CI=true), where nothing may be skipped
    for want of an installed part: the bootstrap installs them all."""
    return os.environ.get("CI", "").lower() in ("1", "true", "yes")


@pytest.fixture
def opened(monkeypatch) -> list[str]:
    """Every path opened from now on: by ``open``, ``io.open`` (which
    ``Path.open``, ``read_text`` and ``read_bytes`` use) or ``os.open`` —
    for tests that prove a file is refused without being read."""
    import builtins
    import io

    seen: list[str] = []

    def spy(real):
        def recording(file, *args, **kwargs):
            seen.append(str(file))
            return real(file, *args, **kwargs)
        return recording

    for module, name in ((io, "open"), (builtins, "open"), (os, "open")):
        monkeypatch.setattr(module, name, spy(getattr(module, name)))
    return seen
