"""``virtdriver snapshot -o``: a target that cannot be a snapshot is
refused before libvirt is read, and a snapshot is written whole or not at
all."""

from __future__ import annotations

import json

import pytest

from virtdriver import cli
from virtdriver.cli import snapshot as snapshot_cli

URI = "test:///default"


def record(capsys, target):
    status = cli.main(["snapshot", "--uri", URI, "-o", str(target)])
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def listing(directory):
    return sorted(p.relative_to(directory).as_posix()
                  for p in directory.rglob("*"))


def test_new_directory_is_written(tmp_path, capsys):
    target = tmp_path / "deeper" / "snap"

    status, out, _ = record(capsys, target)

    assert status == 0
    assert out.startswith(f"recorded {URI} (given with --uri) into {target}:")
    assert json.loads((target / "manifest.json").read_text())["uri"] == URI
    assert listing(target.parent) == ["snap", *(f"snap/{p}" for p in
                                                listing(target))]


def test_onto_an_existing_file_is_refused(tmp_path, capsys):
    target = tmp_path / "notes.txt"
    target.write_text("keep me")

    status, out, err = record(capsys, target)

    assert status == cli.EXIT_FAILURE
    assert out == ""
    assert err == (f"virtdriver: snapshot -o {target} exists and is not a "
                   "directory; give a new directory, an empty one, or an "
                   "earlier snapshot to replace\n")
    assert target.read_text() == "keep me"
    assert listing(tmp_path) == ["notes.txt"]


def test_a_directory_of_other_files_is_refused(tmp_path, capsys):
    (tmp_path / "home").mkdir()
    (tmp_path / "home" / "thesis.tex").write_text("x")

    status, _, err = record(capsys, tmp_path / "home")

    assert status == cli.EXIT_FAILURE
    assert "is a directory holding other files (no manifest.json)" in err
    assert listing(tmp_path) == ["home", "home/thesis.tex"]


def test_impossible_path_is_refused_and_nothing_written(tmp_path, capsys):
    (tmp_path / "a-file").write_text("")
    target = tmp_path / "a-file" / "snap"

    status, out, err = record(capsys, target)

    assert status == cli.EXIT_FAILURE
    assert out == ""
    assert err == (f"virtdriver: snapshot -o {target} cannot be created: "
                   f"{tmp_path / 'a-file'} is not a directory; choose "
                   "another path\n")
    assert listing(tmp_path) == ["a-file"]


def test_unwritable_place_is_an_error_not_a_traceback(tmp_path, capsys,
                                                      monkeypatch):
    # Root may write anywhere, so refuse the staging directory by hand.
    def refuse(*args, **kwargs):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(snapshot_cli.tempfile, "mkdtemp", refuse)

    status, _, err = record(capsys, tmp_path / "snap")

    assert status == cli.EXIT_FAILURE
    assert err == (f"virtdriver: snapshot -o {tmp_path / 'snap'}: cannot "
                   "create a directory there (Permission denied); choose a "
                   "path you may write\n")
    assert listing(tmp_path) == []


def test_an_earlier_snapshot_is_replaced_whole(tmp_path, capsys):
    target = tmp_path / "snap"
    assert record(capsys, target)[0] == 0
    (target / "domcaps-99.xml").write_text("stale")

    assert record(capsys, target)[0] == 0

    assert not (target / "domcaps-99.xml").exists()
    assert (target / "manifest.json").is_file()
    assert listing(tmp_path)[0] == "snap"
    assert all(p.startswith("snap") for p in listing(tmp_path))


def test_an_empty_directory_is_used(tmp_path, capsys):
    (tmp_path / "snap").mkdir()
    assert record(capsys, tmp_path / "snap")[0] == 0
    assert (tmp_path / "snap" / "manifest.json").is_file()


def test_a_failed_write_leaves_nothing(tmp_path, capsys, monkeypatch):
    real_write = snapshot_cli.write_snapshot

    def write_then_fail(directory, documents, uri):
        real_write(directory, documents, uri)
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(snapshot_cli, "write_snapshot", write_then_fail)

    status, _, err = record(capsys, tmp_path / "snap")

    assert status == cli.EXIT_FAILURE
    assert "cannot write it (No space left on device); nothing was " \
           "written" in err
    assert listing(tmp_path) == []


def test_a_failed_replace_keeps_the_earlier_snapshot(tmp_path, capsys,
                                                     monkeypatch):
    target = tmp_path / "snap"
    assert record(capsys, target)[0] == 0
    before = (target / "manifest.json").read_text()

    def fail(directory, documents, uri):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(snapshot_cli, "write_snapshot", fail)

    assert record(capsys, target)[0] == cli.EXIT_FAILURE
    assert (target / "manifest.json").read_text() == before
    assert [p for p in listing(tmp_path) if not p.startswith("snap")] == []


@pytest.mark.parametrize("argv", [["snapshot", "-o", "x", "--snapshot", "y"]])
def test_snapshot_does_not_replay(argv, capsys):
    with pytest.raises(SystemExit):
        cli.main(argv)
    assert "unrecognized arguments: --snapshot" in capsys.readouterr().err
