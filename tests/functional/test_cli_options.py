"""Command-line options are no looser than the config file: values are
checked by the option's own type, paths must be what they claim, and an
option the chosen driver or command does not read is refused."""

from __future__ import annotations

import pytest

from virtdriver import cli
from virtdriver.drivers.libvirt.connection import URIChoice

HOST_XML = """<capabilities><host>
<cpu><arch>x86_64</arch><model>Haswell</model></cpu>
</host><guest><os_type>hvm</os_type><arch name='x86_64'>
<domain type='kvm'/></arch></guest></capabilities>"""


class Conn:
    """Host capabilities and nothing else (domain capabilities refused)."""

    def getCapabilities(self):
        return HOST_XML

    def getDomainCapabilities(self, *args, **kwargs):
        import libvirt
        raise libvirt.libvirtError("not here")

    def getLibVersion(self):
        return 9000000

    def getVersion(self):
        return 7002000


def opener(uri):
    return Conn(), URIChoice(uri or "fake:///", "for tests")


def refused(capsys, argv, *, opened=None):
    status = cli.main(argv, opener=opened or opener)
    captured = capsys.readouterr()
    assert status == cli.EXIT_FAILURE
    assert captured.out == ""
    assert captured.err.startswith("virtdriver: ")
    assert "Traceback" not in captured.err
    return captured.err


@pytest.mark.parametrize("command", [["host"], ["explain", "HW_CPU_X86_AVX"],
                                     ["report", "--driver", "fake"]])
def test_virt_type_checked_like_the_config_option(command, capsys, tmp_path):
    from_flag = refused(capsys, [*command, "--virt-type", "bogus"])
    conf = tmp_path / "virtdriver.conf"
    conf.write_text("[libvirt]\nvirt_type = bogus\n")
    from_file = refused(capsys, [*command, "--config-file", str(conf)])

    reason = ("Valid values are [kvm, qemu, lxc, parallels, xen], but found "
              "'bogus'; correct it (see `virtdriver help configuration`)")
    assert from_flag == ("virtdriver: bad configuration: --virt-type "
                         f"([libvirt] virt_type): {reason}\n")
    assert from_file.endswith(f"[libvirt] virt_type: {reason}\n")


def test_a_good_virt_type_flag_applies(capsys):
    assert cli.main(["explain", "HW_CPU_X86_AVX", "--virt-type", "lxc"],
                    opener=opener) == 0
    assert "so none for virt type lxc" in capsys.readouterr().out


@pytest.mark.parametrize("make, what", [
    (lambda tmp: tmp / "nonexistent", "(it does not exist)"),
    (lambda tmp: tmp, "(it has no index.xml)"),
])
def test_cpu_map_must_be_a_cpu_map(make, what, capsys, tmp_path):
    directory = make(tmp_path)
    called = []

    err = refused(capsys, ["host", "--cpu-map", str(directory)],
                  opened=lambda uri: called.append(uri))

    assert err.startswith(f"virtdriver: --cpu-map {directory} is not a "
                          f"libvirt CPU map directory {what}")
    assert called == []  # refused before libvirt was asked anything


def test_cpu_map_that_is_one_is_used(capsys, tmp_path):
    (tmp_path / "index.xml").write_text(
        "<cpus><arch name='x86'><include filename='x86_features.xml'/>"
        "<include filename='x86_Haswell.xml'/></arch></cpus>")
    (tmp_path / "x86_features.xml").write_text(
        "<cpus><feature name='avx2'><cpuid eax_in='0x07' "
        "ebx='0x00000020'/></feature></cpus>")
    (tmp_path / "x86_Haswell.xml").write_text(
        "<cpus><model name='Haswell'><feature name='avx2'/></model></cpus>")

    status = cli.main(["explain", "HW_CPU_X86_AVX2", "--cpu-map",
                       str(tmp_path), "--cpu-mode", "host-passthrough"],
                      opener=opener)

    out = capsys.readouterr().out
    assert status == 0
    assert "HW_CPU_X86_AVX2: asserted" in out


def test_unreadable_cpu_map_file_is_an_error(capsys, tmp_path):
    (tmp_path / "index.xml").write_text("<cpus><arch")

    err = refused(capsys, ["host", "--cpu-map", str(tmp_path)])

    assert err.startswith("virtdriver: libvirt's CPU map is not usable: "
                          f"{tmp_path}/index.xml")


