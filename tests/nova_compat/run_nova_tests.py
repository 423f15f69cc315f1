"""Run Nova's own ProviderTree unit tests against virtdriver's ProviderTree.

One command (from the checkout)::

    python3 tests/nova_compat/run_nova_tests.py [--venv DIR] [--nova-only]

The first run makes a separate venv (default ``.venv-nova`` beside the
checkout's ``.venv``) and installs ``nova==34.0.0`` from the package index,
the test libraries Nova's base test class needs, and this checkout
(editable, without its own dependencies: the tree needs none Nova lacks).
Nothing of Nova is kept in the repository: the tests are the installed
package's ``nova/tests/unit/compute/test_provider_tree.py``, loaded
unmodified.  Then, inside that venv, ``nova.compute.provider_tree.
ProviderTree`` is replaced by :class:`virtdriver.resource_tracker.
provider_tree.ProviderTree` and the module runs under :mod:`unittest`, as
Nova runs it (pytest's unittest plugin clashes with Nova's fixture
cleanup).  ``--nova-only`` runs the same tests on Nova's own class.

Prints each failing test, then the tally; exits 0 when every test that
uses only public API passes (:data:`PRIVATE`, the tests that read Nova's
private attributes, are reported apart), 1 otherwise, 3 when the venv
cannot be made (no index, no network) or Nova's test module cannot load.
Not part of the default pytest suite: ``docs/provider-tree.md`` lists the
private tests and why.
"""

from __future__ import annotations

import argparse
import os
import pathlib
import subprocess
import sys
import venv

NOVA = "nova==34.0.0"
#: What Nova's ``nova.test`` imports beyond Nova's own requirements.
TEST_LIBRARIES = ("fixtures", "oslotest", "testtools", "requests-mock", "ddt",
                  "wsgi-intercept")
MODULE = "nova.tests.unit.compute.test_provider_tree"
CHECKOUT = pathlib.Path(__file__).resolve().parents[2]
#: Tests that read Nova's private attributes -> the attribute.
PRIVATE = {
    "test_populate_from_iterable_complex": "ProviderTree._find_with_lock",
}
_INSIDE = "--inside-nova-venv"


def main(argv: list[str] | None = None) -> int:
    """Make the venv if needed, then run the tests inside it."""
    args = _parser().parse_args(argv)
    if args.inside:
        return _run_tests(args.nova_only)
    env_dir = pathlib.Path(args.venv).resolve()
    python = env_dir / "bin" / "python"
    if not (env_dir / ".virtdriver-nova-ready").exists():
        try:
            _make_venv(env_dir, python)
        except subprocess.CalledProcessError as exc:
            print(f"making the Nova venv {env_dir} failed ({exc.cmd[2:5]}...,"
                  f" exit {exc.returncode})", file=sys.stderr)
            print("check that the package index is reachable, or delete "
                  f"{env_dir} and run this again", file=sys.stderr)
            return 3
    command = [str(python), str(pathlib.Path(__file__).resolve()), _INSIDE]
    if args.nova_only:
        command.append("--nova-only")
    return subprocess.call(command, cwd=CHECKOUT)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--venv", default=str(CHECKOUT / ".venv-nova"),
                        help="the Nova venv (made on first use)")
    parser.add_argument("--nova-only", action="store_true",
                        help="run the tests on Nova's own ProviderTree")
    parser.add_argument(_INSIDE, dest="inside", action="store_true",
                        help=argparse.SUPPRESS)
    return parser


def _make_venv(env_dir: pathlib.Path, python: pathlib.Path) -> None:
    print(f"making {env_dir} with {NOVA} (a few minutes, once)",
          file=sys.stderr)
    if not python.exists():
        venv.create(env_dir, with_pip=True)
    pip = [str(python), "-m", "pip", "install", "--quiet"]
    subprocess.run([*pip, NOVA, *TEST_LIBRARIES], check=True)
    subprocess.run([*pip, "--no-deps", "-e", str(CHECKOUT)], check=True)
    (env_dir / ".virtdriver-nova-ready").write_text(NOVA + "\n")


def _run_tests(nova_only: bool) -> int:
    import unittest

    from nova.compute import provider_tree as nova_provider_tree

    if not nova_only:
        from virtdriver.resource_tracker.provider_tree import ProviderTree
        nova_provider_tree.ProviderTree = ProviderTree
    os.environ.setdefault("OS_TEST_TIMEOUT", "120")
    suite = unittest.defaultTestLoader.loadTestsFromName(MODULE)
    result = unittest.TextTestRunner(stream=sys.stdout, verbosity=1).run(
        suite)
    failed = {test.id().rsplit(".", 1)[1]: text
              for test, text in result.failures + result.errors}
    if "test_provider_tree" in failed:  # unittest's stand-in: no module
        print(f"\ncould not load {MODULE} (see above); install what it "
              "imports into the Nova venv", file=sys.stderr)
        return 3
    public_failed = sorted(name for name in failed if name not in PRIVATE)
    private = sorted(PRIVATE)
    total = result.testsRun
    which = "Nova's own" if nova_only else "virtdriver's"
    print(f"\n{which} ProviderTree under {MODULE}:")
    print(f"  {total - len(failed)} of {total} passed; public API: "
          f"{total - len(private) - len(public_failed)} of "
          f"{total - len(private)} passed")
    for name in private:
        state = "failed" if name in failed else "passed"
        print(f"  private: {name} ({state}; reads {PRIVATE[name]})")
    for name in public_failed:
        print(f"  FAILED (public API): {name}")
    return 1 if public_failed else 0


if __name__ == "__main__":
    sys.exit(main())
