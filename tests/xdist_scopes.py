"""How the suite is spread over pytest-xdist workers (``./run test`` runs
one more than there are cores).

Every test module is one unit of work, so a module's module-scoped
fixtures are set up once, not once per worker.  Modules that share an
expensive per-process fixture are one unit between them: all of
``tests/real`` that opens ``qemu:///embed`` (QEMU's capability probe costs
~8 s of CPU on a fresh clone, once per embed root) and everything that
starts the throw-away PostgreSQL cluster.

Units go out longest first (:data:`SECONDS`), so what is left for the end
is short and the workers finish together: xdist's own order (most tests
first) left the one-test agreement proof, 11 s, for last on one worker
while the others sat idle.
"""

from __future__ import annotations

from collections.abc import Iterable

#: Modules that start the session's PostgreSQL cluster.
POSTGRES_MODULES = ("tests/real/test_placement_postgres.py",
                    "tests/real/test_postgres_cluster.py")
#: Where the embed fixtures (``embed_uri``, ``reading``) are defined: only
#: tests below it can use them.
EMBED_DIRECTORY = "tests/real/"
#: Fixture → the unit a test that uses it must belong to.
FIXTURE_UNITS = {"embed_uri": "embed", "reading": "embed",
                 "postgres_cluster": "postgres"}

#: What the longest units take, in seconds of one process on an idle
#: 2-core machine (``./run test -p no:xdist --junitxml``, summed per unit;
#: "embed" on a fresh clone, its QEMU probe included).  Only the order
#: matters: refresh it when ``.ci/run``'s slowest tests change.
SECONDS = {
    "postgres": 23,
    "embed": 32,
    "tests/functional/test_docs_commands.py": 23,
    "tests/functional/placement/test_placement_cli.py": 15,
    "tests/functional/placement/test_placement_faults.py": 13,
    "tests/functional/placement/test_placement_devices.py": 12,
    "tests/functional/placement/test_placement_agreement.py": 15,
    "tests/functional/placement/test_placement_ironic.py": 11,
    "tests/functional/placement/test_placement_rebuild.py": 8,
    "tests/functional/placement/test_placement_conflicts.py": 6,
    "tests/functional/test_cli_progress.py": 6,
    "tests/functional/placement/test_placement_serve_owner.py": 6,
    "tests/unit/test_claims_properties.py": 5,
    "tests/functional/placement/test_agent.py": 5,
    "tests/functional/placement/test_placement_reshape.py": 5,
    "tests/functional/placement/test_placement_bounded.py": 5,
    "tests/functional/test_report_warm_imports.py": 5,
    "tests/functional/placement/test_placement_sync.py": 4,
    "tests/unit/test_capabilities_properties.py": 4,
    "tests/functional/placement/test_placement_state.py": 4,
    "tests/functional/test_cli_conventions.py": 4,
    "tests/functional/placement/test_placement_serve.py": 3,
    "tests/functional/test_out_of_tree_driver.py": 3,
    "tests/functional/placement/test_rebuild_disk_format.py": 3,
    "tests/functional/placement/test_marking_aggregate_cli.py": 6,
    "tests/functional/test_nova_contract.py": 4,
    "tests/functional/placement/test_device_claims.py": 4,
}
#: A unit not in :data:`SECONDS`: this much per test (the mean of the rest).
SECONDS_PER_TEST = 0.08


def unit_of(nodeid: str) -> str:
    """The unit of work a test belongs to: a group name or its module."""
    module = nodeid.split("::", 1)[0]
    if module in POSTGRES_MODULES:
        return "postgres"
    if module.startswith(EMBED_DIRECTORY):
        return "embed"
    return module


def expected_seconds(unit: str, tests: int) -> float:
    """How long ``unit``, of ``tests`` tests, is expected to take."""
    return SECONDS.get(unit, tests * SECONDS_PER_TEST)


def longest_first(units: Iterable[tuple[str, int]]) -> list[str]:
    """Unit names, longest expected first (ties: in the given order)."""
    units = list(units)
    return [unit for unit, _ in sorted(
        units, key=lambda item: -expected_seconds(*item))]


def misplaced(nodeid: str, fixturenames) -> str | None:
    """Why a test cannot run where :func:`unit_of` puts it, or None: a test
    that uses a grouped fixture outside its group would pay that fixture's
    cost again on another worker."""
    for fixture, unit in FIXTURE_UNITS.items():
        if fixture in fixturenames and unit_of(nodeid) != unit:
            return (f"{nodeid} uses the {fixture!r} fixture but runs outside "
                    f"the {unit!r} unit; add its module to "
                    f"tests/xdist_scopes.py ({unit})")
    return None


def make_scheduler(config, log):
    """A LoadScope scheduler over :func:`unit_of`'s units, longest first."""
    from xdist.scheduler import LoadScopeScheduling

    class UnitScheduling(LoadScopeScheduling):
        ordered = False

        def _split_scope(self, nodeid: str) -> str:
            return unit_of(nodeid)

        def _assign_work_unit(self, node) -> None:
            if not self.ordered:
                # The queue is complete by the first assignment.
                self.ordered = True
                for unit in longest_first(
                        (unit, len(tests))
                        for unit, tests in self.workqueue.items()):
                    self.workqueue.move_to_end(unit)
            super()._assign_work_unit(node)

    return UnitScheduling(config, log)
