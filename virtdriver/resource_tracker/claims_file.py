"""The instance claims a tracker holds, per node, in its state directory.

``<state_dir>/claims-<driver>.json``::

    {"format": "virtdriver-tracker-claims", "version": 1,
     "nodes": {"<nodename>": <claims document of that node>}}

where each node's document is :func:`virtdriver.claims.usage_json.
usage_to_json`'s.  The file is read and written under the state
directory's lock (the tracker holds it), atomically, and re-parsed only
when another process saved it.  Nothing in it is trusted: each node's
claims are checked against the node's host when read (pins outside the
host, one CPU taken twice, more than the cells hold are refused), so an
edited file is a clear :class:`ClaimsFileError`, never an overcommit.
"""

from __future__ import annotations

import json
import pathlib
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from virtdriver.claims.model import ClaimError
from virtdriver.claims.usage import HostUsage
from virtdriver.claims.usage_json import (
    InvalidClaims, usage_from_json, usage_to_json)
from virtdriver.drivers.host_resources import HostResources
from virtdriver.resource_tracker.ledger import ledger_path
from virtdriver.state_file import (
    Signature, read_json, signature, write_atomically)

FORMAT = "virtdriver-tracker-claims"
VERSION = 1
_EMPTY = HostUsage({})


class ClaimsFileError(ClaimError):
    """The claims file cannot be read, is not a claims file, or claims
    what the host cannot hold.  Nothing was changed.

    Attributes:
        path: the file.
    """

    def __init__(self, path: pathlib.Path, problem: str, remedy: str) -> None:
        self.path = path
        super().__init__(f"instance claims {path}: {problem}; {remedy}")


_REMEDY = ("restore it from a backup, or fix the entries named; deleting it "
           "forgets every claim on this host (instances keep running, but "
           "their CPUs and memory count as free)")


def _error(path: pathlib.Path, problem: str, remedy: str | None
           ) -> ClaimsFileError:
    return ClaimsFileError(path, problem, remedy or _REMEDY)


def claims_path(state_dir: pathlib.Path | str, driver_name: str
                ) -> pathlib.Path:
    """``<state_dir>/claims-<driver_name>.json``."""
    return ledger_path(state_dir, driver_name).with_name(
        f"claims-{driver_name}.json")


class ClaimsFile:
    """The claims of every node of one tracker, as on disk.

    :meth:`nodes` gives each node's raw document (parsed JSON, re-read
    when the file changed); :meth:`usage` one node's claims, checked
    against its host; :meth:`save` writes a new version.  Call them under
    the state directory's lock.
    """

    def __init__(self, state_dir: pathlib.Path | str, driver_name: str
                 ) -> None:
        self.path = claims_path(state_dir, driver_name)
        self._nodes: Mapping[str, Any] = MappingProxyType({})
        self._signature: Signature | None = None

    def nodes(self) -> Mapping[str, Any]:
        """nodename → that node's claims document (unchecked).

        Raises:
            ClaimsFileError: unreadable, not JSON, or not a claims file.
        """
        now = signature(self.path)
        if now is None:
            self._nodes, self._signature = MappingProxyType({}), None
        elif now != self._signature:
            self._nodes = MappingProxyType(self._load())
            self._signature = now
        return self._nodes

    def usage(self, nodename: str, host: HostResources | None
              ) -> HostUsage:
        """``nodename``'s claims, checked against ``host`` (``None``:
        the document's own consistency only).

        Raises:
            ClaimsFileError: the claims are invalid or do not fit ``host``.
        """
        document = self.nodes().get(nodename)
        if document is None:
            return _EMPTY
        try:
            return usage_from_json(document, host)
        except InvalidClaims as exc:
            raise ClaimsFileError(self.path, f"node {nodename!r}: {exc}",
                                  _REMEDY) from None

    def save(self, usages: Mapping[str, HostUsage]) -> None:
        """Write every node's claims (nodes without claims are left out).

        Raises:
            ClaimsFileError: it cannot be written; the old file stands.
        """
        nodes = {name: usage_to_json(usage)
                 for name, usage in sorted(usages.items())
                 if usage.instances}
        text = json.dumps({"format": FORMAT, "version": VERSION,
                           "nodes": nodes}, indent=1, sort_keys=True) + "\n"
        try:
            write_atomically(self.path, text)
        except OSError as exc:
            raise ClaimsFileError(self.path, f"cannot write it ({exc})", (
                "nothing was claimed or released; make the state directory "
                "writable (permissions, free space)")) from None
        self._nodes = MappingProxyType(nodes)
        self._signature = signature(self.path)

    def _load(self) -> dict[str, Any]:
        document = read_json(self.path, _error)
        if not (isinstance(document, dict)
                and document.get("format") == FORMAT):
            raise ClaimsFileError(self.path, f"not a claims file (no "
                                  f"\"format\": \"{FORMAT}\")", _REMEDY)
        if document.get("version") != VERSION:
            raise ClaimsFileError(self.path, f"version "
                                  f"{document.get('version')!r} is not "
                                  f"{VERSION}", _REMEDY)
        nodes = document.get("nodes")
        if not isinstance(nodes, dict) or set(document) != {
                "format", "version", "nodes"}:
            raise ClaimsFileError(self.path, "expected exactly format, "
                                  "version and nodes (an object of nodename "
                                  "-> claims)", _REMEDY)
        return nodes
