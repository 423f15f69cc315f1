"""virtdriver.conf: options from files, overrides, and the errors they give."""

from __future__ import annotations

import math
import pathlib
import re
import sys

import pytest

from virtdriver.capabilities.traits.config import TraitConfig
from virtdriver.conf import (
    ConfigError,
    PageReservation,
    PinningConfig,
    apply_overrides,
    list_opts,
    make_conf,
    parse_page_reservation,
    pinning_config,
    state_dir_from,
    trait_config,
)

DOCS = pathlib.Path(__file__).resolve().parents[2] / "docs" / \
    "configuration.md"


@pytest.fixture
def write_conf(tmp_path):
    """Write INI text to a fresh file; return a conf read from it."""
    counter = iter(range(100))

    def write(text: str, *more: str):
        paths = []
        for body in (text, *more):
            path = tmp_path / f"virtdriver-{next(counter)}.conf"
            path.write_text(body)
            paths.append(path)
        return make_conf(config_files=paths), paths
    return write


def test_defaults_are_novas(monkeypatch):
    # args=None must not read the test runner's own sys.argv.
    monkeypatch.setattr(sys, "argv", ["virtdriver", "--bogus"])
    conf = make_conf()

    assert trait_config(conf) == TraitConfig()
    assert pinning_config(conf) == PinningConfig(
        cpu_dedicated_set=None, cpu_shared_set=None,
        reserved_host_memory_mb=512, reserved_huge_pages=(),
        cpu_allocation_ratio=4.0, ram_allocation_ratio=1.0)
    assert conf.libvirt.connection_uri == ""
    assert conf.virtdriver.state_dir is None


def test_every_option_read_from_a_file(write_conf):
    conf, _ = write_conf("""
[compute]
cpu_dedicated_set = 4-15,^8
cpu_shared_set = 0-3
reserved_host_memory_mb = 2048
reserved_huge_pages = node:0,size:2048,count:64
reserved_huge_pages = node:1, size:1GB, count:1
cpu_allocation_ratio = 2.5
ram_allocation_ratio = 1.5
image_type_exclude_list = raw,qcow2
[libvirt]
connection_uri = qemu:///session
virt_type = qemu
cpu_mode = custom
cpu_models = Haswell,Broadwell
cpu_model_extra_flags = +avx2,-pcid
hw_machine_type = x86_64=q35, aarch64=virt
[virtdriver]
state_dir = /srv/virtdriver
""")

    assert trait_config(conf) == TraitConfig(
        virt_type="qemu", cpu_mode="custom",
        cpu_models=("Haswell", "Broadwell"),
        cpu_model_extra_flags=("+avx2", "-pcid"),
        machine_types=(("x86_64", "q35"), ("aarch64", "virt")),
        image_type_exclude_list=("raw", "qcow2"))
    pinning = pinning_config(conf)
    assert pinning.cpu_dedicated_set == frozenset(range(4, 16)) - {8}
    assert pinning.cpu_shared_set == frozenset(range(4))
    assert pinning.reserved_host_memory_mb == 2048
    assert pinning.reserved_huge_pages == (
        PageReservation(node=0, size_kib=2048, count=64),
        PageReservation(node=1, size_kib=1048576, count=1))
    assert pinning.reserved_pages(1, 1048576) == 1
    assert pinning.reserved_pages(0, 1048576) == 0
    assert (pinning.cpu_allocation_ratio, pinning.ram_allocation_ratio) \
        == (2.5, 1.5)
    assert conf.libvirt.connection_uri == "qemu:///session"
    assert conf.virtdriver.state_dir == "/srv/virtdriver"


def test_later_file_wins(write_conf):
    conf, _ = write_conf("[libvirt]\ncpu_mode = host-passthrough\n",
                         "[libvirt]\ncpu_mode = none\n")
    assert trait_config(conf).cpu_mode == "none"


def test_novas_default_group_is_still_read(write_conf):
    conf, _ = write_conf("[DEFAULT]\nreserved_host_memory_mb = 4096\n"
                         "cpu_allocation_ratio = 16.0\n")
    pinning = pinning_config(conf)
    assert pinning.reserved_host_memory_mb == 4096
    assert pinning.cpu_allocation_ratio == 16.0


