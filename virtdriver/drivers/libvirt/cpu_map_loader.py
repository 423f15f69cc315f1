"""Read libvirt's CPU map directory from disk (the I/O half of
:mod:`virtdriver.capabilities.cpu_map`)."""

from __future__ import annotations

import dataclasses
import pathlib

from virtdriver.capabilities.cpu_map import (
    INDEX, CPUModelCatalog, parse_cpu_map)
from virtdriver.capabilities.errors import CapabilityXMLError
from virtdriver.capabilities.xmlsafe import DEFAULT_MAX_BYTES

#: Where Debian, Ubuntu, Fedora and libvirt's own install put the map.
DEFAULT_CPU_MAP_DIR = "/usr/share/libvirt/cpu_map"


def load_cpu_map(directory: str | pathlib.Path = DEFAULT_CPU_MAP_DIR, *,
                 arch_prefix: str | None = None) -> CPUModelCatalog:
    """Read every ``*.xml`` file of ``directory`` and parse the map.

    A directory that does not exist, or has no ``index.xml``, gives an
    empty catalog: every CPU model is then unknown, so the features it
    implies are unknown too (never absent).

    Raises:
        CapabilityXMLError: a file could not be read, is larger than
            :data:`~virtdriver.capabilities.xmlsafe.DEFAULT_MAX_BYTES`, or
            the map is invalid (see :func:`~.cpu_map.parse_cpu_map`).
    """
    path = pathlib.Path(directory)
    empty = CPUModelCatalog(source=str(path))
    if not (path / INDEX).is_file():
        return empty
    documents: dict[str, bytes] = {}
    for file in sorted(path.glob("*.xml")):
        if not file.is_file():
            continue
        documents[file.name] = _read(file)
    try:
        catalog = parse_cpu_map(documents, arch_prefix=arch_prefix)
    except CapabilityXMLError as exc:  # name the file by its full path
        raise CapabilityXMLError(str(path / exc.source), exc.reason,
                                 line=exc.line, hint=exc.hint) from None
    return dataclasses.replace(catalog, source=str(path))


def _read(file: pathlib.Path) -> bytes:
    try:
        size = file.stat().st_size
        if size > DEFAULT_MAX_BYTES:
            raise CapabilityXMLError(
                str(file), f"file is {size} bytes, over the limit of "
                f"{DEFAULT_MAX_BYTES} bytes")
        return file.read_bytes()
    except OSError as exc:
        raise CapabilityXMLError(
            str(file), f"could not be read: {exc.strerror or exc}",
            hint="check the file's permissions, or reinstall libvirt's "
                 "cpu_map") from None
