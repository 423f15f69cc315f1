"""The agent's loop: what a compute service does, every ``interval`` seconds.

One :class:`Agent` keeps, between cycles, a driver, a
:class:`~virtdriver.resource_tracker.tracker.ResourceTracker` on the real
state directory, a :class:`~virtdriver.placement.sync.Syncer`, a
:class:`~virtdriver.placement.ownership.TrackerOwnership` and one Placement
client — so providers the tracker removes are deleted from Placement, which
a one-shot ``virtdriver sync`` cannot always prove are its own.  Each cycle
(:meth:`Agent.cycle`), under the state directory's lock and only then:

1. ``tracker.update_all()``; a node that fails (libvirt gone: the driver's
   session re-opens it with backoff first; a driver's
   ``HypervisorUnavailable``) is left unchanged — nothing of it is
   removed — and reported as unknown, the cycle pending (3);
2. sync the tree to Placement;
3. one log line: what the sync changed or ``no changes``, with the request
   count, and each node that failed.

The configuration comes from a ``load`` callable returning a
:class:`Setup`; :meth:`Agent.reload` asks for it again at the next cycle
boundary and rebuilds the driver and tracker only when its ``key``
changed — after building the new driver once and reading every node's
resources, so a configuration that cannot work on this host is refused
and the one in use kept.  :meth:`Agent.stop` ends :meth:`Agent.run`
after the current cycle (never in the middle of a state file: they are
written atomically);
:meth:`Agent.abandon` ends the current cycle at once.
"""

from __future__ import annotations

import logging
import pathlib
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from virtdriver.drivers.base import ComputeDriver, DriverError
from virtdriver.filelock import exclusive_lock
from virtdriver.placement.client import PlacementClient
from virtdriver.placement.ownership import TrackerOwnership
from virtdriver.placement.allocations import PlacementAllocations
from virtdriver.placement.reshape import ClaimsPlacement, DriverPlacement
from virtdriver.placement.result import SyncResult
from virtdriver.placement.state import known_roots
from virtdriver.placement.sync import Syncer
from virtdriver.placement.usages import provider_usage
from virtdriver.render.sync import summary
from virtdriver.resource_tracker.results import UpdateAllError
from virtdriver.resource_tracker.tracker import LOCK_FILE, ResourceTracker
from virtdriver.stop_request import StopRequest

LOG = logging.getLogger(__name__)

#: Cycle statuses (the CLI's exit statuses for ``--once``).
OK, BAD_INPUT, PENDING = 0, 2, 3


@dataclass(frozen=True)
class Setup:
    """One configuration of the agent.

    Attributes:
        key: equal keys mean the same driver and tracker (a reload with an
            equal key keeps them).
        directory: the state directory (ledger, sync state, lock).
        driver_name: the ledger's driver name.
        make_driver: a new, not yet initialised driver.
        hostname: given to ``driver.init_host``.
        provider_config: ``[compute] provider_config_location`` or None.
        target: Placement, in words.
        connect: a new Placement client.
    """

    key: Any
    directory: pathlib.Path
    driver_name: str
    make_driver: Callable[[], ComputeDriver]
    hostname: str
    provider_config: str | None
    target: str
    connect: Callable[[], PlacementClient]


#: :attr:`CycleReport.failed`'s key when the driver could not list its
#: nodes (so no node was updated).
NODE_LIST = "(node list)"


@dataclass
class CycleReport:
    """What one cycle did.

    Attributes:
        number: 1 for the first cycle.
        status: :data:`OK`, :data:`BAD_INPUT` or :data:`PENDING`.
        result: the sync's result (None when the cycle stopped before).
        failed: node (or stage) → the error, for what was not updated.
        error: an error that stopped the cycle before the sync.
    """

    number: int
    status: int = OK
    result: SyncResult | None = None
    failed: Mapping[str, Exception] = field(default_factory=dict)
    error: Exception | None = None

    def line(self) -> str:
        """The cycle's one log line."""
        parts = [f"cycle {self.number}:"]
        if self.result is not None:
            parts.append(summary(self.result))
            if self.result.marker_problem:
                parts.append(f"; {self.result.marker_problem}")
        for node, exc in self.failed.items():
            what = ("the driver's node list could not be read (no node "
                    "updated" if node == NODE_LIST else
                    f"node {node} unknown (not updated")
            parts.append(f"; {what}, nothing removed): {_one_line(exc)}")
        if self.error is not None:
            parts.append(f"failed: {_one_line(self.error)}; the next cycle "
                         "tries again")
        return " ".join(parts).replace(" ;", ";")


class Abandoned(BaseException):
    """Raised inside a cycle by :meth:`Agent.abandon` (a second signal)."""


