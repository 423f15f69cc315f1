"""Every documented example of a data file parses as documented."""

import json
import pathlib
import re

import pytest
import yaml

from virtdriver.drivers import fake_host, ironic_inventory
from virtdriver.drivers.fake_host import load_spec
from virtdriver.drivers.ironic_inventory import load_inventory

DOCS = pathlib.Path(__file__).resolve().parents[2] / "docs"
FENCE = re.compile(r"^```(yaml|json)\n(.*?)^```", re.M | re.S)


def fenced(doc: str) -> list[tuple[str, str]]:
    """(language, text) of each ```yaml / ```json block of ``doc``."""
    return FENCE.findall((DOCS / doc).read_text())


def docstring_example(module) -> str:
    """The indented block after the first ``::`` of a module docstring."""
    lines = module.__doc__.split("::\n", 1)[1].splitlines()[1:]
    block = []
    for line in lines:
        if line and not line.startswith("    "):
            break
        block.append(line[4:])
    return "\n".join(block).strip() + "\n"


def write(tmp_path, language, text, stem="example"):
    path = tmp_path / f"{stem}.{language}"
    path.write_text(text)
    return path


def test_the_docs_have_the_examples_this_test_reads():
    assert [lang for lang, _ in fenced("drivers.md")] == ["yaml", "json"]
    assert [lang for lang, _ in fenced("ironic-driver.md")] == ["yaml"]


@pytest.mark.parametrize("index", [0, 1])
def test_fake_host_examples_in_drivers_md_parse(tmp_path, index):
    language, text = fenced("drivers.md")[index]
    spec = load_spec(str(write(tmp_path, language, text)))
    assert spec.name == "rack1-host" and spec.cells == 2
    assert spec.pages_per_cell == {2048: 1024, 1048576: 4}


def test_the_yaml_example_keeps_every_field():
    spec = fake_host.spec_from_dict(yaml.safe_load(fenced("drivers.md")[0][1]))
    assert spec.traits == {"CUSTOM_RACK_7"}
    assert spec.capabilities == {"supports_multiattach": True,
                                 "supports_trusted_certs": False}
    assert spec.cpu_features == {"avx2", "aes"}


def test_the_fake_host_docstring_example_parses(tmp_path):
    spec = load_spec(str(write(tmp_path, "yaml",
                               docstring_example(fake_host))))
    assert spec.name == "fake-numa2" and spec.cells == 2


@pytest.mark.parametrize("text", [
    fenced("ironic-driver.md")[0][1], docstring_example(ironic_inventory)],
    ids=["ironic-driver.md", "ironic_inventory docstring"])
def test_inventory_examples_parse(tmp_path, text):
    first, second = load_inventory(write(tmp_path, "yaml", text))
    assert first.name == "rack1-u07" and first.available
    assert first.placement_resource_class == "CUSTOM_BAREMETAL_GOLD"
    assert second.asserted_traits == {"CUSTOM_GPU"}
    assert second.removed_traits == {"CUSTOM_RAID5"}


def test_the_inventory_example_as_json_parses_too(tmp_path):
    data = yaml.safe_load(fenced("ironic-driver.md")[0][1])
    path = write(tmp_path, "json", json.dumps(data))
    assert len(load_inventory(path)) == 2


def test_the_documented_states_are_the_module_list():
    text = (DOCS / "ironic-driver.md").read_text()
    section = text.split("* `provision_state`:", 1)[1].split("only", 1)[0]
    assert set(re.findall(r"`([a-z -]+)`", section)) == \
        ironic_inventory.PROVISION_STATES


def test_the_documented_report_command_runs(tmp_path, capsys,
                                            monkeypatch):
    from virtdriver import cli
    monkeypatch.chdir(tmp_path)
    write(tmp_path, "yaml", fenced("drivers.md")[0][1], stem="my-host")
    status = cli.main(["report", "--driver", "fake", "--host-spec",
                       "my-host.yaml"])
    assert status == 0
    assert capsys.readouterr().out.startswith("rack1-host (")