def test_blank_cpu_set_is_unset(write_conf):
    conf, _ = write_conf("[compute]\ncpu_dedicated_set =\n")
    assert pinning_config(conf).cpu_dedicated_set is None


class TestOverrides:
    def test_given_values_replace_the_files(self, write_conf):
        conf, _ = write_conf("[libvirt]\ncpu_mode = host-passthrough\n"
                             "cpu_model_extra_flags = +avx2\n"
                             "virt_type = kvm\n")

        config = trait_config(conf, cpu_mode="host-model",
                              cpu_model_extra_flags=())

        assert config.cpu_mode == "host-model"
        assert config.cpu_model_extra_flags == ()
        assert config.virt_type == "kvm"  # not overridden: the file's

    def test_the_merged_result_is_checked(self, write_conf):
        conf, [path] = write_conf("[libvirt]\ncpu_mode = custom\n"
                                  "cpu_models = Haswell\n")
        with pytest.raises(ConfigError) as info:
            trait_config(conf, cpu_mode="host-passthrough")
        assert str(info.value) == (
            f"bad configuration (read from {path}): [libvirt] cpu_models is "
            "set but [libvirt] cpu_mode is 'host-passthrough'; set cpu_mode "
            "= custom or drop cpu_models")


class TestBadValues:
    def test_bad_choice_names_option_value_file_and_choices(self,
                                                            write_conf):
        conf, [path] = write_conf("[libvirt]\ncpu_mode = host-modle\n")
        with pytest.raises(ConfigError) as info:
            trait_config(conf)
        assert str(info.value) == (
            f"bad configuration (read from {path}): [libvirt] cpu_mode: "
            "Valid values are [host-model, host-passthrough, custom, none], "
            "but found 'host-modle'; correct it (see `virtdriver help configuration`)")

    def test_every_parse_problem_is_reported_at_once(self, write_conf):
        conf, _ = write_conf("""
[compute]
cpu_dedicated_set = x
reserved_host_memory_mb = lots
reserved_huge_pages = node:0,size:2048
reserved_huge_pages = node:0,size:2048,count:1
reserved_huge_pages = node:zero,size:2048,count:1
""")
        with pytest.raises(ConfigError) as info:
            pinning_config(conf)
        problems = info.value.problems
        assert [p.split(" ")[1] for p in problems] == [
            "cpu_dedicated_set", "reserved_host_memory_mb:",
            "reserved_huge_pages", "reserved_huge_pages"]
        assert "'lots'" in problems[1]
        assert problems[2] == (
            "[compute] reserved_huge_pages entry 'node:0,size:2048': count "
            "missing; write node:N,size:KIB,count:N, e.g. "
            "node:0,size:2048,count:64")
        assert problems[3] == (
            "[compute] reserved_huge_pages entry 'node:zero,size:2048,"
            "count:1': node 'zero' is not a whole number (0 or more)")
        assert str(info.value).count("\n  - ") == 4

    def test_missing_file(self, tmp_path):
        with pytest.raises(ConfigError) as info:
            make_conf(config_files=[tmp_path / "nope.conf"])
        assert str(info.value) == (
            f"bad configuration: cannot read config file {tmp_path}/nope.conf"
            ": it does not exist or is not readable; check the --config-file"
            " path")

    def test_not_ini(self, tmp_path):
        path = tmp_path / "broken.conf"
        path.write_text("[libvirt\ncpu_mode = none\n")
        with pytest.raises(ConfigError, match=rf"{path} is not an INI file: "
                           r".*Invalid section.*; fix its syntax"):
            make_conf(config_files=[path])


