"""Many compute agents and an outside writer against one Placement.

The processes of the many-agent run (``test_placement_postgres.py``, and
``benchmarks/bench_placement_sync.py`` measures it):

* an **agent** is what a bare-metal conductor runs: an
  :class:`~virtdriver.drivers.ironic.IronicDriver` over its own inventory
  file (its shard of nodes) → a :class:`ResourceTracker` with its own
  state directory → :class:`TrackerOwnership` and a :class:`Syncer`
  against the shared Placement URL, for a number of update cycles;
* the **writer** is everybody else (an operator, Nova): it edits the traits
  of random providers through the API — adds foreign ``CUSTOM_`` traits,
  now and then removes a trait the agents own, or adds an owned one their
  driver does not assert — read-modify-write at the provider's
  generation, retrying its own 409s.

Each is a child process (``python placement_agents.py agent|writer
JSON``) printing one JSON line per event.  An agent prints ``cycled``
after its cycles, then waits for a line on stdin (the writer is done)
and runs its ``final`` cycles — which must put every owned trait right —
before its ``report``.  All count every 5xx and unreachable answer they
saw (:class:`CountingClient`).  :class:`Run` starts and drives them.
"""

from __future__ import annotations

import dataclasses
import json
import os
import pathlib
import random
import select
import subprocess
import sys
import time
import uuid as uuidlib
from collections.abc import Iterable

REPO = pathlib.Path(__file__).resolve().parents[2]
if __name__ == "__main__":  # run as a script: the checkout is importable
    sys.path.insert(0, str(REPO))

import os_traits  # noqa: E402

from virtdriver.capabilities.traits.capability_flags import (  # noqa: E402
    CAPABILITY_TRAITS)
from virtdriver.drivers.ironic import IRONIC_CAPABILITIES  # noqa: E402
from virtdriver.placement.client import PlacementClient  # noqa: E402
from virtdriver.placement.errors import (  # noqa: E402
    GenerationConflict, PlacementServerError, PlacementUnreachable,
    ProviderNotFound)
from virtdriver.resource_tracker.node_root import TRACKER_TRAITS  # noqa: E402

#: The agents' owned traits the writer takes away: on every node, and
#: on every third (its inspection data names both).
REMOVABLE = (os_traits.HW_CPU_X86_AVX2, "CUSTOM_RAID5")
#: An owned trait no agent asserts (a capability ironic declares False):
#: one the writer adds must be removed by the node's agent.
UNSUPPORTED = sorted(trait for capability, trait in CAPABILITY_TRAITS.items()
                     if IRONIC_CAPABILITIES.get(capability) is False)[0]
#: The writer's foreign traits: a pool, so each is created once.
FOREIGN = tuple(f"CUSTOM_FOREIGN_{n}" for n in range(16))
#: Attempts of the writer's read-modify-write before it gives up one edit.
WRITER_ATTEMPTS = 10
SCRIPT = pathlib.Path(__file__).resolve()


def node_uuid(agent: int, number: int) -> str:
    return str(uuidlib.uuid5(uuidlib.NAMESPACE_URL,
                             f"virtdriver-agent-{agent}-node-{number}"))


def shard(agent: int, count: int) -> list[dict]:
    """Agent ``agent``'s ``count`` bare-metal nodes: two resource classes,
    every tenth node not usable (its unit reserved), ``CUSTOM_RAID5`` on
    every third."""
    nodes = []
    for number in range(count):
        traits = [os_traits.HW_CPU_X86_AVX2]
        if number % 3 == 0:
            traits.append("CUSTOM_RAID5")
        nodes.append({
            "uuid": node_uuid(agent, number),
            "name": f"a{agent}-rack{number // 40}-u{number % 40:02d}",
            "resource_class": ("baremetal.gold", "baremetal.silver")[
                number % 2],
            "provision_state": "manageable" if number % 10 == 9
            else "available",
            "traits": traits})
    return nodes


def is_trait_race(exc: PlacementServerError) -> bool:
    """Whether a 5xx is Placement's mislabelled generation conflict.

    ``PUT /resource_providers/{uuid}/traits`` compares the generation,
    then bumps it in another statement; a writer committing in between
    makes the bump fail with ``ResourceProviderConcurrentUpdateDetected``,
    which that handler (unlike inventories', aggregates' and the trait
    DELETE's) does not catch: a 500, its transaction rolled back — a 409
    in all but name.  Only concurrent requests in a threaded or
    multi-worker Placement meet it.
    """
    return (exc.method == "PUT" and (exc.path or "").endswith("/traits")
            and "concurrently updated the resource provider" in exc.detail)


