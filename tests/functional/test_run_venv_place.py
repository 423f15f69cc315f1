"""``./run`` and a moved or copied checkout.

A venv names the checkout it was made in (its activate script, its
scripts' shebangs, its editable install of virtdriver).  Copied or moved
elsewhere, it would run the old checkout's code or fail in dozens of
tests; ``./run`` makes it anew instead.

The real ``run`` script is copied into a temporary checkout and run there,
with a stand-in ``python3`` that records what it is asked and makes a
minimal venv, and a stand-in ``dpkg-query`` that reports every package
installed: the script's own logic runs, nothing is installed.
"""

from __future__ import annotations

import os
import pathlib
import shutil
import stat
import subprocess

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]

PYTHON = r"""#!/bin/sh
# A stand-in for python3: log the call, make what a venv would have.
echo "$*" >> "$CALLS"
case "$1 $2" in
    "-m venv")
        mkdir -p "$3/bin"
        cp "$0" "$3/bin/python"
        printf 'VIRTUAL_ENV="%s"\nexport VIRTUAL_ENV\n' "$(pwd)/$3" \
            > "$3/bin/activate" ;;
    "-VV "*) echo "Python 3.11.2 (stand-in)" ;;
esac
exit 0
"""

DPKG_QUERY = r"""#!/bin/sh
# A stand-in for dpkg-query -W -f=...: every package asked for is installed.
for arg in "$@"; do
    case "$arg" in -*) ;; *) echo "$arg ii " ;; esac
done
"""


def executable(path: pathlib.Path, text: str) -> pathlib.Path:
    path.write_text(text)
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP
               | stat.S_IXOTH)
    return path


@pytest.fixture
def checkout(tmp_path: pathlib.Path) -> pathlib.Path:
    """A checkout with the real ``run`` and what its bootstrap reads."""
    where = tmp_path / "checkout"
    where.mkdir()
    for name in ("run", "setup.cfg", "pyproject.toml"):
        shutil.copy2(REPO / name, where / name)
    for plugin in ("virtdriver_example", "virtdriver_broken"):
        source = REPO / "tests" / "plugins" / plugin / "pyproject.toml"
        if source.exists():
            target = where / "tests" / "plugins" / plugin
            target.mkdir(parents=True)
            shutil.copy2(source, target / "pyproject.toml")
    (where / "virtdriver").mkdir()
    (where / "virtdriver" / "__init__.py").write_text("")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    executable(bin_dir / "python3", PYTHON)
    executable(bin_dir / "dpkg-query", DPKG_QUERY)
    return where


def run_setup(checkout: pathlib.Path) -> tuple[subprocess.CompletedProcess,
                                                list[str]]:
    calls = checkout.parent / "calls.log"
    calls.write_text("")
    bin_dir = checkout.parent / "bin"
    env = dict(os.environ, CALLS=str(calls), PYTHON=str(bin_dir / "python3"),
               PATH=f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    done = subprocess.run(["bash", str(checkout / "run"), "setup"],
                          cwd=checkout, env=env, capture_output=True,
                          text=True, timeout=120)
    return done, calls.read_text().splitlines()


def made_venv(calls: list[str]) -> bool:
    return any(call.startswith("-m venv") for call in calls)


def test_a_venv_made_elsewhere_is_made_anew_here(checkout):
    venv = checkout / ".venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "activate").write_text(
        'VIRTUAL_ENV="/old/checkout/.venv"\nexport VIRTUAL_ENV\n')
    # It still works: only the place it names is wrong.
    executable(venv / "bin" / "python", PYTHON)
    (venv / "left-over").write_text("from the old place")

    done, calls = run_setup(checkout)

    assert done.returncode == 0, done.stderr
    assert ("run: .venv was made for /old/checkout (a moved or copied "
            "checkout): making it anew here") in done.stderr
    assert made_venv(calls), calls
    assert not (venv / "left-over").exists()
    assert any(call.startswith("-m pip install") for call in calls), calls
    activate = (venv / "bin" / "activate").read_text()
    assert f'VIRTUAL_ENV="{checkout}/.venv"' in activate


def test_a_venv_made_here_is_kept(checkout):
    done, calls = run_setup(checkout)          # the first: makes it
    assert done.returncode == 0, done.stderr
    assert made_venv(calls)
    (checkout / ".venv" / "kept").write_text("")

    done, calls = run_setup(checkout)          # the second: keeps it

    assert done.returncode == 0, done.stderr
    assert "making it anew" not in done.stderr
    assert not made_venv(calls), calls
    assert (checkout / ".venv" / "kept").exists()


def test_a_checkout_moved_after_its_venv_was_made_gets_a_new_one(checkout):
    done, _ = run_setup(checkout)
    assert done.returncode == 0, done.stderr
    moved = checkout.with_name("moved")
    checkout.rename(moved)
    moved.parent.joinpath("checkout").mkdir()  # the old place, now empty

    done, calls = run_setup(moved)

    assert done.returncode == 0, done.stderr
    assert f".venv was made for {checkout} (a moved" in done.stderr
    assert made_venv(calls), calls
