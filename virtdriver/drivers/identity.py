"""Stable provider identities: the same host yields the same uuids.

Every provider a driver creates gets a uuid derived from names alone
(uuid5), so two runs, two machines replaying one snapshot, and a tracker
restarted against Placement all agree on which provider is which:

* a compute node's root: ``uuid5(NAMESPACE_URL,
  "virtdriver:<kind>:<nodename>")`` (:func:`root_uuid`), where ``kind``
  names the scheme of the driver (``compute-node`` for libvirt, ``fake``
  for the fake driver); a driver whose nodes bring their own uuids (a
  bare-metal node's uuid) does not use it;
* a child: ``uuid5(<parent uuid>, <child name>)`` (:func:`child_uuid`);
  a device provider is derived from its *root* the same way, so it keeps
  its uuid (and its allocations) when it moves between the root and a
  NUMA cell — :func:`is_derived_child` given the root accepts both.

The derivation doubles as proof of identity: a provider whose uuid is the
one these functions give for its name and parent was named by this scheme,
which no edit of a state file can make true of someone else's provider.
The resource tracker relies on it (``docs/resource-tracker.md``).
"""

from __future__ import annotations

import uuid as uuidlib


def root_uuid(kind: str, nodename: str) -> str:
    """The root provider uuid of ``nodename`` under scheme ``kind``."""
    return str(uuidlib.uuid5(uuidlib.NAMESPACE_URL,
                             f"virtdriver:{kind}:{nodename}"))


def child_uuid(parent_uuid: str, name: str) -> str:
    """The uuid of the child named ``name`` under ``parent_uuid``."""
    return str(uuidlib.uuid5(uuidlib.UUID(parent_uuid), name))


def is_derived_child(uuid: str, name: str, parent_uuid: str | None,
                     root_uuid: str | None = None) -> bool:
    """Whether ``uuid`` is :func:`child_uuid` of ``parent_uuid`` and
    ``name`` — or, given ``root_uuid``, of the root and ``name`` (a
    device provider under a NUMA cell); a root, with no parent, never
    is."""
    if parent_uuid is None:
        return False
    try:
        return child_uuid(parent_uuid, name) == uuid or (
            root_uuid is not None and root_uuid != parent_uuid
            and child_uuid(root_uuid, name) == uuid)
    except ValueError:
        return False
