"""Host snapshots: record what the libvirt driver reads, replay it later.

A snapshot is a directory::

    manifest.json            what was recorded, from where, and the files
    capabilities.xml         getCapabilities()
    domcaps-<n>.xml          one getDomainCapabilities() answer each
    nodedev/<name>.xml       node devices (listAllDevices + XMLDesc)

``manifest.json`` (format ``virtdriver-snapshot``, version 1)::

    {"format": "virtdriver-snapshot", "version": 1,
     "uri": "qemu:///embed?root=...", "hostname": "...",
     "host": "compute-1", "disk_gb": 930,
     "lib_version": 9000000, "hypervisor_version": 7002000,
     "cpu_map": [8, [true, ...], 8],
     "capabilities": "capabilities.xml",
     "domain_capabilities": [{"arch": "x86_64", "virt_type": "kvm",
                              "machine": null, "emulator": null,
                              "file": "domcaps-0.xml"} |
                             {..., "error": {"code": 3, "domain": 0,
                                             "message": "..."}}],
     "node_devices": [{"name": "pci_0000_00_02_0",
                       "file": "nodedev/pci_0000_00_02_0.xml"}]}

``hostname`` is libvirt's ``getHostname()``; ``host`` is the node name the
recording used (``[DEFAULT] host``, else the machine's name) and
``disk_gb`` the size of the disk it reports as ``DISK_GB`` (before
``reserved_host_disk_mb`` and ``disk_allocation_ratio``, which the
replaying configuration applies).  A replay names the node ``host`` and
reports ``disk_gb``.  Both are optional (snapshots written before they
were recorded): without ``host`` the node is named ``hostname``, without
``disk_gb`` no ``DISK_GB`` is reported (the replaying machine's disk says
nothing about the recorded host's).

A snapshot may also be written by hand: ``capabilities.xml`` plus any
``domcaps*.xml`` files, no manifest.  Each domain capabilities document is
then served for its own (arch, virt type, machine) — read from inside it —
and the first one of each (arch, virt type) also as that arch's default
machine.  What is missing is *unknown*, never absent.

Every XML file is checked with the same hostile-input rules as anything
libvirt returns (size limit, no DTD or entities) before it is served; a
file over the size limit is refused by its size, before it is read.
"""

from __future__ import annotations

import json
import pathlib
import stat
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from virtdriver.capabilities import (
    CapabilityXMLError, parse_domain_capabilities, parse_host_capabilities)
from virtdriver.capabilities.xmlsafe import DEFAULT_MAX_BYTES, check_size
from virtdriver.fakelibvirt.constants import (
    VIR_ERR_OPERATION_FAILED, VIR_FROM_NODEDEV)
from virtdriver.fakelibvirt.documents import (
    DomainCapsKey, HostDocuments, RecordedError)

FORMAT = "virtdriver-snapshot"
VERSION = 1
MANIFEST = "manifest.json"
#: The longest ``host`` a manifest may name (a DNS name's limit).
MAX_HOST_NAME = 255
#: The largest ``disk_gb`` (Placement's largest inventory total).
MAX_DISK_GB = 2**31 - 1
CAPABILITIES = "capabilities.xml"

#: What to do about a file over the size limit (there is no option for it).
_TOO_LARGE = ("no libvirt document comes near that size and the limit is "
              "fixed; check that the file is the one libvirt or `virtdriver "
              "snapshot` wrote, and record the host again if it is not")


class SnapshotError(ValueError):
    """A snapshot directory is not usable; the message names the file."""


def write_snapshot(directory: str | pathlib.Path, documents: HostDocuments,
                   uri: str) -> pathlib.Path:
    """Write ``documents`` (recorded from ``uri``) as a snapshot directory.

    Returns the manifest's path.  An existing manifest is replaced.
    """
    root = pathlib.Path(directory)
    (root / "nodedev").mkdir(parents=True, exist_ok=True)
    manifest: dict[str, Any] = {
        "format": FORMAT, "version": VERSION, "uri": uri,
        "hostname": documents.hostname,
        "host": documents.compute_host, "disk_gb": documents.disk_gb,
        "lib_version": documents.lib_version,
        "hypervisor_version": documents.version,
        "cpu_map": (None if documents.cpu_map is None else
                    [documents.cpu_map[0], list(documents.cpu_map[1]),
                     documents.cpu_map[2]]),
        "capabilities": None, "domain_capabilities": [], "node_devices": []}
    if documents.node_devices_error is not None:
        error = documents.node_devices_error
        manifest["node_devices_error"] = {
            "code": error.code, "domain": error.domain,
            "message": error.message}
    if documents.capabilities is not None:
        (root / CAPABILITIES).write_text(documents.capabilities,
                                         encoding="utf-8")
        manifest["capabilities"] = CAPABILITIES
    for index, (key, xml) in enumerate(
            documents.domain_capabilities.items()):
        name = f"domcaps-{index}.xml"
        (root / name).write_text(xml, encoding="utf-8")
        manifest["domain_capabilities"].append({**_key_json(key),
                                                "file": name})
    for key, error in documents.domain_capabilities_errors.items():
        manifest["domain_capabilities"].append({**_key_json(key), "error": {
            "code": error.code, "domain": error.domain,
            "message": error.message}})
    for name, xml in sorted(documents.node_devices.items()):
        path = f"nodedev/{_safe_name(name)}.xml"
        (root / path).write_text(xml, encoding="utf-8")
        manifest["node_devices"].append({"name": name, "file": path})
    target = root / MANIFEST
    target.write_text(json.dumps(manifest, indent=2) + "\n",
                      encoding="utf-8")
    return target


