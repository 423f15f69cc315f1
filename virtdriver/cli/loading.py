"""The command's driver, loaded the one way every command loads it.

``report``, ``sync``, ``agent``, the claims commands, ``diff``, and
``explain`` and ``image-check`` with ``--driver``, all build their driver
here: :func:`driver_arguments` is what the command line offers,
:func:`new_driver` hands it to
:func:`~virtdriver.drivers.loader.build_driver` (which passes each
constructor what its signature takes), and :func:`host_tree` builds the
tree ``report`` shows.
"""

from __future__ import annotations

import argparse
import os
import pathlib
import tempfile

from virtdriver.cli.errors import CommandError
from virtdriver.drivers.base import ComputeDriver
from virtdriver.drivers.loader import build_driver
from virtdriver.resource_tracker.provider_tree import ProviderTree
from virtdriver.resource_tracker.tracker import ResourceTracker

#: The fake driver's host when ``--host-spec`` is not given.
DEFAULT_HOST_SPEC = "small"
#: Where a throw-away tracker state goes when it can: memory (tmpfs),
#: where the ledger's fsyncs cost nothing; else the temp dir.
SCRATCH_PARENT = "/dev/shm"


def driver_arguments(args: argparse.Namespace, conf) -> dict[str, object]:
    """The keyword arguments the command line offers ``args.driver``:
    ``conf`` to every driver, and the in-tree drivers' own options (which
    :mod:`.checks` refuses for any other driver)."""
    offered: dict[str, object] = {"conf": conf}
    name = args.driver
    if name in ("libvirt", "fake"):
        offered["nested"] = not getattr(args, "flat", False)
    if name == "libvirt":
        offered["uri"] = args.uri
        offered["profile"] = getattr(args, "profile", None) or "numa"
        if hasattr(args, "recorded_disk_gb"):  # a replay: the recorded disk
            offered["disk_gb"] = args.recorded_disk_gb
    elif name == "fake":
        offered["host"] = args.host_spec or DEFAULT_HOST_SPEC
    elif name == "ironic":
        offered["inventory_path"] = args.inventory
    return offered


def new_driver(args: argparse.Namespace, conf) -> ComputeDriver:
    """``args.driver`` built from :func:`driver_arguments` (not yet
    initialised)."""
    return build_driver(args.driver, driver_arguments(args, conf))


def node_name(args: argparse.Namespace, conf) -> str:
    """The host name ``init_host`` is given: a replayed snapshot's
    recorded host, else ``[DEFAULT] host``, else the machine's name."""
    from virtdriver.conf.host import host_name
    return host_name(conf, getattr(args, "recorded_host", None))


def started_driver(args: argparse.Namespace, conf) -> ComputeDriver:
    """:func:`new_driver`, initialised for this host
    (``init_host(node_name(args, conf))``)."""
    driver = new_driver(args, conf)
    driver.init_host(node_name(args, conf))
    return driver


def chosen_node(driver: ComputeDriver, args: argparse.Namespace) -> str:
    """``--node`` if the driver has it, else the driver's only node.

    Raises:
        CommandError: no such node, or several and none chosen.
    """
    nodes = driver.get_available_nodes()
    wanted = getattr(args, "node", None)
    shown = ", ".join(nodes[:10]) + (", …" if len(nodes) > 10 else "")
    if wanted is not None and wanted not in nodes:
        raise CommandError(f"--node {wanted!r}: driver {args.driver!r} has "
                           f"no such node; give one of: {shown or 'none'}")
    if wanted is None and len(nodes) != 1:
        raise CommandError(f"driver {args.driver!r} has {len(nodes)} nodes; "
                           f"say which with --node ({shown or 'none'})")
    return wanted if wanted is not None else nodes[0]


def provider_config(conf) -> str | None:
    """``[compute] provider_config_location`` (``None`` when emptied)."""
    return conf.compute.provider_config_location or None


def scratch_parent() -> str | None:
    """:data:`SCRATCH_PARENT` if this process may make a directory there,
    else ``None`` (the temp dir)."""
    if os.path.isdir(SCRATCH_PARENT) and os.access(SCRATCH_PARENT,
                                                   os.W_OK | os.X_OK):
        return SCRATCH_PARENT
    return None


def host_tree(driver: ComputeDriver, driver_name: str, conf) -> ProviderTree:
    """The tree the tracker builds for every node of ``driver`` from an
    empty one, as ``report`` shows it: a scratch ledger, thrown away
    (showing a tree must not change the real one)."""
    return host_tracker(driver, driver_name, conf).tree


def host_tracker(driver: ComputeDriver, driver_name: str, conf
                 ) -> ResourceTracker:
    """The tracker :func:`host_tree` builds its tree with, after its
    update (its state directory gone)."""
    with tempfile.TemporaryDirectory(dir=scratch_parent()) as scratch:
        _copy_node_status(driver_name, pathlib.Path(scratch))
        tracker = ResourceTracker(driver, state_dir=pathlib.Path(scratch),
                                  driver_name=driver_name,
                                  provider_config=provider_config(conf))
        tracker.update_all()
    return tracker


def check_provider_config(tracker: ResourceTracker) -> None:
    """Exit 2 (after the command's output) when the operator's provider
    config files were refused in ``tracker``'s last update: the tracker
    logged every problem, built the tree without the files and kept what
    they applied before (``docs/provider-config.md``).

    Raises:
        CommandError: as said.
    """
    step = tracker.provider_config
    if step.problem:
        raise CommandError(
            f"the provider config files in {step.location} were refused "
            "(every problem is listed above), so nothing in them was "
            "applied and what they applied before is kept; fix each "
            "problem and run again")


def _copy_node_status(driver_name: str, scratch: pathlib.Path) -> None:
    """The real state directory's disabled nodes, into the scratch one, so
    the tree shown has ``COMPUTE_STATUS_DISABLED`` where a sync puts it."""
    from virtdriver.resource_tracker.node_status import NodeStatusFile
    from virtdriver.state_dir import StateDirError, state_dir

    try:
        status = NodeStatusFile(state_dir(), driver_name).read()
    except (StateDirError, ValueError, OSError):
        return
    if status:
        NodeStatusFile(scratch, driver_name).save(status)
