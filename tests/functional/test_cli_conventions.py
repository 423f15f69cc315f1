"""CLI conventions: ``config sample``, the exit-code table of
docs/exit-codes.md checked against the commands, and the bash completion
script of ``completion bash``."""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import re
import shutil
import subprocess
import sys

import pytest

from virtdriver import cli
from virtdriver.capabilities.traits.config import CPU_MODES
from virtdriver.conf import list_opts, make_conf

ROOT = pathlib.Path(__file__).resolve().parents[2]
EXIT_CODES = ROOT / "docs" / "exit-codes.md"
FAKE = ["--driver", "fake", "--host-spec", "numa2-ht"]


def virtdriver(*args: str, env: dict | None = None
               ) -> subprocess.CompletedProcess:
    """The command, as a real subprocess."""
    return subprocess.run([sys.executable, "-m", "virtdriver.cli", *args],
                          capture_output=True, text=True, timeout=120,
                          env={**os.environ, **(env or {})})


# -- config sample -----------------------------------------------------------

def test_config_sample_parses_back_and_names_every_option(tmp_path):
    sample = tmp_path / "virtdriver.conf.sample"
    result = virtdriver("config", "sample", "-o", str(sample))
    assert result.returncode == 0, result.stderr
    assert result.stdout == ""
    text = sample.read_text()
    # Every option, commented out at its default, under its own section.
    sections = re.split(r"^\[(\w+)\]$", text, flags=re.M)
    by_section = dict(zip(sections[1::2], sections[2::2], strict=True))
    for group, opts in list_opts():
        assert group in by_section, group
        for opt in opts:
            assert re.search(rf"^#{opt.dest} =", by_section[group], re.M), (
                group, opt.dest)
    # The keystone options oslo's generator takes from the auth plugin.
    for name in ("auth_type", "auth_url", "username", "password",
                 "project_name", "valid_interfaces"):
        assert re.search(rf"^#{name} =", by_section["placement"], re.M), name
    conf = make_conf(config_files=[sample])  # all defaults: still valid
    assert conf.compute.reserved_host_memory_mb == 512
    assert conf.libvirt.connection_uri == ""


def test_config_sample_to_stdout_is_what_oslo_config_generator_writes():
    generator = shutil.which("oslo-config-generator",
                             path=os.path.dirname(sys.executable))
    if generator is None:
        pytest.skip("oslo-config-generator is not installed beside Python")
    ours = virtdriver("config", "sample")
    theirs = subprocess.run([generator, "--namespace", "virtdriver"],
                            capture_output=True, text=True, timeout=60)
    assert ours.returncode == 0 and theirs.returncode == 0, theirs.stderr
    assert "[placement]" in ours.stdout
    assert ours.stdout == theirs.stdout


