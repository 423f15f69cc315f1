"""Device options through the command: a bad value or a conflict is one
line naming the option or both rules, exit 2, no traceback; the report
shows the device providers."""

from __future__ import annotations

import json

import pytest

from tests.device_hosts import gpu, sriov_nic
from virtdriver import cli
from virtdriver.fakelibvirt.builders import HostBuilder, host_documents


@pytest.mark.parametrize("text, names", [
    ('[pci]\ndevice_spec = {"vendor_id": 8086\n', "[pci] device_spec #1"),
    ('[pci]\ndevice_spec = {"address": "0000:81:20.0"}\n',
     "[pci] device_spec #1"),
    ('[devices]\nenabled_mdev_types = t1\n[mdev_t1]\nmdev_class = gpu\n',
     "[mdev_t1] mdev_class"),
])
def test_a_bad_device_option_is_one_line_and_exit_2(tmp_path, capsys, text,
                                                    names):
    conf = tmp_path / "virtdriver.conf"
    conf.write_text(text)
    status = cli.main(["report", "--uri", "test:///default",
                       "--config-file", str(conf)])
    err = capsys.readouterr().err
    assert status == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("virtdriver: ")
    assert names in lines[0] and "Traceback" not in err


@pytest.fixture
def device_uri(fake_libvirt_host):
    return fake_libvirt_host(host_documents(
        host=HostBuilder(cells=2, cores=2),
        node_devices=[gpu("0000:84:00.0", numa=1),
                      *sriov_nic("0000:3b:00.0", 2, numa=0)]),
        name="clidevices")


def test_conflicting_rules_are_refused_naming_both(tmp_path, capsys,
                                                   device_uri):
    conf = tmp_path / "virtdriver.conf"
    conf.write_text('[pci]\ndevice_spec = {"vendor_id": "10de"}\n'
                    '[devices]\nenabled_mdev_types = nvidia-35\n')
    status = cli.main(["report", "--uri", device_uri, "--config-file",
                       str(conf)])
    err = capsys.readouterr().err
    assert status == 2, err
    assert "[pci] device_spec #1" in err
    assert "[devices] enabled_mdev_types nvidia-35" in err
    assert "Traceback" not in err


def test_the_report_shows_device_providers(tmp_path, capsys, device_uri):
    conf = tmp_path / "virtdriver.conf"
    conf.write_text('[pci]\ndevice_spec = {"product_id": "154c"}\n'
                    '[devices]\nenabled_mdev_types = nvidia-35\n')
    assert cli.main(["report", "--uri", device_uri, "--config-file",
                     str(conf), "--format", "json"]) == 0
    tree = json.loads(capsys.readouterr().out)
    text = json.dumps(tree)
    assert "_pci_0000_84_00_0" in text and "_pci_0000_3b_00_0" in text
    assert "VGPU" in text and "CUSTOM_PCI_8086_154C" in text


def test_a_snapshot_replays_the_same_device_providers(tmp_path, capsys,
                                                      device_uri):
    conf = tmp_path / "virtdriver.conf"
    conf.write_text('[DEFAULT]\nhost = replayed\n'
                    '[pci]\ndevice_spec = {"product_id": "154c"}\n'
                    '[devices]\nenabled_mdev_types = nvidia-35\n')

    def providers(*source):
        assert cli.main(["report", *source, "--config-file", str(conf),
                         "--format", "json"]) == 0
        tree = json.loads(capsys.readouterr().out)
        found = {}

        def walk(node):
            if isinstance(node, dict):
                if "uuid" in node and "name" in node and "_pci_" in str(
                        node["name"]):
                    found[node["name"]] = node["uuid"]
                for value in node.values():
                    walk(value)
            elif isinstance(node, list):
                for value in node:
                    walk(value)
        walk(tree)
        return found

    live = providers("--uri", device_uri)
    snapshot = tmp_path / "snap"
    assert cli.main(["snapshot", "--uri", device_uri, "--config-file",
                     str(conf), "-o", str(snapshot)]) == 0
    capsys.readouterr()
    replayed = providers("--snapshot", str(snapshot))
    assert live and replayed == live
