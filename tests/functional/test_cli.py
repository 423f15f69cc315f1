"""The ``virtdriver report`` command, fed by a fake libvirt connection.

The fake returns corpus XML (or hostile XML) so the CLI's parsing,
rendering and error paths run without libvirt.
"""

from __future__ import annotations

import json
import socket

import libvirt
import pytest

from virtdriver import cli
from virtdriver.drivers.libvirt.connection import (
    LibvirtConnectionError,
    URIChoice,
)

FAKE_URI = "fake:///corpus"
HOST_FILE = "hostcaps/caps-qemu-kvm.xml"
DOMAIN_FILE = "domcaps/qemu_10.0.0-q35.x86_64+amdsev.xml"

BILLION_LAUGHS = """<?xml version="1.0"?>
<!DOCTYPE capabilities [
 <!ENTITY lol "lol">
 <!ENTITY lol1 "&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;">
 <!ENTITY lol2 "&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;">
]>
<capabilities><host><uuid>&lol2;</uuid></host></capabilities>
"""


class FakeConnection:
    """The two virConnect calls the report makes, answering canned XML."""

    def __init__(self, host_xml, domain_xml=None, domain_error=None):
        self.host_xml = host_xml
        self.domain_xml = domain_xml
        self.domain_error = domain_error
        self.domain_calls = []
        self.closed = False

    def getCapabilities(self):
        return self.host_xml

    def getDomainCapabilities(self, emulatorbin, arch, machine, virttype,
                              flags=0):
        self.domain_calls.append((emulatorbin, arch, machine, virttype))
        if self.domain_error is not None:
            raise self.domain_error
        return self.domain_xml

    def getLibVersion(self):
        return 9000000

    def getVersion(self):
        return 7002000

    def close(self):
        self.closed = True


def opener_for(conn, reason="fake for tests"):
    def opener(uri):
        return conn, URIChoice(uri or FAKE_URI, reason)
    return opener


@pytest.fixture
def corpus_conn(corpus_dir):
    return FakeConnection((corpus_dir / HOST_FILE).read_text(),
                          (corpus_dir / DOMAIN_FILE).read_text())


def test_text_report_names_uri_reason_and_domain_caps(corpus_conn, capsys):
    status = cli.main(["host"], opener=opener_for(corpus_conn))

    out = capsys.readouterr().out
    assert status == 0
    assert f"libvirt URI: {FAKE_URI}" in out
    assert "why: fake for tests" in out
    assert "NUMA cells: 1, CPUs: 4" in out
    assert "CPUs 0-3" in out
    assert "machine pc-q35-10.0, virt type kvm" in out
    assert "disk buses:   fdc, scsi, virtio, usb, sata, nvme" in out
    assert "firmware:     bios, efi" in out
    assert "TPM models:   tpm-tis, tpm-crb" in out
    assert "SEV:          supported" in out
    assert "TDX:          not supported" in out
    assert corpus_conn.closed


def test_domain_caps_asked_for_host_arch_with_kvm(corpus_conn, capsys):
    cli.main(["host"], opener=opener_for(corpus_conn))

    # caps-qemu-kvm.xml lists kvm guests of x86_64, the host CPU's arch.
    assert corpus_conn.domain_calls == [(None, "x86_64", None, "kvm")]


def test_json_report_parses_and_carries_the_models(corpus_conn, capsys):
    status = cli.main(["host", "--format", "json"],
                      opener=opener_for(corpus_conn))

    data = json.loads(capsys.readouterr().out)
    assert status == 0
    assert data["uri"] == FAKE_URI
    assert data["uri_reason"] == "fake for tests"
    assert [cell["id"] for cell in data["host"]["cells"]] == [0]
    assert sorted(cpu["id"] for cpu in data["host"]["cells"][0]["cpus"]) \
        == [0, 1, 2, 3]
    assert data["domain"]["unknown"] is False
    assert data["domain"]["machine"] == "pc-q35-10.0"
    assert "nvme" in data["domain"]["summary"]["disk_buses"]
    assert data["domain"]["summary"]["sev_supported"] is True
    assert data["domain"]["features"]["sev"]["cbitpos"] == 51


def test_refused_domain_caps_are_reported_unknown(corpus_dir, capsys):
    conn = FakeConnection(
        (corpus_dir / HOST_FILE).read_text(),
        domain_error=libvirt.libvirtError("no domain caps here"))

    status = cli.main(["host"], opener=opener_for(conn))

    out = capsys.readouterr().out
    assert status == 0
    assert "virt type kvm): unknown" in out
    assert "libvirt said: no domain caps here" in out


