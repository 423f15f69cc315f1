"""Fixtures shared by every test directory."""

from __future__ import annotations

import os
import pathlib

import pytest

from tests.corpus import CORPUS

REPO = pathlib.Path(__file__).resolve().parents[1]
#: State for tests that open qemu:///embed.  libvirt allows one embed root
#: per process, so the whole session shares this one; it lives in the
#: checkout (ignored by git) so QEMU's probed capabilities stay cached
#: between runs.
TEST_STATE_DIR = REPO / ".state" / "tests"


@pytest.fixture(scope="session")
def corpus_dir() -> pathlib.Path:
    """The libvirt XML corpus beside the checkout (``../shared``)."""
    if not CORPUS.is_dir():
        pytest.skip(f"libvirt XML corpus not found at {CORPUS} (it is "
                    "shared/corpus/libvirt beside the repository)")
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