class CountingClient(PlacementClient):
    """A client that also counts the 5xx and unreachable answers it got
    (the sync turns them into a pending result; the run must see none).

    Placement's trait race (:func:`is_trait_race`) is retried as the
    generation conflict it is, and counted apart (``trait_races``): what
    ``virtdriver.placement.client`` should do itself (once it does, this
    never sees one).
    """

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.server_errors = self.unreachable = self.trait_races = 0
        self.failures: list[str] = []   # the first few, for messages

    def _send(self, method, path, **kwargs):
        try:
            return super()._send(method, path, **kwargs)
        except PlacementServerError as exc:
            if is_trait_race(exc):
                self.trait_races += 1
                raise GenerationConflict(
                    f"{exc}; (a generation conflict, retried)",
                    method=exc.method, path=exc.path, status=exc.status,
                    code="placement.concurrent_update",
                    detail=exc.detail) from None
            self.server_errors += 1
            self._failed(exc)
            raise
        except PlacementUnreachable as exc:
            self.unreachable += 1
            self._failed(exc)
            raise

    def _failed(self, exc: Exception) -> None:
        if len(self.failures) < 5:
            self.failures.append(str(exc))

    def failure_report(self) -> dict:
        return {"server_errors": self.server_errors,
                "unreachable": self.unreachable,
                "trait_races": self.trait_races,
                "failures": self.failures}


def client_for(url: str) -> CountingClient:
    import requests

    session = requests.Session()
    session.trust_env = False
    return CountingClient.from_url(url, requests_session=session)


def emit(event: str, **fields) -> None:
    print(json.dumps({"event": event, **fields}), flush=True)


# -- the agent ----------------------------------------------------------------


def agent(url: str, inventory: str, state_dir: str, cycles: int,
          final: int) -> None:
    """``cycles`` update-and-sync cycles, ``cycled``, then on a line from
    stdin ``final`` more cycles and the ``report``."""
    from virtdriver.drivers.ironic import IronicDriver
    from virtdriver.placement.ownership import TrackerOwnership
    from virtdriver.placement.sync import Syncer
    from virtdriver.resource_tracker.tracker import ResourceTracker

    driver = IronicDriver(inventory_path=inventory)
    driver.init_host("conductor")
    tracker = ResourceTracker(driver, state_dir=pathlib.Path(state_dir))
    owned = TrackerOwnership(tracker)
    client = client_for(url)
    syncer = Syncer(client, state_dir)
    done = []

    def cycle() -> None:
        started = time.monotonic()
        retried, races = client.retried, client.trait_races
        owned.note(tracker.update_all())
        result = syncer.sync(tracker.tree, owned_for=owned,
                             remove=owned.gone)
        owned.synced(result)
        done.append({
            "ok": result.ok, "pending": result.pending,
            "reason": result.reason, "conflicts": result.conflicts,
            "requests": dict(result.counts.by_method),
            # Transient failures (a worker's 5xx, a reset) the client
            # retried: each one more request of the same method.
            "retried": client.retried - retried,
            # Placement's trait race (a 500) retried as a conflict.
            "trait_races": client.trait_races - races,
            # Writes refused for a CUSTOM_ name Placement had answered as
            # existing (its resource-class creation race on PostgreSQL),
            # retried after creating the names again.
            "names_recreated": result.names_recreated,
            "sync_seconds": result.seconds,
            "seconds": time.monotonic() - started,
            "errors": [o.describe() for o in result.errors][:5],
            "reasserted": sum(len(o.removed_by_others)
                              for o in result.outcomes),
            "removed_unsupported": sum(len(o.added_by_others)
                                       for o in result.outcomes)})

    for _ in range(cycles):
        cycle()
    emit("cycled", cycles=done)
    sys.stdin.readline()
    for _ in range(final):
        cycle()
    nodes = {}
    for provider in tracker.tree.providers():
        ownership = driver.ownership_for(provider.name)
        nodes[provider.uuid] = {
            "name": provider.name, "parent": provider.parent_uuid,
            "inventories": {rc: rec.as_dict()
                            for rc, rec in provider.inventory.items()},
            "traits": sorted(provider.traits),
            # The tracker's own on roots (COMPUTE_NODE), besides the
            # driver's.
            "owned": sorted(ownership.static | (
                TRACKER_TRAITS if provider.parent_uuid is None
                else frozenset())),
            "owned_prefixes": list(ownership.prefixes)}
    emit("report", cycles=done, nodes=nodes, **client.failure_report())


# -- the writer -------------------------------------------------------------


