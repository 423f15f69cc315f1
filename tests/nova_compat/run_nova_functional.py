"""Run Nova's own functional tests with virtdriver's resource reporting,
and the same tests with Nova's own (the control).

One command (from the checkout; ``./run nova-check`` runs it)::

    python3 tests/nova_compat/run_nova_functional.py [--smoke] [--mode M]
        [--venv DIR] [--results DIR] [TEST_ID ...]

The Nova venv is the one ``run_nova_tests.py`` makes (``nova==34.0.0``,
default ``.venv-nova``), extended on first use (:func:`extend_venv`)
with what Nova's functional tests need: ``openstack-placement==16.0.0``
(Nova's Placement fixture), Nova's test requirements, ``SQLAlchemy<2.1``
(2.1's deprecation warnings are errors under Nova's fixtures),
``libvirt-python`` (virtdriver's libvirt driver imports it) and Nova's
``etc/nova`` from its sdist (its API fixture reads ``api-paste.ini`` from
there; the wheel lacks it).  Then the adapter distribution
(``nova-adapter/``) is installed, and each mode runs in one process
under :mod:`unittest` with ``OS_TEST_TIMEOUT`` set:

* ``control`` — Nova's tests as they are (``libvirt.LibvirtDriver``);
* ``virtdriver`` — the same tests; Nova's ``load_compute_driver`` is
  asked for ``virtdriver.LibvirtDriver`` wherever a test asks for
  ``libvirt.LibvirtDriver``, and loads it the way ``nova-compute`` does
  (``nova.virt.virtdriver``, the adapter's shim).

Prints per module the tests passed in each mode, every test that passes
in the control and not with virtdriver (with the first line of its
error), and whether each such test is a documented exclusion
(:data:`EXCLUSIONS`, with its cause; docs/nova.md has the evidence).
Exit 0 when every control pass passes with virtdriver or is excluded,
1 otherwise, 3 when the venv cannot be made.  ``--smoke`` runs
:data:`SMOKE` only (the CI subset).  Not part of ``./run test``.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from run_nova_tests import CHECKOUT, NOVA, _make_venv  # noqa: E402

ADAPTER = CHECKOUT / "nova-adapter"
#: Beyond ``run_nova_tests.TEST_LIBRARIES``: Nova's functional tests.
FUNCTIONAL_LIBRARIES = (
    "openstack-placement==16.0.0", "SQLAlchemy<2.1", "osprofiler",
    "psycopg2-binary", "PyMySQL", "python-barbicanclient", "testscenarios",
    "testresources", "stestr", "libvirt-python>=9.0.0,<13", "wheel")
FUNCTIONAL_STAMP = ".virtdriver-nova-functional-ready"
#: The modules (or classes) run by default.
MODULES = (
    "nova.tests.functional.libvirt.test_numa_servers.NUMAServersTest",
    "nova.tests.functional.libvirt.test_numa_servers"
    ".NUMAServersRebuildTests",
    "nova.tests.functional.libvirt.test_numa_servers.ReshapeForPCPUsTest",
    "nova.tests.functional.libvirt.test_numa_servers"
    ".NUMAServersWithNetworksTest",
    "nova.tests.functional.libvirt.test_numa_live_migration",
    "nova.tests.functional.libvirt.test_rt_servers",
    "nova.tests.functional.libvirt.test_report_cpu_traits"
    ".LibvirtReportTraitsTests",
    # Beyond the list: modules that pass with Nova's reporting
    # and schedule on ours (firmware, machine types, CPU power, moves).
    "nova.tests.functional.libvirt.test_uefi",
    "nova.tests.functional.libvirt.test_machine_type",
    "nova.tests.functional.libvirt.test_power_manage",
    "nova.tests.functional.libvirt.test_evacuate",
    "nova.tests.functional.libvirt.test_live_migration",
    "nova_adapter_tests.AdapterReportingTests",
)
#: The CI subset: a NUMA guest, a pinned guest, the VCPU to PCPU
#: reshape, the tracker's and an operator's traits.
SMOKE = (
    "nova.tests.functional.libvirt.test_numa_servers.NUMAServersTest"
    ".test_create_server_with_numa_topology",
    "nova.tests.functional.libvirt.test_numa_servers.NUMAServersTest"
    ".test_create_server_with_dedicated_policy",
    "nova.tests.functional.libvirt.test_numa_servers.ReshapeForPCPUsTest"
    ".test_vcpu_to_pcpu_reshape",
    "nova_adapter_tests.AdapterReportingTests"
    ".test_tracker_traits_and_operator_traits_survive",
)
#: Tests that pass in the control and are expected to fail with
#: virtdriver: test id -> cause (evidence in docs/nova.md).
_LIBVIRT = "nova.tests.functional.libvirt."
EXCLUSIONS: dict[str, str] = {
    _LIBVIRT + "test_report_cpu_traits.LibvirtReportTraitsTests"
    ".test_report_cpu_traits":
        "Nova's fake libvirt answers baselineCPU with a canned Intel CPU "
        "(vmx) whatever the host; virtdriver reads the fake host's own "
        "CPU (host-model: AMD, svm), so HW_CPU_X86_VMX is not reported",
    _LIBVIRT + "test_numa_live_migration.NUMALiveMigrationNegativeTests"
    ".test_different_page_sizes":
        "Nova's fake libvirt reports getInfo memory 1024x too large "
        "(kB_mem as MiB); virtdriver reads the NUMA cell's 1000 MiB, "
        "which less the 512 MiB reserved cannot hold the 512 MiB flavor",
    _LIBVIRT + "test_numa_servers.NUMAServersTest"
    ".test_resize_dedicated_policy_race_on_dest_bug_1953359":
        "Nova's tests mock 16 online CPUs whatever the fake host has; "
        "cpu_dedicated_set = 0-2 names CPU 2 of a 2-CPU host, which "
        "virtdriver refuses (getCPUMap: CPUs 0-1)",
}
#: Tests whose outcome changes from run to run in the control itself
#: (Nova's tests, Nova's reporting): reported, not compared.
NOVA_FLAKY: dict[str, str] = {
    _LIBVIRT + "test_numa_servers.NUMAServersWithNetworksTest"
    ".test_cold_migrate_with_physnet":
        "fails or passes in the control from run to run (its mocked "
        "filter sees no physnet when run alone); not about reporting",
}
TIMEOUT = "300"
#: Seconds without a test ending after which a run is killed.
STALL = int(TIMEOUT) + 120
_INSIDE = "--inside-nova-venv"


def main(argv: list[str] | None = None) -> int:
    """Make the venv if needed, run each mode, compare."""
    args = _parser().parse_args(argv)
    if args.inside:
        return _inside(args.inside, args.tests, pathlib.Path(args.results))
    env_dir = pathlib.Path(args.venv).resolve()
    python = env_dir / "bin" / "python"
    try:
        extend_venv(env_dir, python)
    except subprocess.CalledProcessError as exc:
        print(f"virtdriver: making the Nova venv {env_dir} failed (exit "
              f"{exc.returncode}: {' '.join(map(str, exc.cmd[:6]))}...)",
              file=sys.stderr)
        print(f"check that the package index is reachable, or delete "
              f"{env_dir} and run this again", file=sys.stderr)
        return 3
    tests = args.tests or list(SMOKE if args.smoke else MODULES)
    results = pathlib.Path(args.results or tempfile.mkdtemp(
        prefix="nova-check-"))
    results.mkdir(parents=True, exist_ok=True)
    modes = ("control", "virtdriver") if args.mode == "both" else (
        args.mode,)
    outcome = {}
    for mode in modes:
        started = time.monotonic()
        outcome[mode] = _run_mode(python, mode, tests, results)
        seconds = time.monotonic() - started
        if outcome[mode] is None:
            print(f"virtdriver: the {mode} run loaded no tests; see "
                  f"{results / (mode + '.log')}", file=sys.stderr)
            return 1
        (results / f"{mode}.json").write_text(json.dumps(outcome[mode],
                                                         indent=1))
        print(f"{mode}: {len(outcome[mode])} tests in {seconds:.0f} s "
              f"(log: {results / (mode + '.log')})", flush=True)
    _timing(results, modes)
    return _compare(outcome)


def _run_mode(python: pathlib.Path, mode: str, tests: list[str],
              results: pathlib.Path) -> dict[str, dict] | None:
    """Run ``tests`` in one process; if no test ends for :data:`STALL`
    seconds (Nova's ``OS_TEST_TIMEOUT`` cannot interrupt a greenthread
    that waits forever), kill it, record the running test as ``hung``
    and run the rest in a new process.  Test id -> result, or ``None``
    when the tests could not be loaded."""
    for name in ("jsonl", "plan", "current", "timing"):
        (results / f"{mode}.{name}").unlink(missing_ok=True)
    progress = results / f"{mode}.jsonl"
    pending = list(tests)
    with open(results / f"{mode}.log", "wb") as log:
        while pending:
            process = subprocess.Popen(
                ["nice", "-n", "10", str(python),
                 str(pathlib.Path(__file__)), _INSIDE, mode, "--results",
                 str(results), *pending],
                cwd=results, stdout=log, stderr=subprocess.STDOUT,
                env=dict(_environment(), VIRTDRIVER_NOVA_MODE=mode))
            _watch(process, progress)
            plan = results / f"{mode}.plan"
            if not plan.exists():
                return None
            outcome = _read_lines(progress)
            current = results / f"{mode}.current"
            hung = current.read_text() if current.exists() else ""
            if process.returncode and hung and hung not in outcome:
                with open(progress, "a") as lines:
                    lines.write(json.dumps({"id": hung, "status": "hung",
                                            "error": f"no test ended for "
                                            f"{STALL} s; killed"}) + "\n")
                outcome = _read_lines(progress)
            left = [t for t in plan.read_text().split() if t not in outcome]
            if left and (left == pending or not process.returncode):
                for test in left:  # the process died before them
                    outcome[test] = {"status": "error", "error": "not run"}
                return outcome
            pending = left
    return _read_lines(progress)


def _watch(process: subprocess.Popen, progress: pathlib.Path) -> None:
    seen, last = -1, time.monotonic()
    while process.poll() is None:
        time.sleep(2)
        size = progress.stat().st_size if progress.exists() else 0
        if size != seen:
            seen, last = size, time.monotonic()
        elif time.monotonic() - last > STALL:
            process.kill()
            process.wait()


def _read_lines(path: pathlib.Path) -> dict[str, dict]:
    if not path.exists():
        return {}
    entries = (json.loads(line) for line in path.read_text().splitlines())
    return {entry.pop("id"): entry for entry in entries}


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--venv", default=str(CHECKOUT / ".venv-nova"),
                        help="the Nova venv (made on first use)")
    parser.add_argument("--smoke", action="store_true",
                        help="the CI subset only")
    parser.add_argument("--mode", default="both",
                        choices=("both", "control", "virtdriver"))
    parser.add_argument("--results", help="where each mode's JSON goes "
                        "(default: a new temporary directory)")
    parser.add_argument(_INSIDE, dest="inside", help=argparse.SUPPRESS)
    parser.add_argument("tests", nargs="*", help="test ids (modules, "
                        "classes or tests; default: the issue's list)")
    return parser


def _environment() -> dict[str, str]:
    env = dict(os.environ, OS_TEST_TIMEOUT=TIMEOUT,
               PYTHONPATH=os.pathsep.join([str(CHECKOUT), str(ADAPTER),
                                           str(HERE)]),
               PYTHONDONTWRITEBYTECODE="1")
    env.pop("VIRTDRIVER_STATE_DIR", None)
    return env


def extend_venv(env_dir: pathlib.Path, python: pathlib.Path) -> None:
    """``run_nova_tests``'s venv, plus what Nova's functional tests need
    (module doc), once; the adapter is (re)installed on every run."""
    if not (env_dir / ".virtdriver-nova-ready").exists():
        _make_venv(env_dir, python)
    pip = [str(python), "-m", "pip", "install", "--quiet"]
    if not (env_dir / FUNCTIONAL_STAMP).exists():
        print(f"adding Nova's functional-test requirements to {env_dir} "
              "(a few minutes, once)", file=sys.stderr)
        subprocess.run([*pip, *FUNCTIONAL_LIBRARIES], check=True)
        _install_etc_nova(python)
        (env_dir / FUNCTIONAL_STAMP).write_text(NOVA + "\n")
    subprocess.run([*pip, "--no-deps", "--no-build-isolation",
                    "--force-reinstall", str(ADAPTER)], check=True,
                   cwd=tempfile.gettempdir())
    shutil.rmtree(ADAPTER / "build", ignore_errors=True)
    # The adapter adds one module under Nova's package and must never
    # replace one of Nova's files.
    files = subprocess.check_output(
        [str(python), "-c", "from importlib.metadata import files; "
         "print('\\n'.join(str(f) for f in files('virtdriver-nova')))"],
        text=True).split()
    foreign = [f for f in files if f.startswith("nova/")
               and not f.startswith("nova/virt/virtdriver/")]
    if foreign or "nova/virt/virtdriver/__init__.py" not in files:
        raise SystemExit(f"virtdriver: the adapter distribution installs "
                         f"{foreign or 'no nova/virt/virtdriver'}; fix "
                         f"nova-adapter/pyproject.toml")


def _install_etc_nova(python: pathlib.Path) -> None:
    """Nova's ``etc/nova`` from its sdist, where ``$pybasedir`` (Nova's
    default ``state_path``) points: the venv's site-packages."""
    site = pathlib.Path(subprocess.check_output(
        [str(python), "-c", "import nova, os; print(os.path.dirname("
         "os.path.dirname(nova.__file__)))"], text=True).strip())
    with tempfile.TemporaryDirectory(prefix="nova-sdist-") as scratch:
        subprocess.run([str(python), "-m", "pip", "download", "--quiet",
                        "--no-deps", "--no-binary", ":all:", NOVA, "-d",
                        scratch], check=True)
        (sdist,) = pathlib.Path(scratch).glob("nova-*.tar.gz")
        with tarfile.open(sdist) as tar:
            prefix = tar.getnames()[0].split("/")[0] + "/etc/nova/"
            members = [m for m in tar.getmembers()
                       if m.name.startswith(prefix) and m.isfile()]
            for member in members:
                member.name = "etc/nova/" + member.name[len(prefix):]
            tar.extractall(site, members=members, filter="data")


