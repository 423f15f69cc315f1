"""Where the shared libvirt XML corpus lives, for every test tree."""

from __future__ import annotations

import pathlib

#: ``../shared/corpus/libvirt`` beside the repository checkout.
CORPUS = (pathlib.Path(__file__).resolve().parents[1].parent
          / "shared" / "corpus" / "libvirt")


def corpus_files(kind: str) -> list[pathlib.Path]:
    """Corpus documents of ``kind`` (``domcaps`` or ``hostcaps``), sorted."""
    return sorted((CORPUS / kind).glob("*.xml"))