class Agent:
    """The loop; see the module doc.

    Args:
        load: the configuration now (called at start and on reload); may
            raise, which keeps the previous one.
        interval: seconds between cycle starts.
        log: where each cycle's line goes.
        classify: an error → :data:`BAD_INPUT` or :data:`PENDING`.
    """

    def __init__(self, load: Callable[[], Setup], *, interval: float,
                 log: Callable[[str], None],
                 classify: Callable[[BaseException], int]) -> None:
        self._load = load
        self.interval = interval
        self._log = log
        self._classify = classify
        self.setup = load()
        self._stop = StopRequest()
        self._reload = False
        self._in_cycle = False
        self.cycles = 0
        self._state: _State | None = None

    def stop(self) -> None:
        """End :meth:`run` after the current cycle (or the wait now)."""
        self._stop.set()

    def abandon(self) -> None:
        """Stop at once: end the current cycle where it is (its files are
        written whole or not at all; the lock is released)."""
        self._stop.set()
        if self._in_cycle:
            raise Abandoned()

    def reload(self) -> None:
        """Read the configuration again at the next cycle boundary."""
        self._reload = True

    def run(self, *, once: bool = False) -> int:
        """Cycle until :meth:`stop`; ``once``: one cycle, its status.
        Stopped, the status is 0."""
        try:
            while not self._stop.is_set():
                started = time.monotonic()
                report = self.cycle()
                if once:
                    return report.status
                self._stop.wait(max(0.0, self.interval
                                    - (time.monotonic() - started)))
        except Abandoned:
            self._log(f"cycle {self.cycles}: abandoned (stopping)")
        finally:
            self.close()
        return OK

    def cycle(self) -> CycleReport:
        """One cycle (reloading first when asked); logged."""
        if self._reload:
            self._apply_reload()
        self.cycles += 1
        report = CycleReport(self.cycles)
        self._in_cycle = True
        try:
            self._run_cycle(report)
        except Exception as exc:  # one cycle must not stop the agent
            report.error = exc
            report.status = self._classify(exc)
        finally:
            self._in_cycle = False
        self._log(report.line())
        return report

    def close(self) -> None:
        """Release the driver (the agent can build it again)."""
        state, self._state = self._state, None
        if state is not None:
            state.close()

    def _run_cycle(self, report: CycleReport) -> None:
        setup = self.setup
        with exclusive_lock(setup.directory / LOCK_FILE,
                            purpose=f"the virtdriver state directory "
                            f"{setup.directory}"):
            if self._state is None:
                self._state = _State(setup)
            state = self._state
            try:
                results = state.tracker.update_all()
            except UpdateAllError as exc:
                results, report.failed = exc.results, dict(exc.errors)
            except DriverError as exc:  # the node list: nothing changed
                # Not this host's name: an ironic driver's nodes are not it.
                results, report.failed = {}, {NODE_LIST: exc}
            state.owned.note(results)
            result = state.syncer.sync(
                state.tracker.tree, owned_for=state.owned,
                remove=state.owned.gone,
                placement_of=DriverPlacement(state.tracker.reshapes,
                                             ClaimsPlacement(state.tracker)))
            state.owned.synced(result)
        report.result = result
        if result.pending:
            report.status = PENDING
        elif result.reason or result.errors or result.unmarked:
            report.status = BAD_INPUT
        for exc in report.failed.values():
            report.status = max(report.status, self._classify(exc))

    def _apply_reload(self) -> None:
        self._reload = False
        try:
            setup = self._load()
        except Exception as exc:
            self._log(f"reload refused, the configuration in use is kept: "
                      f"{_one_line(exc)}")
            return
        if setup.key != self.setup.key:
            try:
                _check_driver(setup)
            except Exception as exc:
                self._log(f"reload refused, the configuration in use is "
                          f"kept: {_one_line(exc)}")
                return
            self.close()
            self._log("reloaded: configuration changed, new driver and "
                      "tracker")
        else:
            self._log("reloaded: configuration unchanged")
        self.setup = setup


def _check_driver(setup: Setup) -> None:
    """Build ``setup``'s driver and read what each node offers, as a cycle
    would, then let it go: a configuration that cannot work on this host
    (``cpu_dedicated_set`` naming CPUs it lacks) fails here, before the
    one in use is given up.

    Raises:
        Exception: whatever the driver raised.
    """
    driver = setup.make_driver()
    try:
        driver.init_host(setup.hostname)
        for nodename in driver.get_available_nodes():
            driver.node_resources(nodename)
    finally:
        try:
            driver.cleanup_host(setup.hostname)
        except Exception as exc:  # the check's answer matters, not this
            LOG.debug("driver cleanup after the reload check: %s", exc)


class _State:
    """The long-lived objects of one :class:`Setup`."""

    def __init__(self, setup: Setup) -> None:
        self.hostname = setup.hostname
        self.driver = setup.make_driver()
        try:
            self.driver.init_host(setup.hostname)
            self.tracker = ResourceTracker(
                self.driver, state_dir=setup.directory,
                driver_name=setup.driver_name,
                provider_config=setup.provider_config)
            self.owned = TrackerOwnership(self.tracker)
            client = setup.connect()
            self.syncer = Syncer(client, setup.directory)
            # A device provider whose device is gone stays while Placement
            # says it is allocated (docs/devices.md).
            use = getattr(self.driver, "use_device_usage", None)
            if use is not None:
                use(provider_usage(client))
            # A driver's reshape reads the allocations from Placement.
            self.tracker.allocations = PlacementAllocations(
                lambda: self.syncer.client)
            self.tracker.known_roots = known_roots(setup.directory)
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        try:
            self.driver.cleanup_host(self.hostname)
        except Exception as exc:  # closing must not hide why we close
            LOG.debug("driver cleanup: %s", exc)


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__
