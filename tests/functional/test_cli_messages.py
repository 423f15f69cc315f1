"""Issue 26: bad values that ended as internal errors, and messages a user
can act on — through ``cli.main`` in-process (the production path; the
fake driver, a state directory in tmp_path), asserting the exit status
and the exact first line."""

from __future__ import annotations

import json
import pathlib

import pytest

from virtdriver import cli

FAKE = ["--driver", "fake", "--host-spec", "small"]
UUID = "11111111-2222-3333-4444-555555555555"
PERCENT_URL = "http://127.0.0.1:9/placement%zz"
PERCENT_LINE = (
    f"virtdriver: --placement-url {PERCENT_URL!r} holds a '%', which "
    "keystoneauth would read as the start of a %(name)s field; give "
    "Placement's endpoint, e.g. http://placement.example:8778")


@pytest.fixture(autouse=True)
def state(tmp_path, monkeypatch) -> pathlib.Path:
    path = tmp_path / "state"
    monkeypatch.setenv("VIRTDRIVER_STATE_DIR", str(path))
    return path


def run(capsys, *argv: str) -> tuple[int, list[str], str]:
    """Exit status, stderr's lines, stdout."""
    try:
        status = cli.main(list(argv))
    except SystemExit as exc:  # argparse's exit, as the console script's
        status = exc.code
    captured = capsys.readouterr()
    return status, captured.err.splitlines(), captured.out


def documents(tmp_path) -> dict[str, str]:
    """A flavor, an image and an instance document."""
    files = {"flavor": {"vcpus": 1, "memory_mb": 512, "root_gb": 1},
             "image": {"properties": {}},
             "instance": {"uuid": UUID,
                          "flavor": {"vcpus": 1, "memory_mb": 512}}}
    paths = {}
    for name, body in files.items():
        path = tmp_path / f"{name}.json"
        path.write_text(json.dumps(body))
        paths[name] = str(path)
    return paths


# -- a % in a Placement URL: bad input, not a keystoneauth ValueError --------

@pytest.mark.parametrize("command", ["sync", "claim", "placement-request"])
def test_a_percent_in_placement_url_is_refused(tmp_path, capsys, command,
                                               state):
    docs = documents(tmp_path)
    extra = {"sync": FAKE,
             "claim": ["--instance", docs["instance"], *FAKE],
             "placement-request": ["--flavor", docs["flavor"],
                                   "--image", docs["image"]]}[command]
    status, err, _ = run(capsys, command, "--placement-url", PERCENT_URL,
                         *extra)
    assert (status, err) == (2, [PERCENT_LINE])
    assert not state.exists()  # refused before anything ran


@pytest.mark.parametrize("command", [["sync"], ["agent", "--once"]])
def test_a_percent_in_endpoint_override_is_refused(tmp_path, capsys,
                                                   command):
    conf = tmp_path / "virtdriver.conf"
    conf.write_text(f"[placement]\nendpoint_override = {PERCENT_URL}\n")
    status, err, _ = run(capsys, *command, *FAKE, "--config-file",
                         str(conf))
    assert (status, err) == (2, [
        f"virtdriver: bad configuration (read from {conf}): [placement] "
        f"endpoint_override = {PERCENT_URL!r} holds a '%', which "
        "keystoneauth would read as the start of a %(name)s field; give "
        "Placement's endpoint, e.g. http://placement.example:8778"])


# -- [placement] values of the wrong kind ------------------------------------

@pytest.mark.parametrize("setting, line", [
    ("insecure = maybe", "[placement] insecure: Unexpected boolean value "
     "'maybe'; set it to true or false"),
    ("tls_min_version = SSLv2", "[placement] tls_min_version: Valid values "
     "are [None, 1.2, 1.3], but found 'SSLv2'; set it to 1.2 or 1.3, or "
     "leave it unset"),
    ("connect_retries = few", "[placement] connect_retries: invalid literal "
     "for int() with base 10: 'few'; correct it (see `virtdriver help "
     "configuration`)"),
])
def test_a_placement_option_of_the_wrong_kind_is_refused(tmp_path, capsys,
                                                         setting, line):
    conf = tmp_path / "virtdriver.conf"
    conf.write_text("[placement]\nendpoint_override = http://127.0.0.1:9\n"
                    f"{setting}\n")
    status, err, _ = run(capsys, "sync", *FAKE, "--config-file", str(conf))
    assert (status, err) == (
        2, [f"virtdriver: bad configuration (read from {conf}): {line}"])