def _compare(outcome: dict) -> int:
    modes = list(outcome)
    print()
    modules = sorted({_module(t) for mode in modes for t in outcome[mode]})
    for module in modules:
        line = [f"{module}:"]
        for mode in modes:
            tests = {t: r for t, r in outcome[mode].items()
                     if _module(t) == module}
            passed = sum(r["status"] == "pass" for r in tests.values())
            line.append(f"{mode} {passed}/{len(tests)}")
        print("  " + "  ".join(line))
    if modes != ["control", "virtdriver"]:
        return 0
    control, ours = outcome["control"], outcome["virtdriver"]
    for test, cause in NOVA_FLAKY.items():
        if test in control:
            print(f"  flaky in Nova, not compared: {test} (control "
                  f"{control[test]['status']}, virtdriver "
                  f"{ours.get(test, {}).get('status')}): {cause}")
    lost = sorted(t for t, r in control.items() if r["status"] == "pass"
                  and ours.get(t, {}).get("status") != "pass"
                  and t not in NOVA_FLAKY)
    unexplained = [t for t in lost if t not in EXCLUSIONS]
    for test in lost:
        cause = EXCLUSIONS.get(test, "NOT EXCLUDED")
        print(f"  lost: {test}\n        {cause}\n        "
              f"{ours.get(test, {}).get('error', 'not run')}")
    total = sum(r["status"] == "pass" for t, r in control.items()
                if t not in NOVA_FLAKY)
    print(f"\nvirtdriver passes {total - len(lost)} of the control's "
          f"{total} passes; {len(lost) - len(unexplained)} excluded, "
          f"{len(unexplained)} unexplained")
    return 1 if unexplained else 0


