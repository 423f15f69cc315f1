"""Nodes an operator disabled: ``virtdriver disable NODE [--reason TEXT]``.

A disabled node's root carries ``COMPUTE_STATUS_DISABLED`` (Nova's
scheduler then sends it no new instance, as when Nova's compute service
is disabled); ``virtdriver enable NODE`` takes it off again.  The
tracker applies the state in every update of the node, so it holds across
cycles and restarts.  It lives in ``<state dir>/disabled-<driver>.json``::

    {"format": "virtdriver-disabled-nodes", "version": 1,
     "nodes": {"<nodename>": {"reason": "<text or null>",
                              "since": "<ISO 8601 UTC>"}}}

written atomically (:mod:`virtdriver.state_file`), read without following
a link and refused if another user could have written it.  Losing the
file enables every node at the next update; the tracker takes off only a
``COMPUTE_STATUS_DISABLED`` it provably set (its ledger), never one that
Nova or an operator set.
"""

from __future__ import annotations

import datetime
import pathlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from types import MappingProxyType

from virtdriver.state_file import CachedFile, driver_file, read_json, save_json

FORMAT = "virtdriver-disabled-nodes"
VERSION = 1
#: A reason longer than this is refused (it is shown on one line).
MAX_REASON = 255
_REMEDY = ("fix or delete it (deleting it enables every node at the next "
           "update)")


class NodeStatusError(ValueError):
    """The disabled-nodes file cannot be read or written, or a reason is
    unusable; the message names the file or value and what to do."""

    def __init__(self, path: pathlib.Path | None, problem: str,
                 remedy: str | None = None) -> None:
        self.path = path
        where = f"disabled nodes {path}: " if path is not None else ""
        super().__init__(f"{where}{problem}; {remedy or _REMEDY}")


@dataclass(frozen=True)
class Disabled:
    """Why and since when a node is disabled."""

    reason: str | None
    since: str

    def describe(self) -> str:
        """``disabled since … (reason: …)`` for ``report``/``explain``."""
        why = f"reason: {self.reason}" if self.reason else "no reason given"
        return f"disabled since {self.since} ({why})"


class NodeStatus(Mapping[str, Disabled]):
    """Immutable: nodename → :class:`Disabled`, for the disabled nodes."""

    def __init__(self, nodes: Mapping[str, Disabled] | None = None) -> None:
        self._nodes = MappingProxyType(dict(nodes or {}))

    def __getitem__(self, nodename: str) -> Disabled:
        return self._nodes[nodename]

    def __iter__(self) -> Iterator[str]:
        return iter(self._nodes)

    def __len__(self) -> int:
        return len(self._nodes)

    def disabled(self, nodename: str, reason: str | None,
                 now: datetime.datetime | None = None) -> NodeStatus:
        """A new status with ``nodename`` disabled for ``reason``.

        Raises:
            NodeStatusError: the reason is too long or not one line.
        """
        if reason is not None:
            reason = reason.strip() or None
        if reason is not None and (len(reason) > MAX_REASON
                                   or not reason.isprintable()):
            raise NodeStatusError(
                None, f"--reason is {len(reason)} characters or has "
                "control characters", f"give one printable line of at most "
                f"{MAX_REASON} characters")
        now = now or datetime.datetime.now(datetime.timezone.utc)
        since = now.replace(microsecond=0).isoformat()
        return NodeStatus({**self._nodes, nodename: Disabled(reason, since)})

    def enabled(self, nodename: str) -> NodeStatus:
        """A new status without ``nodename``."""
        return NodeStatus({n: d for n, d in self._nodes.items()
                           if n != nodename})

    def to_json(self) -> dict:
        return {"format": FORMAT, "version": VERSION,
                "nodes": {name: {"reason": d.reason, "since": d.since}
                          for name, d in sorted(self._nodes.items())}}

    @classmethod
    def load(cls, path: pathlib.Path) -> NodeStatus:
        """Read ``path``; a missing file: no node disabled.

        Raises:
            NodeStatusError: unreadable or not a disabled-nodes document.
        """
        document = read_json(path, NodeStatusError)
        if document is None:
            return cls()
        if (not isinstance(document, dict)
                or document.get("format") != FORMAT
                or document.get("version") != VERSION
                or not isinstance(document.get("nodes"), dict)):
            raise NodeStatusError(path, f"not a {FORMAT} version {VERSION} "
                                  "document")
        nodes = {}
        for name, entry in document["nodes"].items():
            if not (isinstance(entry, dict)
                    and isinstance(entry.get("since"), str)
                    and isinstance(entry.get("reason"), (str, type(None)))):
                raise NodeStatusError(path, f"nodes.{name} is not "
                                      "{\"reason\": ..., \"since\": ...}")
            nodes[name] = Disabled(entry["reason"], entry["since"])
        return cls(nodes)

    def save(self, path: pathlib.Path) -> None:
        """Write atomically.

        Raises:
            NodeStatusError: it cannot be written (the old one stays).
        """
        save_json(path, self.to_json(), NodeStatusError, "disabled nodes")


class NodeStatusFile(CachedFile[NodeStatus]):
    """The state directory's disabled-nodes file of one driver (re-read
    only when changed; use under the state directory's lock)."""

    def __init__(self, state_dir: pathlib.Path | str, driver_name: str
                 ) -> None:
        super().__init__(driver_file(state_dir, "disabled", driver_name),
                         NodeStatus.load, NodeStatus())