def read_snapshot(directory: str | pathlib.Path) -> HostDocuments:
    """The documents of a snapshot directory (with or without manifest).

    Raises:
        SnapshotError: the directory, manifest or a listed file is missing
            or broken; hostile or malformed XML (naming the file).
    """
    root = pathlib.Path(directory)
    if not root.is_dir():
        raise SnapshotError(f"{root}: not a snapshot directory (it does not "
                            "exist or is not a directory)")
    if (root / MANIFEST).exists():
        return _from_manifest(root)
    return _by_hand(root)


def _from_manifest(root: pathlib.Path) -> HostDocuments:
    path = root / MANIFEST
    text = _text(root, MANIFEST, None)
    try:
        manifest = json.loads(text)
    except ValueError as exc:
        raise SnapshotError(f"{path}: not readable JSON: {exc}") from None
    except RecursionError:  # a manifest is a few levels deep, never more
        raise SnapshotError(f"{path}: nested too deeply to be a {FORMAT} "
                            "manifest; take the snapshot again with "
                            "`virtdriver snapshot`") from None
    where = str(path)
    if not isinstance(manifest, Mapping) or manifest.get("format") != FORMAT:
        raise SnapshotError(f"{where}: not a {FORMAT} manifest (its "
                            "'format' must be that name)")
    if manifest.get("version") != VERSION:
        raise SnapshotError(f"{where}: version {manifest.get('version')!r} "
                            f"is not supported; this virtdriver reads "
                            f"version {VERSION}")
    domcaps: dict[DomainCapsKey, str] = {}
    errors: dict[DomainCapsKey, RecordedError] = {}
    for index, entry in enumerate(_list(manifest, "domain_capabilities",
                                        where)):
        item = f"{where}: domain_capabilities[{index}]"
        key = _key(entry, item)
        if "error" in entry:
            error = entry["error"]
            try:
                errors[key] = RecordedError(int(error["code"]),
                                            int(error["domain"]),
                                            str(error["message"]))
            except (KeyError, TypeError, ValueError):
                raise SnapshotError(f"{item}: error needs integer code and "
                                    "domain and a message") from None
        else:
            domcaps[key] = _xml(root, entry.get("file"), item,
                                parse_domain_capabilities)
    devices = {}
    for index, entry in enumerate(_list(manifest, "node_devices", where)):
        item = f"{where}: node_devices[{index}]"
        if not isinstance(entry, Mapping) or not entry.get("name"):
            raise SnapshotError(f"{item}: needs a name and a file")
        devices[str(entry["name"])] = _text(root, entry.get("file"), item)
    capabilities = manifest.get("capabilities")
    return HostDocuments(
        capabilities=(None if capabilities is None else _xml(
            root, capabilities, f"{where}: capabilities",
            parse_host_capabilities)),
        domain_capabilities=MappingProxyType(domcaps),
        domain_capabilities_errors=MappingProxyType(errors),
        cpu_map=_cpu_map(manifest.get("cpu_map"), where),
        lib_version=_int(manifest, "lib_version", 0, where),
        version=_int(manifest, "hypervisor_version", 0, where),
        hostname=str(manifest.get("hostname") or root.name),
        node_devices=MappingProxyType(devices),
        compute_host=_compute_host(manifest, where),
        disk_gb=_disk_gb(manifest, where),
        node_devices_error=_recorded_error(manifest.get("node_devices_error"),
                                           f"{where}: node_devices_error"))


def _compute_host(manifest: Mapping, where: str) -> str | None:
    """``host`` (``null``: not known), else, in an older snapshot that has
    no such key, libvirt's ``hostname``."""
    name = "host" if "host" in manifest else "hostname"
    value = manifest.get(name)
    if value is None or (value == "" and name == "hostname"):
        return None
    if not isinstance(value, str) or not value.strip() \
            or len(value) > MAX_HOST_NAME:
        raise SnapshotError(f"{where}: {name} must be a host name (text of "
                            f"1 to {MAX_HOST_NAME} characters)")
    return value


def _disk_gb(manifest: Mapping, where: str) -> int | None:
    value = manifest.get("disk_gb")
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) \
            or not 0 <= value <= MAX_DISK_GB:
        raise SnapshotError(f"{where}: disk_gb must be a whole number of "
                            f"GiB from 0 to {MAX_DISK_GB}")
    return value


