"""An oversized snapshot file is refused by its size, unread: exit 2 and a
one-line message naming the file, its size, the limit and what to do."""

from __future__ import annotations


import pytest

from tests.corpus import CORPUS
from virtdriver import cli

HOST = CORPUS / "hostcaps" / "caps-qemu-real-full.xml"


@pytest.mark.parametrize("command", [["report"], ["host"],
                                     ["explain", "COMPUTE_NODE"]])
def test_a_2_gib_capabilities_xml_is_refused_unread(command, corpus_dir,
                                                    tmp_path, capsys, opened):
    big = tmp_path / "capabilities.xml"
    with open(big, "wb") as handle:
        handle.truncate(2 * 1024 ** 3)  # sparse: no disk, no time
    (tmp_path / "domcaps.xml").write_text(HOST.read_text())
    opened.clear()

    status = cli.main([*command, "--snapshot", str(tmp_path)])

    err = capsys.readouterr().err
    assert status == 2
    assert str(big) not in opened  # refused by its size: never opened
    (line,) = err.splitlines()
    assert line.startswith(f"virtdriver: {big}: document is 2147483648 "
                           "bytes (2 GiB), over the limit of 16777216 bytes "
                           "(16 MiB)")
    assert "the limit is fixed" in line
    assert "record the host again" in line