#: (reader, file text, the one problem it must report).
ONE_PROBLEM = [
    (trait_config, "[libvirt]\nvirt_type = vmware\n",
     "[libvirt] virt_type: Valid values are [kvm, qemu, lxc, parallels, "
     "xen], but found 'vmware'; correct it (see `virtdriver help configuration`)"),
    (trait_config, "[libvirt]\nhw_machine_type = x86_64=q35,q35\n",
     "[libvirt] hw_machine_type = ['x86_64=q35', 'q35']: 'q35' is not "
     "ARCH=MACHINE (e.g. x86_64=q35)"),
    (pinning_config, "[compute]\ncpu_shared_set = 0-3,4-x\n",
     "[compute] cpu_shared_set = '0-3,4-x': invalid CPU set '0-3,4-x': "
     "'4-x' is not a CPU id or range; expected comma-separated ids or "
     "ranges such as '0-3,^2,8-11'"),
    (pinning_config, "[compute]\ncpu_dedicated_set = 0-3,^0-3\n",
     "[compute] cpu_dedicated_set names no CPUs; leave it unset or name at "
     "least one"),
    (pinning_config, "[compute]\nreserved_host_memory_mb = -1\n",
     "[compute] reserved_host_memory_mb = -1 is negative; use 0 or more"),
    *[(pinning_config, f"[compute]\ncpu_allocation_ratio = {value}\n",
       f"[compute] cpu_allocation_ratio = {float(value)} must be a finite "
       "number greater than 0 and at most 3.40282e+38 (Placement's "
       "largest), e.g. 1.0")
      for value in ("0", "-1.5", "nan", "inf", "1e39")],
    (pinning_config, "[compute]\n"
     "reserved_huge_pages = node:0,size:2048,count:1\n"
     "reserved_huge_pages = node:0,size:2MB,count:9\n",
     "[compute] reserved_huge_pages entries 'node:0,size:2048,count:1' and "
     "'node:0,size:2048,count:9' both reserve 2048 KiB pages on node 0; "
     "keep one entry per node and size"),
]


@pytest.mark.parametrize("read, text, problem", ONE_PROBLEM)
def test_bad_value_names_option_value_and_fix(read, text, problem,
                                              write_conf):
    conf, _ = write_conf(text)
    with pytest.raises(ConfigError) as info:
        read(conf)
    assert info.value.problems == (problem,)


@pytest.mark.parametrize("entry, expected", [
    ("node:0,size:2048,count:64", (0, 2048, 64)),
    (" node : 3 , count : 0 , size : 4 ", (3, 4, 0)),
    ("node:1,size:1GB,count:1", (1, 1048576, 1)),
    ("node:1,size:1GiB,count:1", (1, 1048576, 1)),
    ("node:1,size:2M,count:1", (1, 2048, 1)),
    ("node:1,size:2mb,count:1", (1, 2048, 1)),
    ("node:1,size:64KiB,count:1", (1, 64, 1)),
])
def test_page_reservation_forms(entry, expected):
    assert parse_page_reservation(entry) == PageReservation(*expected)


