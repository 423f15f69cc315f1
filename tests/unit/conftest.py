"""Fixtures for unit tests: the shared libvirt XML corpus."""

from __future__ import annotations

import pathlib

import pytest

from tests.corpus import CORPUS


@pytest.fixture(scope="session")
def corpus_dir() -> pathlib.Path:
    """The libvirt XML corpus in ``../shared``; skipped only if absent."""
    if not CORPUS.is_dir():
        pytest.skip(f"libvirt corpus not found at {CORPUS}")
    return CORPUS