#: A hand-written snapshot holds no node devices: unknown, not none.
HAND_WRITTEN_DEVICES = RecordedError(
    VIR_ERR_OPERATION_FAILED, VIR_FROM_NODEDEV,
    "a snapshot written by hand records no node devices")


def _by_hand(root: pathlib.Path) -> HostDocuments:
    if not (root / CAPABILITIES).exists():
        raise SnapshotError(f"{root}: neither {MANIFEST} nor "
                            f"{CAPABILITIES}; a hand-written snapshot needs "
                            f"at least {CAPABILITIES}")
    capabilities = _xml(root, CAPABILITIES, None, parse_host_capabilities)
    domcaps: dict[DomainCapsKey, str] = {}
    for path in sorted(root.glob("domcaps*.xml")):
        xml = _xml(root, path.name, None, parse_domain_capabilities)
        caps = parse_domain_capabilities(xml, str(path))
        if not (caps.arch and caps.virt_type):
            raise SnapshotError(f"{path}: names no <arch> or <domain>; a "
                                "hand-written document must say which "
                                "arch and virt type it is for")
        domcaps.setdefault(DomainCapsKey(caps.arch, caps.virt_type), xml)
        if caps.machine:
            domcaps.setdefault(DomainCapsKey(caps.arch, caps.virt_type,
                                             caps.machine), xml)
    return HostDocuments(capabilities=capabilities,
                         domain_capabilities=MappingProxyType(domcaps),
                         hostname=root.name,
                         node_devices_error=HAND_WRITTEN_DEVICES)


def _xml(root: pathlib.Path, name: Any, where: str | None, parser) -> str:
    text = _text(root, name, where)
    try:
        parser(text, str(root / name))
    except CapabilityXMLError as exc:
        raise _refused(where, exc) from None
    return text


def _text(root: pathlib.Path, name: Any, where: str | None) -> str:
    """The file ``name`` of the snapshot, as UTF-8 text.

    ``where`` names the manifest entry that lists it (``None``: the file
    is its own entry, its path says it all).  The size limit is checked
    on the file's size before anything is read, and the read itself stops
    one byte past the limit (a file growing meanwhile is refused too).
    """
    if not isinstance(name, str) or not name:
        raise SnapshotError(f"{where}: needs a file name")
    path = (root / name).resolve()
    if root.resolve() not in path.parents:
        raise SnapshotError(f"{where}: file {name!r} is outside the "
                            "snapshot directory")
    try:
        info = path.stat()
        if not stat.S_ISREG(info.st_mode):
            raise _refused(where, f"{path} is not a regular file; a snapshot "
                           "holds plain files only")
        limit = DEFAULT_MAX_BYTES
        check_size(info.st_size, source=str(path), max_bytes=limit,
                   hint=_TOO_LARGE)
        with path.open("rb") as handle:
            data = handle.read(limit + 1)
        check_size(len(data), source=str(path), max_bytes=limit,
                   hint=_TOO_LARGE)
        return data.decode("utf-8")
    except CapabilityXMLError as exc:
        raise _refused(where, exc) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise _refused(where, f"cannot read {path}: {exc}") from None


def _refused(where: str | None, problem: object) -> SnapshotError:
    return SnapshotError(f"{where}: {problem}" if where else str(problem))


def _list(manifest: Mapping, name: str, where: str) -> list:
    value = manifest.get(name) or []
    if not isinstance(value, list):
        raise SnapshotError(f"{where}: {name!r} must be a list")
    return value


def _key(entry: Any, where: str) -> DomainCapsKey:
    if not isinstance(entry, Mapping) or not entry.get("arch") \
            or not entry.get("virt_type"):
        raise SnapshotError(f"{where}: needs arch and virt_type")
    return DomainCapsKey(str(entry["arch"]), str(entry["virt_type"]),
                         entry.get("machine"), entry.get("emulator"))


def _key_json(key: DomainCapsKey) -> dict[str, Any]:
    return {"arch": key.arch, "virt_type": key.virt_type,
            "machine": key.machine, "emulator": key.emulator}


def _cpu_map(value: Any, where: str):
    if value is None:
        return None
    try:
        count, flags, online = value
        flags = tuple(bool(f) for f in flags)
        if len(flags) != int(count):
            raise ValueError
        return int(count), flags, int(online)
    except (TypeError, ValueError):
        raise SnapshotError(f"{where}: cpu_map must be [count, [online "
                            "flags, one per CPU], online count]") from None


def _int(manifest: Mapping, name: str, default: int, where: str) -> int:
    value = manifest.get(name, default)
    if isinstance(value, bool) or not isinstance(value, int):
        raise SnapshotError(f"{where}: {name} must be an integer")
    return value


def _safe_name(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in name)


def _recorded_error(value: Any, item: str) -> RecordedError | None:
    if value is None:
        return None
    try:
        return RecordedError(int(value["code"]), int(value["domain"]),
                             str(value["message"]))
    except (KeyError, TypeError, ValueError):
        raise SnapshotError(f"{item}: needs integer code and domain and a "
                            "message") from None
