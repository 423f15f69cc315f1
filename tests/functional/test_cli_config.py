"""Bad input through config files and the pinning options, end to end
through ``virtdriver report``: exit 2 and one clear message, never a
traceback; unknown options in virtdriver's sections are named."""

from __future__ import annotations

import json

import pytest

from virtdriver import cli
from virtdriver.drivers.libvirt import connection


def run(capsys, *argv):
    status = cli.main(list(argv))
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def one_message(err):
    """The one error message on stderr (asserting there is one)."""
    assert err.startswith("virtdriver: "), err
    assert "Traceback" not in err
    assert err.count("\n") == 1, err
    return err


@pytest.fixture
def conf_file(tmp_path):
    def write(text, name="virtdriver.conf"):
        path = tmp_path / name
        path.write_text(text)
        return str(path)
    return write


@pytest.mark.parametrize("option, named", [
    ("--cpu-dedicated-set=a-b",
     "[compute] cpu_dedicated_set = 'a-b': invalid CPU set 'a-b'"),
    ("--cpu-shared-set=0-3,x", "[compute] cpu_shared_set = '0-3,x'"),
    ("--reserved-huge-pages=garbage",
     "[compute] reserved_huge_pages entry 'garbage'"),
    ("--reserved-host-memory-mb=-5",
     "[compute] reserved_host_memory_mb = -5 is negative; use 0 or more"),
    ("--reserved-host-memory-mb=lots",
     "--reserved-host-memory-mb ([compute] reserved_host_memory_mb): "
     "invalid literal"),
])
def test_fake_driver_malformed_pinning_option(option, named, capsys):
    status, out, err = run(capsys, "report", "--driver", "fake", option)

    assert status == cli.EXIT_FAILURE
    assert out == ""
    assert named in one_message(err)


@pytest.mark.parametrize("ratio", ["abc", "0", "-1", "nan", "inf"])
@pytest.mark.parametrize("option", ["cpu_allocation_ratio",
                                    "ram_allocation_ratio"])
def test_fake_driver_bad_ratio_in_a_file(ratio, option, conf_file, capsys):
    path = conf_file(f"[compute]\n{option} = {ratio}\n")

    status, out, err = run(capsys, "report", "--driver", "fake",
                           "--config-file", path)

    assert status == cli.EXIT_FAILURE
    message = one_message(err)
    assert f"[compute] {option}" in message
    assert path in message
    if ratio != "abc":
        assert "must be a finite number greater than 0" in message


@pytest.fixture
def snapshot_dir(tmp_path, capsys):
    """test:///default recorded with ``virtdriver snapshot``."""
    root = tmp_path / "snap"
    assert cli.main(["snapshot", "--uri", "test:///default", "-o",
                     str(root)]) == 0
    capsys.readouterr()
    return str(root)


@pytest.mark.parametrize("text, named", [
    ("[compute]\ncpu_allocation_ratio = nan\n",
     "[compute] cpu_allocation_ratio = nan must be a finite number"),
    ("[compute]\ncpu_dedicated_set = a-b\n", "invalid CPU set 'a-b'"),
])
def test_libvirt_driver_bad_option_exits_2(text, named, snapshot_dir,
                                           conf_file, capsys):
    status, _, err = run(capsys, "report", "--snapshot", snapshot_dir,
                         "--config-file", conf_file(text))

    assert status == cli.EXIT_FAILURE
    assert named in one_message(err)


def test_non_utf8_config_file(tmp_path, capsys):
    path = tmp_path / "latin1.conf"
    path.write_bytes("[compute]\n# café\ncpu_shared_set = 0\n"
                     .encode("latin-1"))

    status, out, err = run(capsys, "report", "--driver", "fake",
                           "--config-file", str(path))

    assert status == cli.EXIT_FAILURE
    assert out == ""
    assert one_message(err) == (
        f"virtdriver: bad configuration: config file {path} is not UTF-8 "
        "text (byte 0xe9 on line 2); save it as UTF-8\n")


def test_directory_as_config_file(tmp_path, capsys):
    status, _, err = run(capsys, "host", "--config-file", str(tmp_path))

    assert status == cli.EXIT_FAILURE
    assert f"config file {tmp_path} is a directory; give a file" in \
        one_message(err)