@pytest.mark.parametrize("argv, message", [
    (["--driver", "fake", "--inventory", "nodes.yaml"],
     "--inventory applies only to --driver ironic, not to --driver fake"),
    (["--inventory", "nodes.yaml"],
     "--inventory applies only to --driver ironic, not to --driver libvirt"),
    (["--driver", "ironic", "--inventory", "n.yaml", "--host-spec", "small"],
     "--host-spec applies only to --driver fake"),
    (["--host-spec", "numa2-ht"], "--host-spec applies only to --driver "
     "fake, not to --driver libvirt"),
    (["--driver", "ironic", "--inventory", "n.yaml", "--flat"],
     "--flat applies only to --driver libvirt or fake"),
    (["--driver", "fake", "--uri", "test:///default"],
     "--uri applies only to --driver libvirt"),
    (["--driver", "ironic", "--inventory", "n.yaml", "--uri", "x:///"],
     "--uri applies only to --driver libvirt"),
    (["--driver", "fake", "--snapshot", "snap"],
     "--snapshot applies only to --driver libvirt, not to --driver fake"),
    (["--driver", "ironic", "--inventory", "n.yaml", "--snapshot", "snap"],
     "--snapshot applies only to --driver libvirt"),
    (["--driver", "ironic", "--inventory", "n.yaml", "--cpu-dedicated-set",
      "0-3"], "--cpu-dedicated-set does not apply to --driver ironic: it "
     "does not read [compute] cpu_dedicated_set"),
    (["--driver", "ironic", "--inventory", "n.yaml", "--virt-type", "kvm"],
     "--virt-type does not apply to --driver ironic"),
    (["--snapshot", "snap", "--uri", "test:///default"],
     "--snapshot replays a recorded host instead of opening libvirt, so "
     "--uri would not apply"),
])
def test_report_refuses_options_the_driver_does_not_read(argv, message,
                                                         capsys):
    err = refused(capsys, ["report", *argv])
    assert message in err


def test_out_of_tree_driver_gets_no_in_tree_options(capsys):
    err = refused(capsys, ["report", "--driver", "example", "--flat"])
    assert "--flat applies only to --driver libvirt or fake, not to " \
           "--driver example" in err


def test_fake_host_spec_defaults_to_small(capsys):
    assert cli.main(["report", "--driver", "fake"]) == 0
    assert capsys.readouterr().out.startswith("fake-small (")


def test_ironic_takes_the_image_type_option(capsys, tmp_path):
    inventory = tmp_path / "nodes.json"
    inventory.write_text('{"nodes": [{"uuid": '
                         '"1be26c0b-03f2-4d2e-ae87-c02d7f33c123", '
                         '"resource_class": "baremetal"}]}')
    status = cli.main(["report", "--driver", "ironic", "--inventory",
                       str(inventory), "--image-type-exclude-list", "raw",
                       "--format", "json"])
    out = capsys.readouterr().out
    assert status == 0
    assert "COMPUTE_IMAGE_TYPE_RAW" not in out
    assert "COMPUTE_IMAGE_TYPE_QCOW2" in out


@pytest.mark.parametrize("argv", [
    ["host", "--cpu-dedicated-set", "0-3"],
    ["snapshot", "-o", "x", "--reserved-host-memory-mb", "1"],
    ["report", "--cpu-map", "/usr/share/libvirt/cpu_map"],
    ["snapshot", "-o", "x", "--cpu-map", "/usr/share/libvirt/cpu_map"],
    ["snapshot", "-o", "x", "--format", "json"],
])
def test_options_a_command_does_not_read_are_usage_errors(argv, capsys):
    with pytest.raises(SystemExit) as info:
        cli.main(argv)
    assert info.value.code == 2
    assert "unrecognized arguments" in capsys.readouterr().err


@pytest.fixture
def snapshot_dir(tmp_path, capsys):
    root = tmp_path / "snap"
    assert cli.main(["snapshot", "--uri", "test:///default", "-o",
                     str(root)]) == 0
    capsys.readouterr()
    return root


def test_report_replay_says_it_replays(snapshot_dir, capsys):
    status = cli.main(["report", "--snapshot", str(snapshot_dir)])

    out = capsys.readouterr().out
    assert status == 0
    assert f"why: replaying snapshot {snapshot_dir}\n" in out
    assert "given with --uri" not in out


def test_host_replay_says_it_replays(snapshot_dir, capsys):
    assert cli.main(["host", "--snapshot", str(snapshot_dir)]) == 0
    assert f"why: replaying snapshot {snapshot_dir}\n" in \
        capsys.readouterr().out
