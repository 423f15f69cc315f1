"""Run Nova's own fake drivers under virtdriver's tracker, against a real
Placement.

One command (from the checkout)::

    python3 tests/nova_compat/run_nova_drivers.py [--venv DIR]

The Nova venv is the one ``run_nova_tests.py`` makes (``nova==34.0.0``,
made on first use, a few minutes; default ``.venv-nova``).  Placement is
the real ``openstack-placement`` service on loopback, run by the
checkout's ``.venv`` (``./run setup``) on SQLite in a temporary
directory.  Then, inside the Nova venv, with this checkout first on
``PYTHONPATH``, three drivers are registered under the
``virtdriver.drivers`` entry point through the thin
:class:`virtdriver.drivers.nova_wrapper.NovaDriver` (``nova_entry.py``)
and run by virtdriver's own code paths:

* ``nova-fake`` — ``nova.virt.fake.FakeDriver``: ``virtdriver sync``
  twice (the second changes nothing);
* ``nova-nested`` — ``MediumFakeDriverWithNestedCustomResources``: its
  child provider with ``CUSTOM_MAGIC`` inventory and the ``OWNER_NOVA``
  trait, ``virtdriver sync`` twice;
* ``nova-reshape`` — ``nova_reshape_driver.ReshapingFakeDriver``, which
  raises Nova's ``ReshapeNeeded``: the agent's cycle (``virtdriver.agent.
  Agent``) flat, an instance's allocation on the root, then nested: the
  allocation moves with the inventory in one ``POST /reshaper``.

Each driver's ``update_provider_tree`` is Nova's code, unchanged.  Prints
one line per check and exits 0 when all pass, 1 when one fails, 3 when
the venv or Placement cannot be had.  Not part of the default suite
(Nova is large); ``docs/driver-authors.md`` says how it runs.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import subprocess
import sys
import tempfile
import uuid as uuidlib

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from run_nova_tests import CHECKOUT, _make_venv  # noqa: E402

_INSIDE = "--inside-nova-venv"
DRIVERS = {
    "nova-fake": "nova_entry:NovaFake",
    "nova-nested": "nova_entry:NovaNestedFake",
    "nova-reshape": "nova_entry:NovaReshapingFake",
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--venv", default=str(CHECKOUT / ".venv-nova"),
                        help="the Nova venv (made on first use)")
    parser.add_argument(_INSIDE, dest="inside", metavar="URL",
                        help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.inside:
        return Checks(args.inside).run()
    env_dir = pathlib.Path(args.venv).resolve()
    python = env_dir / "bin" / "python"
    if not (env_dir / ".virtdriver-nova-ready").exists():
        try:
            _make_venv(env_dir, python)
        except subprocess.CalledProcessError as exc:
            print(f"making the Nova venv {env_dir} failed (exit "
                  f"{exc.returncode}); check the package index",
                  file=sys.stderr)
            return 3
    with tempfile.TemporaryDirectory(prefix="nova-drivers-") as scratch:
        placement = _start_placement(pathlib.Path(scratch))
        if placement is None:
            return 3
        process, url = placement
        try:
            env = dict(os.environ, PYTHONPATH=os.pathsep.join(
                [str(CHECKOUT), str(HERE)]),
                VIRTDRIVER_STATE_DIR=str(pathlib.Path(scratch) / "state"),
                VIRTDRIVER_CONFIG_DIRS="")
            return subprocess.call(
                [str(python), str(pathlib.Path(__file__).resolve()),
                 _INSIDE, url], cwd=scratch, env=env)
        finally:
            process.terminate()
            process.wait(timeout=30)


def _start_placement(scratch: pathlib.Path):
    """The real Placement, served by the checkout's venv; (process, URL)
    or ``None`` (said why)."""
    python = CHECKOUT / ".venv" / "bin" / "python"
    if not python.exists():
        print(f"no {python}: run ./run setup first (it installs "
              "openstack-placement)", file=sys.stderr)
        return None
    process = subprocess.Popen(
        [str(python), "-m", "virtdriver.placement.loopback",
         "--db", str(scratch / "placement.sqlite")],
        stdout=subprocess.PIPE, stderr=open(scratch / "placement.log", "wb"),
        cwd=CHECKOUT)
    line = process.stdout.readline().decode("ascii", "replace").strip()
    if not line.startswith("listening "):
        print(f"Placement did not start ({line!r}); see "
              f"{scratch / 'placement.log'}", file=sys.stderr)
        process.kill()
        return None
    return process, f"http://{line.split(' ', 1)[1]}"


class Checks:
    """Inside the Nova venv: register the drivers, run them, check."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.failed = 0

    def check(self, what: str, ok: bool, detail: object = "") -> None:
        print(f"{'ok  ' if ok else 'FAIL'} {what}"
              + (f": {detail}" if detail != "" and not ok else ""))
        self.failed += not ok

    def run(self) -> int:
        import nova.conf  # noqa: F401  (Nova's options, at their defaults)
        import nova.version

        _register(pathlib.Path.cwd() / "dist")
        from virtdriver import cli
        from virtdriver.placement.client import PlacementClient

        self.client = PlacementClient.from_url(self.url)
        print(f"Nova {nova.version.version_string()}, Placement at "
              f"{self.url}")
        with open(os.devnull, "w") as stream:
            saved, sys.stdout = sys.stdout, stream
            try:
                status = cli.main(["drivers", "--format", "json"])
            finally:
                sys.stdout = saved
        self.check("virtdriver drivers lists them, exit 0", status == 0)
        self.sync_twice("nova-fake", "fake-host-1", self.fake_checks)
        self.sync_twice("nova-nested", "fake-host-2", self.nested_checks)
        self.reshape()
        print("\nall checks passed" if not self.failed
              else f"\n{self.failed} check(s) failed")
        return 1 if self.failed else 0

    # -- the drivers -------------------------------------------------------

    def sync_twice(self, driver: str, host: str, checks) -> None:
        from virtdriver import cli

        conf = pathlib.Path.cwd() / f"{driver}.conf"
        conf.write_text(f"[DEFAULT]\nhost = {host}\n")
        runs = []
        for _ in range(2):
            out = pathlib.Path.cwd() / f"{driver}.json"
            with open(out, "w") as stream:
                saved, sys.stdout = sys.stdout, stream
                try:
                    status = cli.main(["sync", "--driver", driver,
                                       "--placement-url", self.url,
                                       "--config-file", str(conf),
                                       "--format", "json"])
                finally:
                    sys.stdout = saved
            runs.append((status, json.loads(out.read_text() or "{}")))
        self.check(f"{driver}: virtdriver sync exits 0, twice",
                   [s for s, _ in runs] == [0, 0], [s for s, _ in runs])
        second = runs[1][1].get("sync", {})
        self.check(f"{driver}: the second sync writes nothing",
                   second.get("requests", {}).get("writes") == 0,
                   second.get("summary"))
        checks(host, runs[0][1])

    def fake_checks(self, host: str, document: dict) -> None:
        root = self._provider(host)
        inventory = self._get(f"/resource_providers/{root}/inventories")
        totals = {rc: inv["total"]
                  for rc, inv in inventory["inventories"].items()}
        self.check("nova-fake: Placement holds FakeDriver's inventory "
                   "(VCPU 1000, MEMORY_MB 800000, DISK_GB 600000)",
                   totals == {"VCPU": 1000, "MEMORY_MB": 800000,
                              "DISK_GB": 600000}, totals)
        traits = self._traits(root)
        self.check("nova-fake: the root has COMPUTE_NODE",
                   "COMPUTE_NODE" in traits, traits)

    def nested_checks(self, host: str, document: dict) -> None:
        child = self._provider(host + "-child")
        inventory = self._get(f"/resource_providers/{child}/inventories")
        self.check("nova-nested: child provider with CUSTOM_MAGIC 10",
                   inventory["inventories"].get("CUSTOM_MAGIC", {})
                   .get("total") == 10, inventory)
        traits = self._traits(child)
        self.check("nova-nested: the child has OWNER_NOVA (add_traits)",
                   "OWNER_NOVA" in traits, traits)
        parent = self._get(f"/resource_providers/{child}")
        self.check("nova-nested: the child's parent is the node's root",
                   parent["parent_provider_uuid"] == self._provider(host))

    def reshape(self) -> None:
        from nova_reshape_driver import ReshapingFakeDriver

        from virtdriver.agent import Agent, Setup
        from virtdriver.drivers.loader import load_driver
        from virtdriver.placement.client import PlacementClient

        sent: list[tuple[str, str]] = []

        def connect():
            client = PlacementClient.from_url(self.url)
            request = client.request

            def recorded(method, path, **kwargs):
                sent.append((method, path))
                return request(method, path, **kwargs)

            client.request = recorded
            return client

        host = "fake-host-3"
        state = pathlib.Path(os.environ["VIRTDRIVER_STATE_DIR"]) / "agent"
        lines: list[str] = []
        agent = Agent(lambda: Setup(
            key=1, directory=state, driver_name="nova-reshape",
            make_driver=lambda: load_driver("nova-reshape"), hostname=host,
            provider_config=None, target=self.url, connect=connect),
            interval=60, log=lines.append, classify=lambda exc: 2)
        first = agent.cycle()
        self.check("nova-reshape: first agent cycle (flat) ok",
                   first.status == 0, lines[-1])
        root = self._provider(host)
        consumer = str(uuidlib.uuid4())
        self.client.request("PUT", f"/allocations/{consumer}", body={
            "allocations": {root: {"resources": {"VCPU": 2,
                                                 "MEMORY_MB": 512}}},
            "project_id": consumer, "user_id": consumer,
            "consumer_generation": None, "consumer_type": "INSTANCE"})
        ReshapingFakeDriver.nested = True
        sent.clear()
        second = agent.cycle()
        self.check("nova-reshape: the reshaping cycle ok", second.status == 0,
                   lines[-1])
        child = self._provider(host + "-numa0")
        found = {rp: entry["resources"] for rp, entry in self._get(
            f"/allocations/{consumer}")["allocations"].items()}
        self.check("nova-reshape: VCPU moved to the child with its "
                   "allocation, MEMORY_MB stayed on the root",
                   found == {child: {"VCPU": 2}, root: {"MEMORY_MB": 512}},
                   found)
        self.check("nova-reshape: in one POST /reshaper",
                   sent.count(("POST", "/reshaper")) == 1, sent)
        print(f"     reshaping cycle: {len(sent)} requests")
        third = agent.cycle()
        self.check("nova-reshape: the next cycle changes nothing",
                   third.status == 0 and "no changes" in lines[-1],
                   lines[-1])
        agent.close()

    # -- Placement ---------------------------------------------------------

    def _get(self, path: str):
        return self.client.request("GET", path)

    def _provider(self, name: str) -> str:
        found = self.client.request(
            "GET", "/resource_providers", params={"name": name})
        providers = found["resource_providers"]
        return providers[0]["uuid"] if providers else "missing"

    def _traits(self, uuid: str) -> set[str]:
        return set(self._get(f"/resource_providers/{uuid}/traits")["traits"])


def _register(target: pathlib.Path) -> None:
    """The dist-info an installer would write for the drivers, on
    ``sys.path`` (nothing is installed anywhere)."""
    dist = target / "virtdriver_nova_fakes-0.1.dist-info"
    dist.mkdir(parents=True, exist_ok=True)
    (dist / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: virtdriver-nova-fakes\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text(
        "[virtdriver.drivers]\n" + "".join(
            f"{name} = {target}\n" for name, target in DRIVERS.items()))
    sys.path.insert(0, str(target))


if __name__ == "__main__":
    sys.exit(main())
