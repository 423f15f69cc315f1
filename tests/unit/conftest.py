"""Fixtures for unit tests: the shared libvirt XML corpus."""

from __future__ import annotations

import pathlib

import pytest

CORPUS = (pathlib.Path(__file__).resolve().parents[2].parent
          / "shared" / "corpus" / "libvirt")


def corpus_files(kind: str) -> list[pathlib.Path]:
    """Corpus documents of ``kind`` (``domcaps`` or ``hostcaps``), sorted."""
    return sorted((CORPUS / kind).glob("*.xml"))


@pytest.fixture(scope="session")
def corpus_dir() -> pathlib.Path:
    """The libvirt XML corpus in ``../shared``; skipped only if absent."""
    if not CORPUS.is_dir():
        pytest.skip(f"libvirt corpus not found at {CORPUS}")
    return CORPUS
