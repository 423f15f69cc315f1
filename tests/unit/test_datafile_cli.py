"""Bad data files given on the command line: exit 2 and one line, never a
traceback."""

import pytest

from virtdriver import cli


DRIVERS = [["--driver", "fake", "--host-spec"],
           ["--driver", "ironic", "--inventory"]]


@pytest.mark.parametrize("driver_args", DRIVERS)
def test_the_cli_refuses_non_utf8_files_with_exit_2(tmp_path, capsys,
                                                     driver_args):
    path = tmp_path / "data.yaml"
    path.write_bytes(b"cells: 1\n# \xff\n")
    status = cli.main(["report", *driver_args, str(path)])
    err = capsys.readouterr().err
    assert status == cli.EXIT_FAILURE
    assert "Traceback" not in err
    assert f"{path}" in err and "byte 0xff at offset 11 (line 2)" in err


@pytest.mark.parametrize("driver_args", DRIVERS)
def test_the_cli_refuses_a_directory_with_exit_2(tmp_path, capsys,
                                                 driver_args):
    status = cli.main(["report", *driver_args, str(tmp_path)])
    err = capsys.readouterr().err
    assert status == cli.EXIT_FAILURE
    assert str(tmp_path) in err
    assert "is a directory, not a" in err
    assert "give the path of the file itself" in err