# -- placement serve --port --------------------------------------------------

@pytest.mark.parametrize("port", ["99999", "65536", "-1", "http", "8.5"])
def test_placement_serve_refuses_a_port_out_of_range(capsys, port, state):
    status, err, _ = run(capsys, "placement", "serve", "--port", port)
    assert (status, err) == (2, [
        f"virtdriver: placement serve: argument --port: {port!r} is not a "
        "port; give 1 to 65535, or 0 for any free one",
        "virtdriver: run `virtdriver placement serve --help` for its "
        "options"])
    assert not state.exists()


def test_placement_serve_takes_every_real_port_and_0_for_any():
    from virtdriver.cli.parser import build_parser
    for port in (0, 1, 8778, 65535):
        args = build_parser().parse_args(
            ["placement", "serve", "--port", str(port)])
        assert args.port == port


# -- explain with a very long name -------------------------------------------

def test_explain_refuses_a_name_longer_than_any_trait_at_once(capsys):
    # 100,000 characters took more than 45 s (a quadratic regular
    # expression over the command line): no time is asserted, the test
    # simply has to finish.
    name = "CUSTOM_" + "A" * 100_000
    status, err, out = run(capsys, "explain", *FAKE, "HW_CPU_X86_AVX", name)
    assert (status, out) == (2, "")
    assert err == [
        "virtdriver: explain: 'CUSTOM_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA'... "
        "is 100007 characters long, and no trait name is longer than 255 "
        "(Placement's limit); check the name"]


def test_explain_still_answers_a_name_of_255_characters(capsys):
    name = "CUSTOM_" + "A" * 248
    status, err, out = run(capsys, "explain", *FAKE, name)
    assert (status, err) == (0, [])
    assert out.startswith(f"{name}: not ours")


# -- malformed trait names: one clause per rule broken -----------------------

@pytest.mark.parametrize("name, reason", [
    ("CUSTOM_mydrv-fw 1.2.3",
     "custom names must match ^CUSTOM_[A-Z0-9_]+$, and it has lower-case "
     "letters and the characters '-', ' ', '.'"),
    ("CUSTOM_lower", "custom names must match ^CUSTOM_[A-Z0-9_]+$, and it "
     "has lower-case letters"),
    ("CUSTOM_", "custom names must match ^CUSTOM_[A-Z0-9_]+$, and it has "
     "nothing after CUSTOM_"),
    ("CUSTOM_A:B", "custom names must match ^CUSTOM_[A-Z0-9_]+$, and it "
     "has the character ':'"),
    ("hw_cpu_x86_avx", "neither an os-traits standard trait nor a CUSTOM_ "
     "name (os-traits {v}); trait names hold only A-Z, 0-9 and _, and it "
     "has lower-case letters"),
    ("CUSTOM_" + "B" * 250, "trait names are at most 255 characters, and "
     "it has 257"),
    ("CUSTOM_" + "b" * 250, "custom names must match ^CUSTOM_[A-Z0-9_]+$, "
     "and it has lower-case letters; trait names are at most 255 "
     "characters, and it has 257"),
])
def test_a_malformed_trait_name_is_explained_rule_by_rule(capsys, name,
                                                          reason):
    import os_traits
    from importlib.metadata import version

    from virtdriver.capabilities.traits.names import invalid_reason
    from virtdriver.providers.errors import InvalidProvider
    from virtdriver.providers.record import check_traits
    assert os_traits.normalize_name  # os-traits is what names the version
    reason = reason.replace("{v}", version("os-traits"))
    assert invalid_reason(name) == reason
    # The tree's check reads as a sentence too (it said "'X' is custom
    # names must match ...").
    with pytest.raises(InvalidProvider) as info:
        check_traits("cn1", [name])
    assert f"{name!r} is not a valid trait name: {reason}; " in str(
        info.value)
    if len(name) <= 255:  # explain, through the command
        status, err, out = run(capsys, "explain", *FAKE, name)
        assert status == 2
        assert out.splitlines()[0] == (
            f"{name}: not a valid trait name — {reason}")
        assert err == [f"virtdriver: {name}: not a trait name; check the "
                       "spelling (an os-traits name or CUSTOM_...)"]


