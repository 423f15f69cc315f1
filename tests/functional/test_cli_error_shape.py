"""Every error has one shape (docs/exit-codes.md): ``virtdriver: <cause>``,
at most one more ``virtdriver:`` line of what to do, no traceback, the
documented status — usage errors included, which argparse printed as its
usage block and ``virtdriver COMMAND: error: ...`` (issue 26).  Also:
"did you mean" for a mistyped command, action, choice or option, and
``--help``'s exit statuses equal to the table's."""

from __future__ import annotations

import pathlib
import re

import pytest

from virtdriver import cli

ROOT = pathlib.Path(__file__).resolve().parents[2]
FAKE = ["--driver", "fake", "--host-spec", "small"]


@pytest.fixture(autouse=True)
def state(tmp_path, monkeypatch) -> pathlib.Path:
    path = tmp_path / "state"
    monkeypatch.setenv("VIRTDRIVER_STATE_DIR", str(path))
    return path


def run(capsys, argv: list[str]) -> tuple[int, list[str]]:
    """Exit status and stderr's lines of the command ``argv``."""
    try:
        status = cli.main(argv)
    except SystemExit as exc:  # argparse's exit, as the console script's
        status = exc.code
    return status, capsys.readouterr().err.splitlines()


def bad_file(tmp_path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


#: (id, argv (``{tmp}`` is tmp_path), status, the first line or a prefix
#: of it ending in "...").
CASES = [
    ("bad choice", ["report", "--format", "xml"], 2,
     "virtdriver: report: argument --format: invalid choice: 'xml'; choose "
     "from 'text', 'json', 'dot'"),
    ("close choice", ["report", "--format", "jsno"], 2,
     "virtdriver: report: argument --format: invalid choice: 'jsno'; did "
     "you mean 'json'?"),
    ("typo'd option", ["sync", "--drvier", "fake"], 2,
     "virtdriver: sync: unrecognized arguments: --drvier fake; did you mean "
     "--driver?"),
    ("typo'd option=value", ["report", "--fromat=json"], 2,
     "virtdriver: report: unrecognized arguments: --fromat=json; did you "
     "mean --format?"),
    ("unknown option", ["report", "--no-such-option"], 2,
     "virtdriver: report: unrecognized arguments: --no-such-option"),
    ("typo'd command", ["snyc"], 2,
     "virtdriver: argument COMMAND: invalid choice: 'snyc'; did you mean "
     "'sync'?"),
    ("typo'd action", ["placement", "serv"], 2,
     "virtdriver: placement: argument ACTION: invalid choice: 'serv'; did "
     "you mean 'serve'?"),
    ("no command", [], 2,
     "virtdriver: the following arguments are required: COMMAND"),
    ("no action", ["config"], 2,
     "virtdriver: config: the following arguments are required: ACTION"),
    ("bad option value", ["report", *FAKE, "--reserved-host-memory-mb",
                          "abc"], 2,
     "virtdriver: bad configuration: --reserved-host-memory-mb ([compute] "
     "reserved_host_memory_mb): invalid literal for int() with base 10: "
     "'abc'; correct it (see `virtdriver help configuration`)"),
    ("option that does not fit", ["report", *FAKE, "--cpu-dedicated-set",
                                  "0-999"], 2,
     "virtdriver: fake host 'fake-small': the configuration does not fit "
     "this host: [compute] cpu_dedicated_set names CPUs 4-999, which this "
     "host does not have (its NUMA cells hold CPUs 0-3); remove them from "
     "the option"),
    ("bad config file", ["report", *FAKE, "--config-file", "{tmp}/bad.conf"],
     2, "virtdriver: ..."),
    ("bad host spec", ["report", "--driver", "fake", "--host-spec",
                       "no-such-preset"], 2,
     "virtdriver: fake host: 'no-such-preset' is neither a preset (small, "
     "numa2-ht, numa4-large) nor a file; name a preset or the path of a "
     "YAML/JSON description"),
    ("missing input file", ["claim", "--instance", "{tmp}/none.json", *FAKE],
     2, "virtdriver: ..."),
    ("unknown driver", ["report", "--driver", "no-such-driver"], 2,
     "virtdriver: no virt driver named 'no-such-driver' in entry-point "
     "namespace 'virtdriver.drivers'; available: ..."),
    ("typo'd driver", ["report", "--driver", "fkae"], 2,
     "virtdriver: no virt driver named 'fkae' in entry-point namespace "
     "'virtdriver.drivers'; did you mean 'fake'? available: ..."),
    ("unknown help topic", ["help", "exit-code"], 2,
     "virtdriver: help: no topic 'exit-code'; did you mean 'exit-codes'? "
     "`virtdriver help` lists the topics"),
    ("unknown status", ["explain", *FAKE, "--status", "bogus"], 2,
     "virtdriver: --status 'bogus' is not a status; ..."),
]


@pytest.mark.parametrize("argv, status, first", [c[1:] for c in CASES],
                         ids=[c[0] for c in CASES])
def test_every_error_is_one_cause_and_at_most_one_line_of_what_to_do(
        tmp_path, capsys, argv, status, first):
    bad_file(tmp_path, "bad.conf", "this is not = an ini file\n")
    argv = [arg.replace("{tmp}", str(tmp_path)) for arg in argv]
    found, err = run(capsys, argv)
    assert found == status, err
    assert 1 <= len(err) <= 2, err
    assert all(line.startswith("virtdriver: ") for line in err), err
    if first.endswith("..."):
        assert err[0].startswith(first[:-3]), err
    else:
        assert err[0] == first
    assert not any("Traceback" in line or ": error: " in line
                   for line in err), err


def test_a_usage_error_says_where_to_look(capsys):
    assert run(capsys, ["sync", "--drvier", "fake"])[1][1] == (
        "virtdriver: run `virtdriver sync --help` for its options")
    assert run(capsys, ["snyc"])[1][1] == (
        "virtdriver: run `virtdriver --help` for the commands")


def test_a_bug_is_one_line_and_the_hint_exit_70(monkeypatch, capsys):
    def broken(args):
        raise ZeroDivisionError("division by zero")
    monkeypatch.setattr("virtdriver.cli.config.run_config", broken)
    assert run(capsys, ["config", "sample"]) == (70, [
        "virtdriver: internal error: ZeroDivisionError: division by zero",
        "virtdriver: this is a bug; rerun with --debug for the traceback"])


def test_an_unreachable_placement_exits_3_in_the_same_shape(capsys):
    status, err = run(capsys, ["sync", *FAKE, "--placement-url",
                               "http://127.0.0.1:9"])
    assert status == 3
    assert 1 <= len(err) <= 2 and err[0].startswith("virtdriver: "), err


# -- --help's exit statuses are the table's ---------------------------------

def help_statuses(capsys) -> dict[int, str]:
    """status → meaning, as ``virtdriver --help`` lists them."""
    with pytest.raises(SystemExit):
        cli.main(["--help"])
    text = " ".join(capsys.readouterr().out.split())
    listed = re.search(r"Exit status: (.*?); ", text).group(1)
    return {int(status): meaning for status, meaning in
            re.findall(r"(\d+) (.*?)(?=, \d+ |$)", listed)}


def table_statuses() -> dict[int, list[str]]:
    """status → meanings, from docs/exit-codes.md's table."""
    table: dict[int, list[str]] = {}
    for line in (ROOT / "docs" / "exit-codes.md").read_text().splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if cells and cells[0].isdigit():
            table.setdefault(int(cells[0]), []).append(cells[1])
    return table


def test_help_lists_exactly_the_documented_exit_statuses(capsys):
    listed, table = help_statuses(capsys), table_statuses()
    assert set(listed) == set(table)
    for status, meaning in listed.items():  # the same words, up to "("
        words = meaning.partition(" (")[0]
        assert words in [row.partition(" (")[0] for row in table[status]], (
            status, meaning, table[status])
    # A bug is 70, as the code exits (test above), not 1.
    assert "bug" in listed[70] and "bug" not in listed[1]


def test_an_unrecognized_value_gets_no_guess_when_nothing_is_close(capsys):
    status, err = run(capsys, ["report", "--zzzzzz"])
    assert status == 2 and "did you mean" not in err[0]