def _module(test_id: str) -> str:
    parts = test_id.split(".")
    return ".".join(parts[-3:-1])


def _inside(mode: str, tests: list[str], results: pathlib.Path) -> int:
    """In the Nova venv: run ``tests`` in this process; each result is a
    line of ``<mode>.jsonl`` as soon as it is known."""
    import unittest

    if mode == "virtdriver":
        _load_virtdriver()
    _time_update_provider_tree(mode, results / f"{mode}.timing")
    suite = unittest.TestSuite(
        unittest.defaultTestLoader.loadTestsFromName(name) for name in tests)
    plan = results / f"{mode}.plan"
    if not plan.exists():
        plan.write_text("".join(f"{t.id()}\n" for t in _flat(suite)))
    result = _Recorder(unittest.runner._WritelnDecorator(sys.stdout), True,
                       1)
    result.progress = results / f"{mode}.jsonl"
    result.current = results / f"{mode}.current"
    suite.run(result)
    result.printErrors()
    return 0


def _flat(suite):
    for test in suite:
        if hasattr(test, "__iter__"):
            yield from _flat(test)
        else:
            yield test


def _load_virtdriver() -> None:
    """Nova's ``load_compute_driver``, asked for the adapter where a test
    asks for Nova's libvirt driver."""
    from nova.virt import driver

    nova_load = driver.load_compute_driver

    def load_compute_driver(virtapi, compute_driver=None):
        from nova.conf import CONF
        name = compute_driver or CONF.compute_driver
        if name == "libvirt.LibvirtDriver":
            name = "virtdriver.LibvirtDriver"
        return nova_load(virtapi, name)

    driver.load_compute_driver = load_compute_driver


