"""Nova's device options read unchanged: device_spec JSON, mdev groups."""

from __future__ import annotations

import os_resource_classes as orc
import os_traits
import pytest

from virtdriver.capabilities.devices.model import PCIAddress
from virtdriver.capabilities.devices.rules import (
    normalize_resource_class, normalize_traits, parse_address,
    parse_pci_rule)
from virtdriver.conf.device_rules import device_rules
from virtdriver.conf.options import make_conf
from virtdriver.conf.reader import ConfigError


def addr(text):
    return PCIAddress.parse(text)


@pytest.mark.parametrize("glob, yes, no", [
    ("0000:81:00.0", ["0000:81:00.0"], ["0000:81:00.1", "0001:81:00.0"]),
    ("*:81:00.*", ["0000:81:00.0", "0001:81:00.7"], ["0000:82:00.0"]),
    (":81:00.", ["0000:81:00.3"], ["0000:81:01.0"]),
    ("81:00.1", ["0000:81:00.1", "0002:81:00.1"], ["0000:81:00.2"]),
    ("00.1", ["0000:05:00.1"], ["0000:05:01.1"]),
    ("*", ["0000:00:00.0", "ffff:ff:1f.7"], []),
])
def test_glob_addresses_as_nova_reads_them(glob, yes, no):
    pattern = parse_address(glob)
    assert all(pattern.matches(addr(a)) for a in yes)
    assert not any(pattern.matches(addr(a)) for a in no)


def test_dict_address_is_regular_expressions_per_field():
    pattern = parse_address({"domain": ".*", "bus": "8[0-1]", "slot": "00",
                             "function": "[0-2]"})
    assert pattern.matches(addr("0000:81:00.2"))
    assert not pattern.matches(addr("0000:81:00.3"))
    assert not pattern.matches(addr("0000:82:00.0"))
    assert not pattern.single


@pytest.mark.parametrize("bad, why", [
    ("1:2:3:4.0", "more than domain:bus:slot"),
    ("0000:zz:00.0", "not hex"),
    ("0000:81:20.0", "past 0x1f"),
    ("0000:81:00.8", "past 0x7"),
    ({"bus": "("}, "not a regular expression"),
    ({"bogus": "1"}, "unknown key"),
])
def test_bad_addresses_are_refused_with_the_reason(bad, why):
    with pytest.raises(ValueError, match=why):
        parse_address(bad)


def test_resource_class_and_traits_normalised_as_nova():
    """Exactly Nova's names, quirks included, so flavors port."""
    assert normalize_resource_class("nic fast") == "CUSTOM_NIC_FAST"
    assert normalize_resource_class("vgpu") == orc.VGPU
    assert normalize_resource_class("CUSTOM_X") == "CUSTOM_X"
    assert normalize_resource_class("custom_x") == "CUSTOM_X"
    assert normalize_traits("blue,HW_GPU_API_VULKAN,,CUSTOM_Z") == (
        "CUSTOM_BLUE", os_traits.HW_GPU_API_VULKAN, "CUSTOM_Z")
    # a standard name only as written; spaces are characters
    assert normalize_traits("hw_gpu_api_vulkan, blue") == (
        "CUSTOM_HW_GPU_API_VULKAN", "CUSTOM__BLUE")
    rule = parse_pci_rule('{"vendor_id": "8086", "resource_class": ""}', "r")
    assert rule.resource_class is None  # Nova's default class


def test_ids_are_lowercase_four_digits_and_star_is_any():
    rule = parse_pci_rule('{"vendor_id": "10DE", "product_id": "*"}', "r")
    assert (rule.vendor_id, rule.product_id) == ("10de", None)
    rule = parse_pci_rule('{"vendor_id": "8086", "remote_managed": "True",'
                          ' "physical_network": "physnet1"}', "r")
    assert rule.remote_managed is True and rule.physical_network == "physnet1"


def _conf(tmp_path, text):
    path = tmp_path / "virtdriver.conf"
    path.write_text(text)
    return make_conf(config_files=[path])


def test_options_read_from_a_nova_style_file(tmp_path):
    conf = _conf(tmp_path, """
[pci]
device_spec = {"vendor_id": "8086", "product_id": "154c", "traits": "fast"}
device_spec = {"address": {"bus": "81"}, "resource_class": "gpu"}
[devices]
enabled_mdev_types = nvidia-35, nvidia-36
[mdev_nvidia-35]
device_addresses = 0000:84:00.0,0000:85:00.0
max_instances = 4
[mdev_nvidia-36]
device_addresses = 0000:86:00.0
mdev_class = CUSTOM_SMALL_GPU
""")
    rules = device_rules(conf)
    assert [r.label for r in rules.pci] == ["[pci] device_spec #1",
                                            "[pci] device_spec #2"]
    assert rules.pci[0].traits == ("CUSTOM_FAST",)
    assert rules.pci[1].resource_class == "CUSTOM_GPU"
    first, second = rules.mdev
    assert first.device_addresses == ("0000:84:00.0", "0000:85:00.0")
    assert (first.max_instances, first.mdev_class) == (4, None)
    assert second.mdev_class == "CUSTOM_SMALL_GPU"


@pytest.mark.parametrize("text, names", [
    ('[pci]\ndevice_spec = {"vendor_id": 8086\n',
     "[pci] device_spec #1"),
    ('[pci]\ndevice_spec = {"vendor_id": "80860"}\n',
     "[pci] device_spec #1"),
    ('[pci]\ndevice_spec = ["8086"]\n', "[pci] device_spec #1"),
    ('[devices]\nenabled_mdev_types = t1\n[mdev_t1]\nmdev_class = GPU\n',
     "[mdev_t1] mdev_class"),
    ('[devices]\nenabled_mdev_types = t1\n[mdev_t1]\nmax_instances = 0\n',
     "[mdev_t1] max_instances"),
    ('[devices]\nenabled_mdev_types = t1\n[mdev_t1]\nmdev_class = vgpu\n',
     "[mdev_t1] mdev_class"),
    ('[devices]\nenabled_mdev_types = t1, t2\n[mdev_t1]\n'
     'device_addresses = 0000:84:00.0\n[mdev_t2]\n'
     'device_addresses = 0000:84:00.0\n', "[mdev_t1] device_addresses and "
     "[mdev_t2] device_addresses"),
    ('[devices]\nenabled_mdev_types = t1\n[mdev_t1]\n'
     'device_addresses = 0000:81:00.0 x\n', "[mdev_t1] device_addresses"),
])
def test_bad_values_are_one_line_naming_the_option(tmp_path, text, names):
    with pytest.raises(ConfigError) as info:
        device_rules(_conf(tmp_path, text))
    assert len(info.value.problems) == 1
    assert names in info.value.problems[0]
    assert "\n" not in info.value.problems[0]