@pytest.mark.parametrize("host_xml, expected", [
    (BILLION_LAUGHS, "getCapabilities()"),
    ("<capabilities><host><cpu>", "getCapabilities()"),
    ("<domain/>", "getCapabilities()"),
])
def test_unusable_host_xml_exits_2_naming_the_source(host_xml, expected,
                                                     capsys):
    conn = FakeConnection(host_xml)

    status = cli.main(["host"], opener=opener_for(conn))

    captured = capsys.readouterr()
    assert status == cli.EXIT_FAILURE
    assert captured.out == ""
    assert "libvirt capability XML not usable" in captured.err
    assert f"{FAKE_URI} {expected}" in captured.err
    assert conn.closed


def test_unusable_domain_xml_is_unknown_not_fatal(corpus_dir, capsys):
    conn = FakeConnection((corpus_dir / HOST_FILE).read_text(),
                          "<domainCapabilities><path>")

    status = cli.main(["host", "--format", "json"],
                      opener=opener_for(conn))

    data = json.loads(capsys.readouterr().out)
    assert status == 0
    assert data["host"]["cpu"]["arch"] == "x86_64"
    assert data["domain"]["unknown"] is True
    assert "getDomainCapabilities(arch='x86_64', machine=None, " \
           "virttype='kvm')" in data["domain"]["reason"]
    assert "malformed XML" in data["domain"]["reason"]


def test_connection_failure_exits_3_with_what_to_do(capsys):
    def opener(uri):
        raise LibvirtConnectionError(uri, "daemon gone", "start virtqemud")

    status = cli.main(["host", "--uri", "qemu:///system"], opener=opener)

    err = capsys.readouterr().err
    assert status == cli.EXIT_UNREACHABLE
    assert err.startswith("virtdriver: cannot open libvirt")
    assert "Traceback" not in err
    assert "cannot open libvirt at qemu:///system: daemon gone" in err
    assert "start virtqemud" in err


def test_unknown_format_is_a_usage_error(capsys):
    with pytest.raises(SystemExit) as exc:
        cli.main(["host", "--format", "yaml"])
    assert exc.value.code == 2
    assert "invalid choice: 'yaml'" in capsys.readouterr().err


def test_report_lists_traits_with_their_documents(corpus_conn, capsys):
    status = cli.main(["host", "--format", "json"],
                      opener=opener_for(corpus_conn))

    data = json.loads(capsys.readouterr().out)
    assert status == 0
    traits = data["traits"]
    assert "HW_CPU_X86_AMD_SEV" in traits["asserted"]
    assert "COMPUTE_STORAGE_BUS_SATA" in traits["asserted"]
    assert "COMPUTE_STORAGE_BUS_IDE" in traits["unasserted"]
    assert data["trait_documents"] == [{
        "label": "domain capabilities (x86_64, pc-q35-10.0, kvm)",
        "arch": "x86_64", "machine": None, "virt_type": "kvm",
        "read": True, "error": None}]
    sev = traits["traits"]["HW_CPU_X86_AMD_SEV"]
    assert sev["family"] == "memory encryption"
    assert "59 SEV guests" in sev["evidence"][0]["detail"]


def test_text_report_has_a_traits_section(corpus_conn, capsys):
    assert cli.main(["host"], opener=opener_for(corpus_conn)) == 0
    out = capsys.readouterr().out
    assert "Traits (run `virtdriver explain TRAIT` for the evidence)" in out
    assert "from: domain capabilities (x86_64, pc-q35-10.0, kvm)" in out
    assert "HW_CPU_X86_AMD_SEV" in out.split("asserted (")[1]


def test_explain_gives_one_sentence_and_evidence(corpus_conn, capsys):
    status = cli.main(["explain", "COMPUTE_STORAGE_BUS_SATA",
                       "COMPUTE_STORAGE_BUS_IDE", "CUSTOM_RACK_7"],
                      opener=opener_for(corpus_conn))

    out = capsys.readouterr().out
    assert status == 0
    # Each on the provider it is about: the compute node (named after
    # this machine); a name on none is the node's answer.
    root = f" on {socket.gethostname()!r}: "
    assert (f"COMPUTE_STORAGE_BUS_SATA{root}asserted — domain capabilities "
            "(x86_64, pc-q35-10.0, kvm) list disk bus 'sata'") in out
    assert f"COMPUTE_STORAGE_BUS_IDE{root}unasserted — domain " \
           "capabilities (x86_64, pc-q35-10.0, kvm) list disk buses " in out
    assert "CUSTOM_RACK_7: not ours" in out