def _time_update_provider_tree(mode: str, path: pathlib.Path) -> None:
    """Record how long each ``update_provider_tree`` call takes (the
    driver's own, inside Nova's periodic), a line of ``path`` each:
    seconds, the first call per driver and node apart from the later
    ones."""
    if mode == "virtdriver":
        from virtdriver_nova.driver import LibvirtDriver as cls
    else:
        from nova.virt.libvirt.driver import LibvirtDriver as cls
    seen: set[tuple[int, str]] = set()
    timed = cls.update_provider_tree

    def update_provider_tree(self, provider_tree, nodename,
                             allocations=None):
        started = time.perf_counter()
        try:
            return timed(self, provider_tree, nodename, allocations)
        finally:
            key = (id(self), nodename)
            with open(path, "a") as lines:
                lines.write(json.dumps(
                    ["later" if key in seen else "first",
                     time.perf_counter() - started]) + "\n")
            seen.add(key)

    cls.update_provider_tree = update_provider_tree


def _timing(results: pathlib.Path, modes) -> None:
    import statistics

    rows = {}
    for mode in modes:
        path = results / f"{mode}.timing"
        if path.exists():
            rows[mode] = {"first": [], "later": []}
            for line in path.read_text().splitlines():
                kind, seconds = json.loads(line)
                rows[mode][kind].append(seconds)
    if not rows:
        return
    print("\nupdate_provider_tree in Nova's periodic (median ms):")
    for mode, calls in rows.items():
        parts = [f"{kind} {statistics.median(v) * 1000:.2f} "
                 f"({len(v)} calls)" for kind, v in calls.items() if v]
        print(f"  {mode}: " + ", ".join(parts))
    if len(rows) == 2 and all(rows[m]["later"] for m in rows):
        control, ours = (statistics.median(rows[m]["later"])
                         for m in ("control", "virtdriver"))
        print(f"  virtdriver / control (later calls): "
              f"{ours / control:.2f}")


