"""``virtdriver sync``: this host's provider tree, made Placement's.

The whole main job in one run, under the state directory's lock
(``<state_dir>/virtdriver.lock``, the ledger's and the sync state's) from
loading the driver to saving the sync state, so two runs sharing the
directory take turns — the second waits, or gives up naming the holder:

1. load the driver as ``report`` does and update every node with the real
   state directory's ledger (:class:`ResourceTracker`);
2. sync the tree with a :class:`~virtdriver.placement.sync.Syncer` (the
   state directory's ``placement-sync.json`` and marking aggregate, so
   a second run costs one read) and :class:`TrackerOwnership`, to: ``--placement-url``
   (``noauth2`` admin token), else the Placement ``[placement]`` names
   (keystone auth), else Placement **embedded in this process** on SQLite
   in the state directory (``placement.sqlite``) — not even started
   when its database is exactly as the last clean sync left it and the
   tree changed nothing (:mod:`~virtdriver.placement.db_stamp`: the
   summary then says 0 requests, and a note says why);
3. print the tree, then per provider what the sync changed and a summary
   with the request count (``no changes, 0 writes`` when there was nothing
   to do); ``--format json`` gives ``{"tree": ..., "sync": ...}``.

Exit 0 synced, 2 a provider failed or Placement refused the request (4xx)
or the input is bad — an operator's provider config file refused, the
marking aggregate not saved: the rest is synced all the same —, 3
Placement unreachable or failing (5xx): the sync is pending and the next
run catches up.
"""

from __future__ import annotations

import argparse
import json
import logging
import pathlib
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, TextIO


from virtdriver.render.host import render_node_source
from virtdriver.render.progress import progress_bar
from virtdriver.render.sync import render_sync, sync_json
from virtdriver.render.tree import render_tree
from virtdriver.cli.checks import placement_url
from virtdriver.cli.errors import EXIT_UNREACHABLE, CommandError
from virtdriver.cli.loading import (
    check_provider_config, provider_config, started_driver)
from virtdriver.filelock import exclusive_lock
from virtdriver.placement.db_stamp import DatabaseStamp
from virtdriver.placement.marker import Marker, read_marker
from virtdriver.placement.ownership import TrackerOwnership
from virtdriver.placement.allocations import (
    ClaimsAllocations, PlacementAllocations)
from virtdriver.placement.reshape import ClaimsPlacement, DriverPlacement
from virtdriver.placement.result import SyncResult
from virtdriver.placement.state import known_roots
from virtdriver.placement.sync import Syncer
from virtdriver.resource_tracker.tracker import LOCK_FILE, ResourceTracker
from virtdriver.state_dir import StateDirError, state_dir

if TYPE_CHECKING:
    from virtdriver.placement.client import PlacementClient

LOG = logging.getLogger(__name__)

#: The embedded Placement's database, in the state directory.
EMBEDDED_DB = "placement.sqlite"


@dataclass(frozen=True)
class Target:
    """Where the sync goes: a description for the output, and how to make
    the client (called under the state directory's lock: the embedded
    Placement creates or migrates its database)."""

    description: str
    connect: Callable[[], PlacementClient]
    stamp: DatabaseStamp | None = None


def run_sync(args: argparse.Namespace, conf, out: TextIO | None = None, *,
             uri_reason: str | None = None) -> int:
    """Update this host's tree, sync it to Placement, show both.

    Raises:
        CommandError: the sync is pending (status 3) or failed (2); the
            tree and what was done are printed first.
    """
    out = out or sys.stdout
    try:
        directory = state_dir()
    except StateDirError as exc:
        raise CommandError(str(exc)) from exc
    target = placement_target(args, conf, directory)
    with exclusive_lock(directory / LOCK_FILE,
                        purpose=f"the virtdriver state directory "
                        f"{directory}"):
        driver = started_driver(args, conf)
        tracker = ResourceTracker(driver, state_dir=directory,
                                  driver_name=args.driver,
                                  provider_config=provider_config(conf))
        # A driver's reshape reads Placement's allocations, or the claims'
        # when Placement is embedded (not started for that).
        source = (ClaimsAllocations(tracker) if target.stamp is not None
                  else PlacementAllocations(target.connect))
        tracker.allocations = source
        tracker.known_roots = known_roots(directory)
        owned = TrackerOwnership(tracker)
        owned.note(tracker.update_all())
        options = {"owned_for": owned, "remove": owned.gone,
                   "dry_run": args.dry_run,
                   "placement_of": DriverPlacement(
                       tracker.reshapes, ClaimsPlacement(tracker))}
        marker = read_marker(directory)
        result = (_unchanged(target, tracker.tree, marker, options)
                  if not tracker.reshapes else None)
        if result is None:
            if target.stamp is not None:
                target.stamp.forget()   # Placement may write from now on
            client = (source.client if isinstance(source, PlacementAllocations)
                      else target.connect())
            with progress_bar("syncing providers",
                              quiet=getattr(args, "quiet", False)) as bar:
                result = Syncer(client, directory, marker=marker).sync(
                    tracker.tree, progress=bar, **options)
            if target.stamp is not None and _clean(result):
                target.stamp.record()
        owned.synced(result)
    if args.format == "json":
        out.write(json.dumps({"tree": tracker.tree.to_json(),
                              "sync": sync_json(result, target.description)},
                             indent=2) + "\n")
    else:
        for node in driver.get_available_nodes():
            out.write(render_node_source(
                driver.node_capabilities(node).facts, uri_reason))
        out.write(render_tree(tracker.tree, "text"))
        out.write(render_sync(result, target.description))
    if result.marker_problem and not result.unmarked:
        LOG.warning("%s", result.marker_problem)  # repaired: exit 0
    _check(result)
    check_provider_config(tracker)
    return 0


