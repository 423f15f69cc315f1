"""``virtdriver report --format dot`` and ``--output FILE``: the provider
tree as a Graphviz picture, parsed and rendered by the real Graphviz."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET

import pytest

from virtdriver import cli
from virtdriver.drivers.fake import FakeDriver
from virtdriver.fakelibvirt.presets import preset_documents
from virtdriver.render.dot import NAMES_PER_FAMILY, trait_lines

PRESETS = ("small", "numa2-ht", "numa4-large")
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
needs_graphviz = pytest.mark.skipif(
    shutil.which("dot") is None,
    reason="Graphviz's dot is not installed (./run installs graphviz)")


def report(capsys, *argv: str) -> tuple[int, str, str]:
    status = cli.main(["report", *argv])
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def fake_report(capsys, preset: str, *argv: str) -> tuple[int, str, str]:
    return report(capsys, "--driver", "fake", "--host-spec", preset, *argv)


def provider_names(capsys, preset: str) -> list[str]:
    status, out, _ = fake_report(capsys, preset, "--format", "json")
    assert status == 0
    return [p["name"] for p in json.loads(out)["providers"]]


def svg_texts(svg: str) -> set[str]:
    """The text of every ``<text>`` element (Graphviz writes ``-`` as an
    entity, so the XML is parsed rather than searched)."""
    return {el.text for el in ET.fromstring(svg).iter()
            if el.tag.endswith("text")}


def labels(dot_text: str) -> dict[str, list[str]]:
    """Tooltip (provider name and uuid) → the node label's lines."""
    found = re.findall(r'\[label="(.*?)", tooltip="(.*?)"\];', dot_text)
    return {tip: label.split(r"\l")[:-1] for label, tip in found}


@needs_graphviz
@pytest.mark.parametrize("preset", PRESETS)
def test_dot_parses_with_graphviz_and_shows_every_provider(preset, capsys):
    names = provider_names(capsys, preset)
    status, dot_text, err = fake_report(capsys, preset, "--format", "dot")
    assert status == 0, err
    done = subprocess.run(["dot", "-Tsvg"], input=dot_text.encode(),
                          capture_output=True, check=False)
    assert done.returncode == 0, done.stderr.decode()
    assert len(names) >= 2
    assert set(names) <= svg_texts(done.stdout.decode())
    # One node per provider, one edge per child.
    assert len(labels(dot_text)) == len(names)
    assert dot_text.count(" -> ") == len(names) - 1


def test_inventories_are_compact_and_traits_grouped_by_family(capsys):
    status, dot_text, _ = fake_report(capsys, "numa4-large", "--format",
                                      "dot")
    assert status == 0
    cells = [lines for tip, lines in labels(dot_text).items()
             if "_NUMA" in tip]
    assert len(cells) == 4
    for lines in cells:
        assert "VCPU 32 x4" in lines
        assert "pages 2M:4096 1G:16" in lines
        assert not any(line.startswith("CUSTOM_MEM_PAGE_SIZE")
                       for line in lines)
    # Small-page memory: 131072 MiB less the 16 GiB + 8 GiB of pages.
    assert any("MEMORY_MB 106496 (r512)" in lines for lines in cells)
    # Each trait of the root sits on the line of the family that the
    # driver's own trait report names for it.
    driver = FakeDriver("numa4-large")
    driver.init_host("node")
    (node,) = driver.get_available_nodes()
    results = driver.node_capabilities(node).traits.results
    (root,) = [lines for tip, lines in labels(dot_text).items()
               if "_NUMA" not in tip]
    family_lines = {line.split(":")[0].split(" (")[0]: line
                    for line in root[1:]}
    status, out, _ = fake_report(capsys, "numa4-large", "--format", "json")
    (root_json,) = [p for p in json.loads(out)["providers"]
                    if p["parent_provider_uuid"] is None]
    for trait in root_json["traits"]:
        family = results[trait].family
        assert family in family_lines, (trait, family)
    assert len(family_lines) == len({results[t].family
                                     for t in root_json["traits"]})


def test_long_families_collapse_to_a_count_and_the_first_few():
    features = [f"HW_CPU_X86_F{n:02d}" for n in range(40)]
    lines = trait_lines(features + ["CUSTOM_RACK_7", "HW_NUMA_ROOT"],
                        {name: "cpu features" for name in features})
    assert lines[0].startswith("cpu features (40): HW_CPU_X86_{F00, F01")
    shown = lines[0].split("{")[1].split("}")[0].split(", ")
    assert 1 <= len(shown) <= NAMES_PER_FAMILY
    assert lines[0].endswith(f"+{40 - len(shown)}")
    # Traits no family answered for are grouped by prefix.
    assert "CUSTOM_*: CUSTOM_RACK_7" in lines
    assert "HW_*: HW_NUMA_ROOT" in lines
    assert len(lines) == 3


