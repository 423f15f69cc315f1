"""``config sample -o FILE`` on a shared machine (issue 26): whatever has
the name — a link another user planted, a hard link — is replaced by a new
file, never written through, as ``report --output`` does."""

from __future__ import annotations

import os
import stat

import pytest

from virtdriver.cli import main
from virtdriver.cli.config import sample_config

NOBODY = 65534
SECRET = "root:only\n"
as_root = pytest.mark.skipif(os.geteuid() != 0, reason="chown needs root")


@pytest.fixture
def victim(tmp_path):
    path = tmp_path / "elsewhere" / "secret"
    path.parent.mkdir()
    path.write_text(SECRET)
    path.chmod(0o600)
    return path


@pytest.fixture
def sticky(tmp_path):
    """A /tmp-like directory: anyone may plant a name in it."""
    path = tmp_path / "tmp"
    path.mkdir()
    path.chmod(0o1777)
    return path


def the_sample_is_at(path) -> None:
    info = os.lstat(path)
    assert stat.S_ISREG(info.st_mode) and info.st_nlink == 1
    assert info.st_uid == os.geteuid()
    assert stat.S_IMODE(info.st_mode) == 0o644
    assert path.read_text() == sample_config()


@as_root
def test_a_planted_link_is_replaced_not_written_through(sticky, victim,
                                                        capsys):
    link = sticky / "virtdriver.conf.sample"
    link.symlink_to(victim)
    os.lchown(link, NOBODY, NOBODY)

    assert main(["config", "sample", "-o", str(link)]) == 0, \
        capsys.readouterr().err

    assert victim.read_text() == SECRET
    assert stat.S_IMODE(victim.stat().st_mode) == 0o600
    the_sample_is_at(link)


def test_a_hard_link_is_replaced_not_written_through(tmp_path, victim):
    linked = tmp_path / "virtdriver.conf.sample"
    os.link(victim, linked)

    assert main(["config", "sample", "-o", str(linked)]) == 0

    assert victim.read_text() == SECRET
    the_sample_is_at(linked)


def test_a_new_sample_is_0644_under_umask_000_and_no_scratch_is_left(
        tmp_path):
    target = tmp_path / "out" / "virtdriver.conf.sample"
    target.parent.mkdir()
    before = os.umask(0)
    try:
        assert main(["config", "sample", "-o", str(target)]) == 0
    finally:
        os.umask(before)
    the_sample_is_at(target)
    assert os.listdir(target.parent) == [target.name]


def test_a_link_to_a_device_is_refused_and_left(tmp_path, capsys):
    link = tmp_path / "virtdriver.conf.sample"
    link.symlink_to(os.devnull)

    assert main(["config", "sample", "-o", str(link)]) == 2

    err = capsys.readouterr().err
    assert err == (f"virtdriver: --output {link} is a link to {os.devnull}, "
                   "not to a file; to print the sample, leave out --output; "
                   "else give the path of a file\n")
    assert os.readlink(link) == os.devnull
