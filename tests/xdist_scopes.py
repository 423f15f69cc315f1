"""How the suite is spread over pytest-xdist workers (``./run test`` runs
two, one per core).

Every test module is one unit of work, so a module's module-scoped
fixtures are set up once, not once per worker.  Modules that share an
expensive per-process fixture are one unit between them: all of
``tests/real`` that opens ``qemu:///embed`` (QEMU's capability probe costs
~8 s of CPU on a fresh clone, once per embed root) and everything that
starts the throw-away PostgreSQL cluster.  Those units go out first, the
rest largest first, so the long ones never start last.
"""

from __future__ import annotations

#: Modules that start the session's PostgreSQL cluster.
POSTGRES_MODULES = ("tests/real/test_placement_postgres.py",
                    "tests/real/test_postgres_cluster.py")
#: Where the embed fixtures (``embed_uri``, ``reading``) are defined: only
#: tests below it can use them.
EMBED_DIRECTORY = "tests/real/"
#: Fixture → the unit a test that uses it must belong to.
FIXTURE_UNITS = {"embed_uri": "embed", "reading": "embed",
                 "postgres_cluster": "postgres"}
GROUPS = ("postgres", "embed")


def unit_of(nodeid: str) -> str:
    """The unit of work a test belongs to: a group name or its module."""
    module = nodeid.split("::", 1)[0]
    if module in POSTGRES_MODULES:
        return "postgres"
    if module.startswith(EMBED_DIRECTORY):
        return "embed"
    return module


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
    """A LoadScope scheduler over :func:`unit_of`'s units."""
    from xdist.scheduler import LoadScopeScheduling

    class UnitScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return unit_of(nodeid)

        def _assign_work_unit(self, node) -> None:
            # The grouped units first: they are the longest.
            for group in GROUPS:
                if group in self.workqueue:
                    self.workqueue.move_to_end(group, last=False)
                    break
            super()._assign_work_unit(node)

    return UnitScheduling(config, log)