def test_config_sample_to_an_unwritable_path_is_bad_input(tmp_path, capsys):
    target = tmp_path / "no" / "such" / "dir" / "sample.conf"
    assert cli.main(["config", "sample", "-o", str(target)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"virtdriver: cannot use {target}")
    assert "Traceback" not in err


# -- exit codes --------------------------------------------------------------

def documented_codes() -> dict[int, list[str]]:
    """status -> meanings, from the one table in docs/exit-codes.md."""
    table: dict[int, list[str]] = {}
    for line in EXIT_CODES.read_text().splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if cells and cells[0].isdigit():
            table.setdefault(int(cells[0]), []).append(cells[1])
    return table


def assert_documented(status: int, meaning: str) -> None:
    table = documented_codes()
    assert status in table, f"exit {status} is not in {EXIT_CODES.name}"
    assert any(meaning in row for row in table[status]), (
        f"{EXIT_CODES.name} does not say exit {status} means {meaning!r}: "
        f"{table[status]}")


def test_the_table_has_each_convention_once():
    table = documented_codes()
    assert set(table) == {0, 1, 2, 3, 70, 130, 141}
    assert_documented(1, "refused")
    assert_documented(70, "internal error")
    assert not any("internal" in row for row in table[1])


def test_a_usage_error_exits_2_with_one_line_of_cause_and_what_to_do():
    for args in (["report", "--no-such-option"],
                 ["report", "--format", "xml"],
                 ["no-such-command"],
                 ["config"]):
        result = virtdriver(*args)
        assert_documented(result.returncode, "usage")
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 2, result.stderr
        assert all(line.startswith("virtdriver: ") for line in lines)
        assert "--help" in lines[1] and "Traceback" not in result.stderr


@pytest.mark.parametrize("command", ["report", "sync", "claims"])
def test_a_bad_input_file_exits_2(tmp_path, command):
    bad = tmp_path / "virtdriver.conf"
    bad.write_text("this is not = an ini file\n")
    result = virtdriver(command, *FAKE, "--config-file", str(bad),
                        env={"VIRTDRIVER_STATE_DIR": str(tmp_path / "s")})
    assert_documented(result.returncode, "input error")
    assert str(bad) in result.stderr and "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr


def test_an_unreachable_placement_exits_3(tmp_path):
    result = virtdriver("sync", *FAKE, "--placement-url",
                        "http://127.0.0.1:9",
                        env={"VIRTDRIVER_STATE_DIR": str(tmp_path / "s")})
    assert_documented(result.returncode, "environment")
    assert "virtdriver: " in result.stderr
    assert "Traceback" not in result.stderr


def test_a_refused_rebuild_exits_1(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("VIRTDRIVER_STATE_DIR", str(tmp_path / "state"))
    assert cli.main(["report", "--format", "json", *FAKE]) == 0
    tree = tmp_path / "tree.json"
    tree.write_text(capsys.readouterr().out)
    root = json.loads(tree.read_text())["providers"][0]["uuid"]
    instance = tmp_path / "instance.json"
    instance.write_text(json.dumps({
        "uuid": "11111111-2222-3333-4444-555555555555",
        "flavor": {"vcpus": 1, "memory_mb": 512},
        "allocations": {root: {"resources": {"DISK_GB": 1}}}}))
    image = tmp_path / "image.json"
    image.write_text(json.dumps({"properties": {
        "trait:CUSTOM_NOT_ON_THIS_HOST": "required"}}))
    status = cli.main(["rebuild-check", "--instance", str(instance),
                       "--image", str(image), "--providers", str(tree),
                       *FAKE])
    assert json.loads(capsys.readouterr().out)["allowed"] is False
    assert_documented(status, "refused")


def test_an_internal_error_exits_70_not_1_with_one_line(monkeypatch, capsys):
    def broken(args):
        raise ZeroDivisionError("division by zero")
    monkeypatch.setattr("virtdriver.cli.config.run_config", broken)
    status = cli.main(["config", "sample"])
    err = capsys.readouterr().err.splitlines()
    assert status == 70  # not 1, which means refused or a finding
    assert_documented(status, "internal error")
    assert err[0] == ("virtdriver: internal error: ZeroDivisionError: "
                      "division by zero")
    assert "--debug" in err[1] and len(err) == 2
    assert cli.main(["--debug", "config", "sample"]) == 70
    assert "Traceback" in capsys.readouterr().err


# -- bash completion ---------------------------------------------------------

BASH = shutil.which("bash")
needs_bash = pytest.mark.skipif(BASH is None, reason="bash is not installed")


@pytest.fixture(scope="module")
def script(tmp_path_factory) -> pathlib.Path:
    result = virtdriver("completion", "bash")
    assert result.returncode == 0, result.stderr
    path = tmp_path_factory.mktemp("completion") / "virtdriver.bash"
    path.write_text(result.stdout)
    return path


def complete(script: pathlib.Path, *words: str) -> list[str]:
    """What bash offers for the last of ``words`` after ``virtdriver``."""
    quoted = " ".join(f"'{word}'" for word in ("virtdriver", *words))
    result = subprocess.run(
        [BASH, "-c", f'source "$1"; COMP_WORDS=({quoted}); '
         f'COMP_CWORD={len(words)}; _virtdriver; '
         'printf "%s\\n" "${COMPREPLY[@]}"', "bash", str(script)],
        capture_output=True, text=True, timeout=30)
    assert result.returncode == 0 and result.stderr == "", result.stderr
    return [line for line in result.stdout.splitlines() if line]


@needs_bash
def test_the_completion_script_is_valid_bash(script):
    result = subprocess.run([BASH, "-n", str(script)], capture_output=True,
                            text=True, timeout=30)
    assert result.returncode == 0, result.stderr
    registered = subprocess.run(
        [BASH, "-c", 'source "$1"; complete -p virtdriver', "bash",
         str(script)], capture_output=True, text=True, timeout=30)
    assert "-F _virtdriver virtdriver" in registered.stdout


@needs_bash
def test_completion_of_commands_options_and_choices(script):
    assert sorted(complete(script, "re")) == sorted(
        ["report", "rebuild-check", "release"])
    assert sorted(complete(script, "--debug", "con")) == ["config"]
    assert complete(script, "drivers", "--format", "") == ["text", "json"]
    assert complete(script, "host", "--cpu-mode", "") == list(CPU_MODES)
    assert complete(script, "completion", "") == [
        "-h", "--help", "--debug", "--quiet", "--log-file", "--log-dir",
        "--use-journal", "--use-syslog", "bash"]
    assert complete(script, "config", "s") == ["sample"]
    assert "--placement-url" in complete(script, "sync", "--pl")
    assert "--dry-run" not in complete(script, "report", "--")


@needs_bash
def test_a_file_option_completes_file_names(script, tmp_path, monkeypatch):
    (tmp_path / "tree-a.json").write_text("{}")
    monkeypatch.chdir(tmp_path)
    assert complete(script, "rebuild-check", "--providers", "tree") == [
        "tree-a.json"]


@needs_bash
def test_driver_names_and_presets_complete(script, tmp_path, monkeypatch):
    from virtdriver.drivers.fake_host import PRESETS
    assert {"libvirt", "fake", "ironic"} <= set(
        complete(script, "report", "--driver", ""))
    assert complete(script, "sync", "--driver", "ir") == ["ironic"]
    monkeypatch.chdir(tmp_path)
    assert sorted(complete(script, "report", "--host-spec", "")) == sorted(
        PRESETS)
    (tmp_path / "numa-spec.yaml").write_text("{}")  # a spec may be a file
    assert sorted(complete(script, "claims", "--host-spec", "numa")) == [
        "numa-spec.yaml", "numa2-ht", "numa4-large"]


def test_the_script_follows_the_parser(capsys):
    from virtdriver.cli.parser import build_parser
    assert cli.main(["completion", "bash"]) == 0
    out = capsys.readouterr().out
    commands = build_parser()._subparsers._group_actions[0].choices
    for name, sub in commands.items():
        found = re.search(rf"^ +'{name}'\) words='([^']*)'; values='([^']*)'",
                          out, re.M)
        assert found, name
        words, values = (set(group.split()) for group in found.groups())
        options = {option for action in sub._actions
                   for option in action.option_strings}
        takes_value = {option for action in sub._actions if action.nargs != 0
                       for option in action.option_strings}
        nested = {option for action in sub._actions
                  if isinstance(action, argparse._SubParsersAction)
                  for parser in action.choices.values()
                  for option_action in parser._actions
                  for option in option_action.option_strings}
        assert options <= words, (name, options - words)
        assert takes_value <= values <= options | nested, name