@pytest.mark.parametrize("entry, message", [
    ("node:0,size:2048,count:1,colour:red",
     "'colour:red' is not node:N, size:KIB or count:N"),
    ("node:0,node:1,size:2048,count:1", "node is given twice"),
    ("size:2048", "node and count missing"),
    ("node:0,size:0,count:1", "size '0' is not a page size"),
    ("node:0,size:2XB,count:1", "size '2XB' is not a page size"),
    ("node:0,size:2048,count:-1", "count '-1' is not a whole number"),
    ("node:0;size:2048;count:1",
     "'node:0;size:2048;count:1' holds more than one key:value; separate "
     "them with commas"),
])
def test_page_reservation_errors(entry, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        parse_page_reservation(entry)


def test_pinning_config_refuses_what_no_host_could_satisfy():
    with pytest.raises(ConfigError) as info:
        PinningConfig(cpu_shared_set=frozenset(), reserved_host_memory_mb=-1,
                      ram_allocation_ratio=math.inf)
    assert info.value.problems == (
        "[compute] cpu_shared_set names no CPUs; leave it unset or name at "
        "least one",
        "[compute] reserved_host_memory_mb = -1 is negative; use 0 or more",
        "[compute] ram_allocation_ratio = inf must be a finite number "
        "greater than 0 and at most 3.40282e+38 (Placement's largest), "
        "e.g. 1.0")


def test_docs_list_every_option_with_its_default():
    text = DOCS.read_text()
    for group, opts in list_opts():
        section = text.split(f"## [{group}]")[1].split("\n## ")[0]
        rows = {m[1]: m[2] for m in re.finditer(
            r"^\| `(\w+)` \| ([^|]+) \|", section, re.M)}
        assert sorted(rows) == sorted(opt.dest for opt in opts), group
        for opt in opts:
            shown = rows[opt.dest].strip()
            if opt.default in (None, [], ""):
                assert shown in ("unset", "empty", "none"), opt.name
            else:
                assert shown == f"`{opt.default}`", opt.name


class TestFiles:
    """What make_conf refuses before and after oslo reads the files."""

    def test_directory(self, tmp_path):
        with pytest.raises(ConfigError) as info:
            make_conf(config_files=[tmp_path])
        assert info.value.problems == (
            f"config file {tmp_path} is a directory; give a file (options "
            "are read from files only, not from directories)",)

    def test_not_utf8_names_the_line(self, tmp_path):
        path = tmp_path / "v.conf"
        path.write_bytes(b"[compute]\n\n# \xff\n")
        with pytest.raises(ConfigError) as info:
            make_conf(config_files=[path])
        assert info.value.problems == (
            f"config file {path} is not UTF-8 text (byte 0xff on line 3); "
            "save it as UTF-8",)

    def test_every_bad_file_is_listed(self, tmp_path):
        bad = tmp_path / "bad.conf"
        bad.write_bytes(b"\xfe")
        with pytest.raises(ConfigError) as info:
            make_conf(config_files=[tmp_path / "missing.conf", bad])
        assert len(info.value.problems) == 2

    def test_utf8_text_is_read(self, write_conf):
        conf, _ = write_conf("[libvirt]\n# café\ncpu_models = Skylake\n"
                             "cpu_mode = custom\n")
        assert trait_config(conf).cpu_models == ("Skylake",)

    def test_unknown_option_names_the_closest(self, write_conf):
        with pytest.raises(ConfigError) as info:
            write_conf("[compute]\nram_allocation_ration = 1.5\n")
        (problem,) = info.value.problems
        assert problem.startswith("[compute] ram_allocation_ration in ")
        assert "did you mean ram_allocation_ratio?" in problem

    def test_unknown_option_in_a_later_file_too(self, write_conf):
        with pytest.raises(ConfigError) as info:
            write_conf("[compute]\ncpu_shared_set = 0\n",
                       "[libvirt]\nvirt-type = kvm\n")
        assert "[libvirt] virt-type in " in info.value.problems[0]
        assert "did you mean virt_type?" in info.value.problems[0]

    def test_sections_that_are_not_ours_are_not_checked(self, write_conf):
        conf, _ = write_conf("[DEFAULT]\nanything = 1\n"
                             "[keystone_authtoken]\nauth_url = x\n"
                             "[compute]\nreserved_host_memory_mb = 1024\n")
        assert pinning_config(conf).reserved_host_memory_mb == 1024

    def test_novas_default_section_spelling_is_still_read(self, write_conf):
        conf, _ = write_conf("[DEFAULT]\ncpu_allocation_ratio = 2.0\n")
        assert pinning_config(conf).cpu_allocation_ratio == 2.0


class TestApplyOverrides:
    """Command-line values, checked by each option's own type."""

    def test_values_replace_the_files(self, write_conf):
        conf, _ = write_conf("[libvirt]\nvirt_type = kvm\n"
                             "[compute]\nreserved_host_memory_mb = 1\n")
        apply_overrides(conf, {"virt_type": "qemu",
                               "reserved_host_memory_mb": "2048",
                               "hw_machine_type": (("x86_64", "q35"),),
                               "cpu_mode": None})
        assert trait_config(conf).virt_type == "qemu"
        assert trait_config(conf).machine_types == (("x86_64", "q35"),)
        assert pinning_config(conf).reserved_host_memory_mb == 2048

    def test_bad_values_named_by_flag_and_option(self):
        conf = make_conf()
        with pytest.raises(ConfigError) as info:
            apply_overrides(conf, {"virt_type": "vmware",
                                   "reserved_host_memory_mb": "lots"})
        assert info.value.problems == (
            "--virt-type ([libvirt] virt_type): Valid values are [kvm, "
            "qemu, lxc, parallels, xen], but found 'vmware'; correct it "
            "(see `virtdriver help configuration`)",
            "--reserved-host-memory-mb ([compute] reserved_host_memory_mb):"
            " invalid literal for int() with base 10: 'lots'; correct it "
            "(see `virtdriver help configuration`)")


@pytest.mark.parametrize("text, expected", [
    ("", None), ("[virtdriver]\nstate_dir =\n", None),
    ("[virtdriver]\nstate_dir = /srv/vd\n", "/srv/vd"),
])
def test_state_dir_from(text, expected, write_conf):
    conf, _ = write_conf(text)
    assert state_dir_from(conf) == expected