@pytest.mark.parametrize("text, unknown, closest", [
    ("[compute]\ncpu_dedicated_sett = 0-3\n", "[compute] cpu_dedicated_sett",
     "cpu_dedicated_set"),
    ("[compute]\ncpu-shared-set = 0-3\n", "[compute] cpu-shared-set",
     "cpu_shared_set"),
    ("[LIBVIRT]\nvirt_typ = kvm\n", "[LIBVIRT] virt_typ", "virt_type"),
    ("[virtdriver]\nstatedir = /tmp\n", "[virtdriver] statedir",
     "state_dir"),
])
def test_unknown_option_in_our_sections_is_named(text, unknown, closest,
                                                 conf_file, capsys):
    path = conf_file(text)

    status, out, err = run(capsys, "report", "--driver", "fake",
                           "--config-file", path)

    assert status == cli.EXIT_FAILURE
    assert out == ""
    message = one_message(err)
    assert f"{unknown} in {path} is not a virtdriver option" in message
    assert f"did you mean {closest}?" in message


def test_every_unknown_option_is_listed(conf_file, capsys):
    path = conf_file("[compute]\ncpu_dedicated_sett = 0-3\n"
                     "[libvirt]\nzzz = 1\n")

    status, _, err = run(capsys, "host", "--config-file", path)

    assert status == cli.EXIT_FAILURE
    assert "[compute] cpu_dedicated_sett" in err
    assert "[libvirt] zzz" in err and "[libvirt] has connection_uri," in err


def test_other_sections_and_default_are_left_alone(conf_file, capsys,
                                                   tmp_path):
    # [DEFAULT] is shared with oslo.log and others; [placement] is not ours.
    log = tmp_path / "x.log"
    path = conf_file(f"[DEFAULT]\nuse_json = true\nlog_file = {log}\n"
                     "[placement]\nauth_url = http://placement\n"
                     "[compute]\ncpu_dedicated_set = 0-1\n")

    status, out, _ = run(capsys, "report", "--driver", "fake", "--format",
                         "json", "--config-file", path)

    assert status == 0
    cell = json.loads(out)["providers"][1]["inventories"]
    assert cell["PCPU"]["total"] == 2  # the known option did apply
    first = json.loads(log.read_text().splitlines()[0])  # oslo.log's JSON
    assert "report: logging to" in first["message"]


def record_state_dir():
    """An opener that notes the state directory the connection code would
    use at the moment it opens libvirt."""
    seen = []

    def opener(uri):
        seen.append(connection.state_dir())
        raise connection.LibvirtConnectionError(uri or "qemu:///embed",
                                                "stop here", "nothing")
    return opener, seen


def test_state_dir_option_is_the_state_dir(tmp_path, conf_file, capsys,
                                           monkeypatch):
    monkeypatch.setenv("VIRTDRIVER_STATE_DIR", str(tmp_path / "env"))
    wanted = tmp_path / "configured" / "state"
    path = conf_file(f"[virtdriver]\nstate_dir = {wanted}\n")
    opener, seen = record_state_dir()

    cli.main(["host", "--config-file", path], opener=opener)

    assert seen == [wanted]
    assert wanted.is_dir()
    # Only for the command: the environment is as it was afterwards.
    assert connection.state_dir() == tmp_path / "env"


def test_without_the_option_the_environment_decides(tmp_path, capsys,
                                                    monkeypatch):
    monkeypatch.setenv("VIRTDRIVER_STATE_DIR", str(tmp_path / "env"))
    opener, seen = record_state_dir()

    cli.main(["host"], opener=opener)

    assert seen == [tmp_path / "env"]


def test_unusable_state_dir_option(tmp_path, conf_file, capsys):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    path = conf_file(f"[virtdriver]\nstate_dir = {blocker}\n")

    status, _, err = run(capsys, "report", "--driver", "fake",
                         "--config-file", path)

    assert status == cli.EXIT_FAILURE
    message = one_message(err)
    assert str(blocker) in message and "[virtdriver] state_dir" in message


def test_blank_state_dir_option_counts_as_unset(tmp_path, conf_file,
                                               capsys, monkeypatch):
    monkeypatch.setenv("VIRTDRIVER_STATE_DIR", str(tmp_path / "env"))
    path = conf_file("[virtdriver]\nstate_dir =\n")
    opener, seen = record_state_dir()

    cli.main(["host", "--config-file", path], opener=opener)

    assert seen == [tmp_path / "env"]