def _status_recorder():
    import unittest

    class Recorder(unittest.TextTestResult):
        """Each test's status and first error line, by id."""

        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            self.outcome: dict[str, dict] = {}

        progress = current = None

        def startTest(self, test):
            self.current.write_text(test.id())
            super().startTest(test)

        def _note(self, test, status, err=None):
            entry = {"status": status}
            if err is not None:
                text = self._exc_info_to_string(err, test).strip()
                entry["error"] = text.splitlines()[-1][:300]
            self.outcome[test.id()] = entry
            with open(self.progress, "a") as lines:
                lines.write(json.dumps({"id": test.id(), **entry}) + "\n")

        def addSuccess(self, test):
            super().addSuccess(test)
            self._note(test, "pass")

        def addFailure(self, test, err):
            super().addFailure(test, err)
            self._note(test, "fail", err)

        def addError(self, test, err):
            super().addError(test, err)
            self._note(test, "error", err)

        def addSkip(self, test, reason):
            super().addSkip(test, reason)
            self._note(test, "skip")

        def addExpectedFailure(self, test, err):
            super().addExpectedFailure(test, err)
            self._note(test, "xfail")

        def addUnexpectedSuccess(self, test):
            super().addUnexpectedSuccess(test)
            self._note(test, "pass")

    return Recorder


class _LazyRecorder:
    def __call__(self, *args):
        return _status_recorder()(*args)


_Recorder = _LazyRecorder()


if __name__ == "__main__":
    sys.exit(main())