def test_explain_json_and_extra_flags(corpus_conn, capsys):
    status = cli.main(["explain", "HW_CPU_X86_AVX2", "--format", "json",
                       "--cpu-model-extra-flags=-avx2"],
                      opener=opener_for(corpus_conn))

    (answer,) = json.loads(capsys.readouterr().out)
    assert status == 0
    assert answer["status"] == "unasserted"
    assert answer["evidence"][0]["document"] == \
        "config [libvirt] cpu_model_extra_flags"
    assert "'-avx2' removes the feature" in answer["sentence"]


def test_machine_types_choose_more_documents(corpus_conn, capsys):
    status = cli.main(["host", "--format", "json",
                       "--hw-machine-type", "x86_64=pc-i440fx-9.0"],
                      opener=opener_for(corpus_conn))

    data = json.loads(capsys.readouterr().out)
    assert status == 0
    assert corpus_conn.domain_calls == [
        (None, "x86_64", None, "kvm"), (None, "x86_64", "pc-i440fx-9.0",
                                        "kvm")]
    assert len(data["trait_documents"]) == 2


@pytest.mark.parametrize("argv, message", [
    (["host", "--cpu-models", "Haswell"], "cpu_mode = custom"),
    (["host", "--cpu-mode", "custom"], "needs [libvirt] cpu_models"),
])
def test_inconsistent_configuration_exits_2(argv, message, corpus_conn,
                                            capsys):
    assert cli.main(argv, opener=opener_for(corpus_conn)) == cli.EXIT_FAILURE
    assert message in capsys.readouterr().err


def test_bad_machine_type_option_is_a_usage_error(capsys):
    with pytest.raises(SystemExit) as info:
        cli.main(["host", "--hw-machine-type", "q35"])
    assert info.value.code == 2
    assert "'q35' is not ARCH=MACHINE" in capsys.readouterr().err


def _explain_avx2(conn, capsys, *extra):
    status = cli.main(["explain", "HW_CPU_X86_AVX2", "--format", "json",
                       *extra], opener=opener_for(conn))
    (answer,) = json.loads(capsys.readouterr().out)
    return status, answer


def test_config_file_sets_cpu_mode(corpus_conn, capsys, tmp_path):
    conf = tmp_path / "virtdriver.conf"
    conf.write_text("[libvirt]\ncpu_mode = none\n")

    status, answer = _explain_avx2(corpus_conn, capsys,
                                   "--config-file", str(conf))

    assert status == 0
    assert answer["status"] == "unasserted"
    assert "config [libvirt] cpu_mode is none" in answer["sentence"]


def test_cli_flag_overrides_the_config_file(corpus_conn, capsys, tmp_path):
    conf = tmp_path / "virtdriver.conf"
    conf.write_text("[libvirt]\ncpu_mode = none\n")

    status, answer = _explain_avx2(corpus_conn, capsys, "--config-file",
                                   str(conf), "--cpu-mode", "host-model")

    assert status == 0
    assert "cpu_mode is none" not in answer["sentence"]
    assert "host-model CPU EPYC-Genoa" in answer["sentence"]


def test_config_file_connection_uri_unless_uri_given(corpus_conn, capsys,
                                                     tmp_path):
    conf = tmp_path / "virtdriver.conf"
    conf.write_text("[libvirt]\nconnection_uri = test:///from-file\n")
    asked = []

    def opener(uri):
        asked.append(uri)
        return corpus_conn, URIChoice(uri, "given")

    for argv in (["host", "--config-file", str(conf)],
                 ["host", "--config-file", str(conf), "--uri", "x:///"]):
        assert cli.main(argv, opener=opener) == 0
    assert asked == ["test:///from-file", "x:///"]


def test_bad_value_in_config_file_exits_2_naming_the_option(
        corpus_conn, capsys, tmp_path):
    conf = tmp_path / "virtdriver.conf"
    conf.write_text("[libvirt]\ncpu_mode = host-modle\n")

    status = cli.main(["host", "--config-file", str(conf)],
                      opener=opener_for(corpus_conn))

    captured = capsys.readouterr()
    assert status == cli.EXIT_FAILURE
    assert captured.out == ""
    assert captured.err == (
        f"virtdriver: bad configuration (read from {conf}): [libvirt] "
        "cpu_mode: Valid values are [host-model, host-passthrough, custom, "
        "none], but found 'host-modle'; correct it (see "
        "docs/configuration.md)\n")
    assert corpus_conn.domain_calls == []


def test_missing_config_file_exits_2(corpus_conn, capsys, tmp_path):
    status = cli.main(["host", "--config-file", str(tmp_path / "no")],
                      opener=opener_for(corpus_conn))
    assert status == cli.EXIT_FAILURE
    assert f"cannot read config file {tmp_path / 'no'}" in \
        capsys.readouterr().err
