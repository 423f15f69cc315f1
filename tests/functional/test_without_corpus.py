"""Without ``../shared/corpus`` the tests that need it skip, each with the
one line :data:`tests.corpus.MISSING`, and nothing fails.

The suite's ``tests/`` tree (its conftest, the corpus helpers) and a few
modules that use the corpus each way — parametrized over its files, a
file read in a test body, a file read by a fixture-built host, a
``skipif`` — are copied into a temporary checkout with no ``shared/``
beside it, and pytest runs there in a child process.
"""

from __future__ import annotations

import os
import pathlib
import re
import shutil
import subprocess
import sys

REPO = pathlib.Path(__file__).resolve().parents[2]
#: Modules that reach the corpus in different ways.
MODULES = ("tests/unit/test_parse_feed.py",          # parametrized
           "tests/unit/test_domain_traits.py",       # parametrized
           "tests/functional/test_explain_table.py",  # read in tests
           "tests/unit/test_capabilities_properties.py")  # skipif
SUPPORT = ("tests/__init__.py", "tests/conftest.py", "tests/corpus.py",
           "tests/xdist_scopes.py")


def test_corpus_tests_skip_with_the_one_line_and_none_fails(tmp_path):
    checkout = tmp_path / "checkout"
    for name in (*SUPPORT, *MODULES):
        target = checkout / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(REPO / name, target)
    for directory in ("tests/unit", "tests/functional"):
        (checkout / directory / "__init__.py").touch()
    assert not (tmp_path / "shared").exists()
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PYTEST_", "VIRTDRIVER_STATE"))}
    env["VIRTDRIVER_STATE_DIR"] = str(tmp_path / "state")

    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:xdist",
         "-p", "no:cacheprovider", "-q", "-rs", *MODULES,
         # Of the property module, only what needs the corpus (the rest
         # is minutes of Hypothesis that proves nothing here).
         "-k", "not test_capabilities_properties or mutated or corpus"],
        cwd=checkout, env=env, capture_output=True, text=True, timeout=300)

    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    reasons = re.findall(r"^SKIPPED \[\d+\] [^:]+:\d+: (.*)$", done.stdout,
                         re.MULTILINE)
    missing = ("libvirt XML corpus not found at "
               f"{tmp_path / 'shared' / 'corpus' / 'libvirt'} (it is "
               "shared/corpus/libvirt beside the repository)")
    assert reasons, done.stdout[-3000:]
    assert set(reasons) == {missing}, done.stdout[-3000:]
    # Every module had something to skip, and the rest ran.
    assert re.search(r"\d+ passed, \d+ skipped", done.stdout), done.stdout