def writer(url: str, edits: int, seed: int, order: str,
           wait: float) -> None:
    """``edits`` trait edits, then the ``report``.

    ``order`` is a JSON file of each agent's node uuids in the order it
    creates them.  Every fourth edit, while some are not created yet,
    *races*: it waits for one just ahead of its agent's progress to
    appear and edits it at once, before the agent's inventory or trait
    ``PUT`` (so the agent's write meets a generation conflict); the
    others edit a random existing provider.  Waiting (for the first
    provider, and in races) is bounded by ``wait`` seconds in all.
    """
    client = client_for(url)
    rng = random.Random(seed)
    shards = json.loads(pathlib.Path(order).read_text())
    ahead = [0] * len(shards)       # per agent: the next uuid to race on
    existing: list[str] = []
    books = {"foreign": {}, "remove": {}, "unsupported": {}}
    created: set[str] = set()
    counts = {"conflicts": 0, "given_up": 0, "races": 0, "raced": 0}
    deadline = time.monotonic() + wait
    while not existing and time.monotonic() < deadline:
        existing = [p["uuid"] for p in client.list_providers()]
        time.sleep(0.02)
    started = time.monotonic()
    for number in range(edits if existing else 0):
        kind = ("remove" if number % 5 == 4 else
                "unsupported" if number % 10 == 7 else "foreign")
        name = rng.choice(FOREIGN) if kind == "foreign" else None
        if name is not None and name not in created:
            client.ensure_trait(name)
            created.add(name)
        uuid = None
        if number % 4 == 0 and kind == "foreign":
            uuid, generation = _race_target(client, shards, ahead, number,
                                            deadline)
            if uuid is not None and generation <= 1:
                # Just created: no traits yet (its agent writes the
                # inventory first, then the traits) — write at once.
                counts["races"] += 1
                try:
                    client.put_part(uuid, "traits", generation, [name])
                    counts["raced"] += 1
                    books[kind].setdefault(uuid, set()).add(name)
                    continue
                except GenerationConflict:
                    counts["conflicts"] += 1
        if uuid is None:
            if number % 10 == 0:
                existing = [p["uuid"] for p in client.list_providers()]
            uuid = rng.choice(existing)
        for _attempt in range(WRITER_ATTEMPTS):
            generation, traits = client.get_part(uuid, "traits")
            traits = set(traits)
            if kind == "remove":
                name = next((t for t in REMOVABLE if t in traits), None)
                if name is None:
                    break
                traits.discard(name)
            else:
                name = UNSUPPORTED if kind == "unsupported" else name
                traits.add(name)
            try:
                client.put_part(uuid, "traits", generation, sorted(traits))
            except GenerationConflict:
                counts["conflicts"] += 1
                time.sleep(rng.uniform(0.005, 0.02))
                continue
            books[kind].setdefault(uuid, set()).add(name)
            break
        else:
            counts["given_up"] += 1
    emit("report", seconds=time.monotonic() - started,
         **{f"{kind}s": {u: sorted(n) for u, n in book.items()}
            for kind, book in books.items()},
         **counts, requests=dict(client.counts.by_method),
         **client.failure_report())


#: How far ahead of an agent's newest provider a race waits, and how
#: often it looks.
RACE_LEAD = 2
RACE_POLL = 0.008