@pytest.fixture
def numa4_uri(fake_libvirt_host):
    return fake_libvirt_host(preset_documents("numa4-large"), name="numa4")


def test_libvirt_numa4_large_picture_stays_compact(numa4_uri, capsys):
    """The real driver's root carries every domain-capability family;
    each provider's box must still stay small."""
    status, dot_text, err = report(capsys, "--uri", numa4_uri,
                                   "--format", "dot")
    assert status == 0, err
    boxes = labels(dot_text)
    assert len(boxes) == 5
    root_lines = max(boxes.values(), key=len)
    assert len(root_lines) <= 20
    for lines in boxes.values():
        assert all(len(line) <= 90 for line in lines), lines
    cells = [lines for tip, lines in boxes.items() if "_NUMA" in tip]
    assert len(cells) == 4 and all(len(lines) <= 6 for lines in cells)
    assert len(dot_text.splitlines()) <= 4 * len(boxes) + 6


@needs_graphviz
def test_output_writes_svg_and_png_atomically(capsys, tmp_path):
    names = provider_names(capsys, "numa2-ht")
    svg_path = tmp_path / "tree.svg"
    status, out, err = fake_report(capsys, "numa2-ht", "--output",
                                   str(svg_path))
    assert status == 0, err
    assert out == f"wrote {svg_path} (3 providers)\n"
    assert ET.parse(svg_path).getroot().tag.endswith("svg")
    assert set(names) <= svg_texts(svg_path.read_text())

    png_path = tmp_path / "tree.PNG"
    status, _, err = fake_report(capsys, "numa2-ht", "--output",
                                 str(png_path))
    assert status == 0, err
    assert png_path.read_bytes()[:8] == PNG_MAGIC
    assert sorted(p.name for p in tmp_path.iterdir()) == ["tree.PNG",
                                                         "tree.svg"]


def test_output_dot_writes_the_dot_text(capsys, tmp_path):
    status, dot_text, _ = fake_report(capsys, "small", "--format", "dot")
    assert status == 0
    target = tmp_path / "tree.dot"
    status, _, err = fake_report(capsys, "small", "--output", str(target))
    assert status == 0, err
    assert target.read_text() == dot_text


def test_unknown_suffix_is_exit_2_naming_it(capsys, tmp_path):
    target = tmp_path / "tree.jpg"
    status, out, err = fake_report(capsys, "small", "--output", str(target))
    assert status == 2
    assert out == ""
    assert "'.jpg'" in err and "*.svg" in err and "*.png" in err
    assert len(err.strip().splitlines()) == 1
    assert not target.exists()


def test_missing_graphviz_is_exit_2_naming_the_package(capsys, tmp_path,
                                                       monkeypatch):
    empty = tmp_path / "bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    target = tmp_path / "tree.svg"
    status, _, err = fake_report(capsys, "small", "--output", str(target))
    assert status == 2
    assert "apt-get install graphviz" in err
    assert "Traceback" not in err
    assert not target.exists()


def test_failing_graphviz_leaves_the_old_picture(capsys, tmp_path,
                                                monkeypatch):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake_dot = bin_dir / "dot"
    # Writes half a file where it was told to, then fails.
    fake_dot.write_text("#!/bin/sh\necho partial > \"$3\"\n"
                        "echo 'syntax error in line 1' >&2\nexit 1\n")
    fake_dot.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    target = tmp_path / "tree.svg"
    target.write_text("old picture")
    status, _, err = fake_report(capsys, "small", "--output", str(target))
    assert status == 2
    assert "syntax error in line 1" in err
    assert target.read_text() == "old picture"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bin", "tree.svg"]


def test_dot_is_only_a_report_format(capsys):
    with pytest.raises(SystemExit) as exited:
        cli.main(["sync", "--driver", "fake", "--format", "dot"])
    assert exited.value.code == 2
    assert "invalid choice: 'dot'" in capsys.readouterr().err


@needs_graphviz
def test_output_through_a_real_process(tmp_path):
    target = tmp_path / "tree.svg"
    done = subprocess.run(
        [sys.executable, "-m", "virtdriver.cli", "report", "--driver",
         "fake", "--host-spec", "numa4-large", "--output", str(target)],
        capture_output=True, text=True, check=False, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    texts = svg_texts(target.read_text())
    assert {f"fake-numa4-large_NUMA{cell}" for cell in range(4)} <= texts


@pytest.mark.parametrize("where", ["missing-dir/tree.dot", "a-dir.dot"])
def test_unwritable_output_is_exit_2_naming_it(where, capsys, tmp_path):
    (tmp_path / "a-dir.dot").mkdir()
    target = tmp_path / where
    status, _, err = fake_report(capsys, "small", "--output", str(target))
    assert status == 2
    assert err.startswith(f"virtdriver: --output {target}: cannot write")
    assert "internal error" not in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a-dir.dot"]