def placement_target(args: argparse.Namespace, conf,
                     directory: pathlib.Path) -> Target:
    """``--placement-url``, else ``[placement]``, else embedded.

    Raises:
        CommandError: ``--placement-url`` is not an http(s) URL.
        ConfigError: ``[placement]`` is unusable.
    """
    if args.placement_url:
        from virtdriver.placement.client import PlacementClient

        from virtdriver.placement.serve_token import served_token

        url = placement_url(args.placement_url)
        served = served_token(url)
        how = (f"the token in {served[1]}" if served is not None
               else "noauth2 admin token")
        return Target(f"Placement at {url} (--placement-url, {how})",
                      lambda: PlacementClient.from_url(url))
    target = _configured_target(conf)
    if target is not None:
        return target
    from virtdriver.placement.embedded import in_process_endpoint

    db = directory / EMBEDDED_DB
    return Target(f"embedded Placement (in this process) on SQLite {db}",
                  lambda: _embedded(db),
                  DatabaseStamp(db, directory, in_process_endpoint(db)))


def _configured_target(conf) -> Target | None:
    """The Placement ``[placement]`` names, if it names one.  With no file
    (:class:`~virtdriver.conf.defaults.DefaultConf`, see
    :mod:`~virtdriver.cli.command_conf`) it names none, and neither
    oslo.config nor keystoneauth1 is imported."""
    from virtdriver.conf import DefaultConf

    if isinstance(conf, DefaultConf):
        return None
    from virtdriver.conf import placement as placement_conf

    if placement_conf.uses_keystone(conf):
        adapter = placement_conf.placement_adapter(conf)
        return Target(placement_conf.describe(conf),
                      lambda: catalog_client(adapter))
    client = placement_conf.placement_client(conf)
    if client is None:
        return None
    return Target(placement_conf.describe(conf), lambda: client)


def _unchanged(target: Target, tree, marker: Marker, options: dict
               ) -> SyncResult | None:
    """The sync's result without starting the embedded Placement, when its
    database is as our last clean sync left it and nothing changed — the
    marking aggregate included."""
    if target.stamp is None:
        return None
    return target.stamp.replay(tree, marker, **options)


def _clean(result: SyncResult) -> bool:
    """A real sync after which Placement holds what the sync state says
    for our trees, and nothing else: the database may be stamped."""
    return (result.ok and not result.dry_run and not result.foreign
            and not result.kept)


def catalog_client(adapter) -> PlacementClient:
    """A client on ``adapter`` (keystone auth), its endpoint looked up
    first, so that keystone refusing the credentials or its certificate
    (bad input, 2) and keystone not answering or answering 5xx (3, the
    sync pending) are told apart.

    Raises:
        CommandError: as said.
    """
    from virtdriver.placement.client import PlacementClient
    from virtdriver.placement.errors import (
        PlacementError, PlacementUnavailable)
    from virtdriver.placement.transport import catalog_endpoint

    try:
        url = catalog_endpoint(adapter)
    except PlacementUnavailable as exc:
        raise CommandError(
            f"sync pending (the next `virtdriver sync` catches up): {exc}",
            EXIT_UNREACHABLE) from None
    except PlacementError as exc:
        raise CommandError(str(exc)) from None
    if not url:
        raise CommandError(
            "the service catalog has no placement endpoint for [placement] "
            "valid_interfaces and region_name; check them, or set "
            "endpoint_override")
    return PlacementClient(adapter, endpoint_id=url.rstrip("/"))


def _embedded(db: pathlib.Path) -> PlacementClient:
    # Imported here: openstack-placement costs ~0.7 s to import (the
    # embedded module itself imports it only when building the app).
    from virtdriver.placement.embedded import in_process_client
    return in_process_client(db)


def _check(result: SyncResult) -> None:
    """Raise for a sync that did not finish, or could not keep its
    marking aggregate (after the output)."""
    if result.pending:
        raise CommandError(
            f"sync pending (the next `virtdriver sync` catches up): "
            f"{result.reason}", EXIT_UNREACHABLE)
    if result.reason:
        raise CommandError(f"sync failed: {result.reason}")
    if result.errors:
        first = result.errors[0]
        raise CommandError(
            f"sync incomplete: {_count(len(result.errors), 'provider')} "
            f"failed, first {first.name!r} ({first.uuid}): {first.error}; "
            "the others are synced — fix what each error says (listed "
            "above) and run again")
    if result.unmarked:
        raise CommandError(result.marker_problem)


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"