def _race_target(client: CountingClient, shards: list[list[str]],
                 ahead: list[int], number: int, deadline: float
                 ) -> tuple[str | None, int | None]:
    """A provider its agent has just created (found within a few ms of
    its ``POST``) and its generation, or ``(None, None)`` when that agent
    is done or time is up."""
    agent = (number // 4) % len(shards)
    uuids = shards[agent]
    # The first it has not created yet (it creates them in this order).
    low, high = ahead[agent], len(uuids)
    while low < high:
        middle = (low + high) // 2
        if _generation(client, uuids[middle]) is None:
            high = middle
        else:
            low = middle + 1
    index = low + RACE_LEAD
    while index < len(uuids) and time.monotonic() < deadline:
        generation = _generation(client, uuids[index])
        if generation is not None:
            ahead[agent] = index + 1
            return uuids[index], generation
        time.sleep(RACE_POLL)
    ahead[agent] = min(index, len(uuids))
    return None, None


def _generation(client: CountingClient, uuid: str) -> int | None:
    """The provider's generation, or None while it does not exist."""
    try:
        body = client.request("GET", f"/resource_providers/{uuid}")
    except ProviderNotFound:
        return None
    return body["generation"]


# -- the run ------------------------------------------------------------------


class ChildFailed(RuntimeError):
    """A child process died or said something unexpected."""


class Child:
    """One child process and its JSON lines."""

    def __init__(self, name: str, role: str, args: dict,
                 log: pathlib.Path) -> None:
        self.name = name
        self.log = log
        env = {**os.environ, "PYTHONPATH": str(REPO)}
        with open(log, "wb") as stderr:
            self.process = subprocess.Popen(
                [sys.executable, str(SCRIPT), role, json.dumps(args)],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                stderr=stderr, env=env, cwd=REPO)
        self._buffer = b""

    def expect(self, event: str, deadline: float) -> dict:
        """The next line, which must be ``event``, before ``deadline``."""
        while b"\n" not in self._buffer:
            remaining = deadline - time.monotonic()
            ready, _, _ = select.select([self.process.stdout], [], [],
                                        max(0.0, remaining))
            if not ready:
                raise ChildFailed(self._failure(f"no {event!r} in time"))
            chunk = os.read(self.process.stdout.fileno(), 65536)
            if not chunk:
                raise ChildFailed(self._failure(
                    f"exited ({self.process.wait()}) before {event!r}"))
            self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        message = json.loads(line)
        if message.get("event") != event:
            raise ChildFailed(self._failure(f"said {line[:200]!r}"))
        return message

    def tell(self) -> None:
        self.process.stdin.write(b"go\n")
        self.process.stdin.flush()

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait()
        for stream in (self.process.stdin, self.process.stdout):
            stream.close()

    def _failure(self, what: str) -> str:
        tail = self.log.read_text(errors="replace")[-1500:].strip()
        return f"{self.name} {what}" + (f"; its stderr ends: {tail}"
                                        if tail else "")


@dataclasses.dataclass
class Outcome:
    """What a run saw: the agents' and the writer's reports, timings."""

    agents: list[dict]
    writer: dict
    seconds: float           # start of the children to every report
    cycles_seconds: float    # start of the children to every "cycled"

    @property
    def server_errors(self) -> int:
        return sum(r["server_errors"] + r["unreachable"]
                   for r in [*self.agents, self.writer])

    def cycles(self) -> Iterable[dict]:
        for report in self.agents:
            yield from report["cycles"]

    @property
    def trait_races(self) -> int:
        """Placement's 500s that were generation conflicts
        (:func:`is_trait_race`), retried as such."""
        return sum(r["trait_races"] for r in [*self.agents, self.writer])

    @property
    def conflicts(self) -> int:
        """Generation conflicts the agents' syncs retried."""
        return sum(c["conflicts"] for c in self.cycles())

    def requests(self) -> dict[str, int]:
        """The agents' requests by method (the writer's are its own)."""
        total: dict[str, int] = {}
        for cycle in self.cycles():
            for method, count in cycle["requests"].items():
                total[method] = total.get(method, 0) + count
        return total


class Run:
    """Start ``agents`` agents of ``nodes`` nodes each (``cycles``, then
    ``final`` cycles once the writer is done) and a writer of ``edits``
    edits against ``url`` (several: Placement workers on one database,
    the agents spread over them, the writer on the last); :meth:`run`
    drives them to the end.

    Files (inventories, state directories, the children's stderr) go to
    ``work``.  Everything is bounded by ``timeout`` seconds.
    """

    def __init__(self, url: str | list[str], work: pathlib.Path, *,
                 agents: int = 4, nodes: int = 250, cycles: int = 3,
                 final: int = 2, edits: int = 200, seed: int = 11,
                 timeout: float = 120.0) -> None:
        self.urls = [url] if isinstance(url, str) else list(url)
        self.work = work
        self.agents, self.nodes, self.cycles = agents, nodes, cycles
        self.final = final
        self.edits, self.seed, self.timeout = edits, seed, timeout
        self.shards: dict[int, list[dict]] = {}

    def run(self) -> Outcome:
        deadline = time.monotonic() + self.timeout
        children: list[Child] = []
        started = time.monotonic()
        try:
            for number in range(self.agents):
                self.shards[number] = shard(number, self.nodes)
                inventory = self.work / f"agent-{number}.json"
                inventory.write_text(json.dumps(
                    {"nodes": self.shards[number]}))
                state = self.work / f"agent-{number}-state"
                children.append(Child(
                    f"agent {number}", "agent",
                    {"url": self.urls[number % len(self.urls)],
                     "inventory": str(inventory),
                     "state_dir": str(state), "cycles": self.cycles,
                     "final": self.final},
                    self.work / f"agent-{number}.log"))
            order = self.work / "writer-order.json"
            order.write_text(json.dumps(
                [sorted(n["uuid"] for n in nodes)
                 for nodes in self.shards.values()]))
            writer_child = Child(
                "writer", "writer",
                {"url": self.urls[-1], "edits": self.edits, "seed": self.seed,
                 "order": str(order), "wait": self.timeout / 2},
                self.work / "writer.log")
            agents = children[:]
            children.append(writer_child)
            for child in agents:
                child.expect("cycled", deadline)
            cycled = time.monotonic() - started
            written = writer_child.expect("report", deadline)
            for child in agents:
                child.tell()
            reports = [child.expect("report", deadline) for child in agents]
            return Outcome(reports, written, time.monotonic() - started,
                           cycled)
        finally:
            for child in children:
                child.stop()


def main(argv: list[str]) -> None:
    role, args = argv[0], json.loads(argv[1])
    {"agent": agent, "writer": writer}[role](**args)


if __name__ == "__main__":
    main(sys.argv[1:])
