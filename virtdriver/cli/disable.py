"""``virtdriver disable NODE [--reason TEXT]`` and ``enable NODE``.

Record in the state directory (``disabled-<driver>.json``, under its
lock) that a node is disabled, or no more; the tracker then sets or
clears ``COMPUTE_STATUS_DISABLED`` on the node's root in every update —
the next ``virtdriver sync`` or agent cycle, and every one after, across
restarts (:mod:`virtdriver.resource_tracker.node_status`).  ``report``
and ``explain`` say why a node is disabled.
"""

from __future__ import annotations

import argparse
import sys
from typing import TextIO

import os_traits

from virtdriver.cli.errors import CommandError
from virtdriver.cli.loading import started_driver
from virtdriver.filelock import exclusive_lock
from virtdriver.resource_tracker.node_status import (
    NodeStatus, NodeStatusFile)
from virtdriver.resource_tracker.tracker import LOCK_FILE
from virtdriver.state_dir import StateDirError, state_dir

_SHOWN = 10


def run_node_status(args: argparse.Namespace, conf,
                    out: TextIO | None = None) -> int:
    """Disable or enable ``args.node``; exit 0 (also when it already was).

    Raises:
        CommandError: the node is not one of the driver's, or the state
            directory cannot be used.
    """
    out = out or sys.stdout
    driver = started_driver(args, conf)
    nodes = driver.get_available_nodes()
    if args.node not in nodes:
        shown = ", ".join(nodes[:_SHOWN]) or "none"
        if len(nodes) > _SHOWN:
            shown += f", … ({len(nodes)} in all)"
        raise CommandError(
            f"{args.command} {args.node}: not a node of driver "
            f"{args.driver!r} (its nodes: {shown}); give one of those")
    try:
        directory = state_dir()
    except StateDirError as exc:
        raise CommandError(str(exc)) from exc
    status_file = NodeStatusFile(directory, args.driver)
    with exclusive_lock(directory / LOCK_FILE, purpose=(
            f"the virtdriver state directory {directory}")):
        status = status_file.read()
        if args.command == "disable":
            status = status.disabled(args.node, args.reason)
        elif args.node in status:
            status = status.enabled(args.node)
        else:
            out.write(f"node {args.node} is not disabled; nothing to do\n")
            return 0
        status_file.save(status)
    out.write(describe_change(args.command, args.node, status))
    return 0


def describe_change(command: str, node: str, status: NodeStatus) -> str:
    """What ``disable``/``enable`` did and when it takes effect."""
    trait = os_traits.COMPUTE_STATUS_DISABLED
    if command == "disable":
        return (f"node {node}: {status[node].describe()}; the next "
                f"`virtdriver sync` or agent cycle sets {trait} on its "
                "root, and keeps it until `virtdriver enable "
                f"{node}`\n")
    return (f"node {node}: enabled; the next `virtdriver sync` or agent "
            f"cycle takes {trait} off its root (only if virtdriver set "
            "it)\n")


def status_lines(driver_name: str, nodes: list[str]) -> str:
    """One line per disabled node among ``nodes`` (for ``report``):
    ``node N: disabled since … (reason: …)``; empty if none or the state
    directory cannot be read."""
    try:
        status = NodeStatusFile(state_dir(), driver_name).read()
    except (StateDirError, ValueError, OSError):
        return ""
    return "".join(f"node {node}: {status[node].describe()} "
                   f"(`virtdriver enable {node}` to enable)\n"
                   for node in nodes if node in status)
