"""Load node devices from libvirt node device XML files.

A file holds one ``<device>`` document (``virsh nodedev-dumpxml``,
libvirt's own test data) or several one after another, each starting at
the beginning of a line (``mdevctl-list-multiple.out.xml``).  A directory
stands for its ``*.xml`` regular files (not symlinks), sorted.  Each
document is served as written (its text, not a re-serialisation), after
the checks libvirt's parser would make and the fake relies on: a
``<device>`` root, a ``<name>``, capabilities of types libvirt knows, an
mdev's type, channel subsystem ids in range.  Then
:func:`~.nodedev_check.check_sriov` checks PFs and VFs against each
other.
"""

from __future__ import annotations

import os
import pathlib
import re
from collections.abc import Iterable

from virtdriver.capabilities.errors import CapabilityXMLError
from virtdriver.capabilities.xmlsafe import parse_document
from virtdriver.fakelibvirt.nodedev import CAPABILITY_NAMES, capabilities_of
from virtdriver.fakelibvirt.nodedev_builder import NodeDevice
from virtdriver.fakelibvirt.nodedev_check import check_sriov

_DOCUMENT_START = re.compile(r"^(?=<device[\s>])", re.MULTILINE)
#: libvirt's channel subsystem ranges (cssid, ssid, devno).
_CCW_LIMITS = {"cssid": 0xfe, "ssid": 0x3, "devno": 0xffff}
#: The largest node device file read (libvirt's are a few KiB).
MAX_FILE_BYTES = 1024 * 1024


class NodeDeviceLoadError(ValueError):
    """A node device file cannot be served: which file, document and why."""


def load_node_devices(*paths: str | os.PathLike[str],
                      complete_sriov: bool = False) -> list[NodeDevice]:
    """Every ``<device>`` document in ``paths`` (files or directories).

    Args:
        complete_sriov: also refuse a VF whose PF is not loaded and a PF
            listing a VF that is not (see :func:`.check_sriov`); off by
            default, as a selection of corpus files is seldom complete.

    Raises:
        NodeDeviceLoadError: a file that cannot be read or parsed, a
            document that fails a check, two devices of one name, or PFs
            and VFs that contradict each other.
    """
    devices: list[NodeDevice] = []
    seen: dict[str, str] = {}
    for path in _files(paths):
        for index, device in enumerate(_read(path)):
            where = f"{path}, document {index + 1}"
            if device.name in seen:
                raise NodeDeviceLoadError(
                    f"{where}: a second node device named {device.name!r} "
                    f"(the first is in {seen[device.name]}); load only one "
                    "of the variants")
            seen[device.name] = where
            devices.append(device)
    try:
        check_sriov(devices, complete=complete_sriov)
    except ValueError as exc:
        raise NodeDeviceLoadError(str(exc)) from None
    return devices


def parse_node_device(xml: str, source: str) -> NodeDevice:
    """One ``<device>`` document as a :class:`NodeDevice`, checked.

    Raises:
        NodeDeviceLoadError: it is not one libvirt would serve.
    """
    try:
        root = parse_document(xml, source=source, root_tag="device")
    except CapabilityXMLError as exc:
        raise NodeDeviceLoadError(str(exc)) from None
    name = (root.findtext("name") or "").strip()
    if not name:
        raise NodeDeviceLoadError(f"{source}: no <name>; a node device "
                                  "document names its device")
    caps = root.findall("capability")
    if not caps:
        raise NodeDeviceLoadError(f"{source}: device {name!r} has no "
                                  "<capability>; libvirt needs one")
    for cap in caps:
        kind = cap.get("type")
        if kind not in CAPABILITY_NAMES:
            raise NodeDeviceLoadError(
                f"{source}: device {name!r} has capability type {kind!r}, "
                f"not one of libvirt's: {sorted(CAPABILITY_NAMES)}")
        if kind == "mdev" and not (cap.find("type") is not None
                                   and cap.find("type").get("id")):
            raise NodeDeviceLoadError(f"{source}: mdev {name!r} has no "
                                      "<type id=...>")
        for scope in (cap, cap.find("channel_dev_addr")):
            if kind in ("css", "ccw") and scope is not None:
                _check_ccw(scope, name, source)
    parent = (root.findtext("parent") or "").strip() or None
    return NodeDevice(name, xml, capabilities_of(xml), parent)


def _check_ccw(scope, name: str, source: str) -> None:
    for tag, limit in _CCW_LIMITS.items():
        text = (scope.findtext(tag) or "").strip()
        try:
            value = int(text, 16) if text.lower().startswith("0x") \
                else int(text)
        except ValueError:
            value = -1
        if not 0 <= value <= limit:
            raise NodeDeviceLoadError(
                f"{source}: device {name!r}: <{tag}> {text!r} is outside "
                f"0-0x{limit:x}, as libvirt's parser refuses it")


def _files(paths: Iterable[str | os.PathLike[str]]) -> list[pathlib.Path]:
    files: list[pathlib.Path] = []
    for raw in paths:
        path = pathlib.Path(raw)
        if path.is_dir():
            # A directory's symlinks are not followed: only its own files.
            files.extend(sorted(p for p in path.glob("*.xml")
                                if p.is_file() and not p.is_symlink()))
        else:
            files.append(path)
    return files


def _read(path: pathlib.Path) -> list[NodeDevice]:
    try:
        with path.open("rb") as handle:
            data = handle.read(MAX_FILE_BYTES + 1)
    except OSError as exc:
        raise NodeDeviceLoadError(
            f"{path}: cannot read ({exc.strerror}); give a readable node "
            "device XML file or directory") from None
    if len(data) > MAX_FILE_BYTES:
        raise NodeDeviceLoadError(f"{path}: larger than {MAX_FILE_BYTES} "
                                  "bytes; not a node device file")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise NodeDeviceLoadError(f"{path}: not UTF-8 ({exc.reason} at "
                                  f"byte {exc.start})") from None
    starts = [m.start() for m in _DOCUMENT_START.finditer(text)]
    if not starts:
        raise NodeDeviceLoadError(f"{path}: no <device> document starts a "
                                  "line; not libvirt node device XML")
    head = text[:starts[0]]
    if head.strip():
        raise NodeDeviceLoadError(f"{path}: text before the first <device> "
                                  "document; not libvirt node device XML")
    ends = [*starts[1:], len(text)]
    chunks = [text[a:b] for a, b in zip(starts, ends, strict=True)]
    return [parse_node_device(chunk, f"{path}, document {i + 1}")
            for i, chunk in enumerate(chunks)]