def test_redacting_a_long_command_line_is_linear_and_unchanged():
    import re

    from virtdriver.redact import has_userinfo, redact_userinfo
    old = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*://)[^\s]*@")
    samples = ["http://u:p@host:8778", "x 1http://u@h y", "a://b@c@d e",
               "ftp://a@b http://c:d@e/f", "://@", "-://x@y", "h://@",
               "see https://user:pa ss@host", "no url here", ""]
    for text in samples:
        assert redact_userinfo(text) == old.sub(r"\1***@", text), text
        assert has_userinfo(text) == bool(old.search(text)), text
    # What took the old expression minutes; no time is asserted.
    for hostile in ("@" + "a" * 200_000 + "://", "a://" * 50_000 + "@",
                    "A" * 200_000):
        assert redact_userinfo(hostile) == hostile.replace(
            "a://" * 50_000 + "@", "a://***@")


# -- a '$' oslo.config cannot substitute -------------------------------------

SUBSTITUTE = ("a '$' in its value substitutes $nosuch, and there is no "
              "option 'nosuch'; write $$ for a literal '$' (see `virtdriver "
              "help configuration`)")


@pytest.mark.parametrize("text, option", [
    ("[compute]\nreserved_host_memory_mb = $nosuch\n",
     "[compute] reserved_host_memory_mb"),
    ("[virtdriver]\nstate_dir = /srv/$nosuch\n", "[virtdriver] state_dir"),
    # oslo.log's option, read while oslo.config parses the files.
    ("[DEFAULT]\nlog_dir = /var/log/$nosuch\n", "[DEFAULT] log_dir"),
    # An auth plugin's option, read only when the plugin loads.
    ("[placement]\nauth_type = password\nauth_url = http://127.0.0.1:9/v3\n"
     "username = u\npassword = pa$nosuch\n",
     "[placement] (auth_type = password)"),
])
def test_a_dollar_naming_no_option_is_bad_input(tmp_path, capsys, text,
                                                option):
    conf = tmp_path / "virtdriver.conf"
    conf.write_text(text)
    status, err, _ = run(capsys, "sync", *FAKE, "--config-file", str(conf))
    assert (status, err) == (2, [
        f"virtdriver: bad configuration (read from {conf}): {option}: "
        f"{SUBSTITUTE}"])


def test_a_dollar_oslo_config_can_substitute_still_works(tmp_path):
    from virtdriver.conf import make_conf
    conf = tmp_path / "virtdriver.conf"
    conf.write_text("[DEFAULT]\nhost = cmp7\n[virtdriver]\n"
                    f"state_dir = {tmp_path}/$$literal/$host\n")
    read = make_conf(config_files=[conf])
    assert read.virtdriver.state_dir == f"{tmp_path}/$literal/cmp7"


def test_a_dollar_on_the_command_line_is_literal(capsys):
    status, err, _ = run(capsys, "report", *FAKE, "--cpu-shared-set", "$x")
    assert (status, err) == (2, [
        "virtdriver: fake driver options: bad configuration: [compute] "
        "cpu_shared_set = '$x': invalid CPU set '$x': '$x' is not a CPU id "
        "or range; expected comma-separated ids or ranges such as "
        "'0-3,^2,8-11'"])
    status, err, _ = run(capsys, "report", *FAKE, "--virt-type", "$x")
    assert status == 2 and "but found '$x';" in err[0]


def test_a_dollar_in_a_log_option_on_the_command_line_is_literal(
        tmp_path, capsys):
    status, err, _ = run(capsys, "report", *FAKE, "--log-file",
                         f"{tmp_path}/$nosuch.log")
    assert (status, err) == (0, [])
    assert (tmp_path / "$nosuch.log").is_file()


def test_a_dollar_in_a_configured_log_option_is_bad_input_not_a_bug(
        tmp_path, capsys):
    conf = tmp_path / "v.conf"
    conf.write_text(f"[DEFAULT]\nlog_file = {tmp_path}/$nosuch\n")
    conf.chmod(0o600)
    status, err, _ = run(capsys, "report", *FAKE, "--config-file",
                         str(conf))
    assert status == 2 and len(err) == 1, err
    assert "substitutes $nosuch, and there is no option 'nosuch'" in err[0]
