"""Where the shared libvirt XML corpus lives, for every test tree."""

from __future__ import annotations

import pathlib

#: ``../shared/corpus/libvirt`` beside the repository checkout.
CORPUS = (pathlib.Path(__file__).resolve().parents[1].parent
          / "shared" / "corpus" / "libvirt")


#: The one line a test that needs the corpus skips with when it is absent.
MISSING = (f"libvirt XML corpus not found at {CORPUS} (it is "
           "shared/corpus/libvirt beside the repository)")


def missing_corpus_file(exc: BaseException) -> bool:
    """Whether ``exc`` is a failure to read a corpus file because the
    corpus is not there at all (not a bad path inside a present one)."""
    return (isinstance(exc, OSError) and not CORPUS.is_dir()
            and isinstance(exc.filename, (str, pathlib.PurePath))
            and pathlib.Path(exc.filename).is_relative_to(CORPUS))


def corpus_files(kind: str) -> list[pathlib.Path]:
    """Corpus documents of ``kind`` (``domcaps`` or ``hostcaps``), sorted."""
    return sorted((CORPUS / kind).glob("*.xml"))
