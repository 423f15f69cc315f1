"""Properties: whatever the host and the order of claims and releases, a
host is never overcommitted, and many threads claiming under one lock (as
the tracker does) never overcommit either.

The invariants are computed here from the raw fits and the host's cells,
not with the checks of ``claims.capacity``, so a bug shared by the fit and its
checker still shows:

* no host CPU is taken by two instances; every taken CPU is a dedicated CPU
  of the cell the fit names; every dedicated vCPU is pinned;
* shared vCPUs per cell within ratio × the cell's shared CPUs, and over
  the host (floating included) within ratio × the host's shared CPUs;
* huge pages within each pool's available pages; small-page memory within
  the cell's memory less its huge pages (and its small pool), and over the
  host with floating memory;
* ``isolate`` keeps whole cores; ``require`` leaves at most one core with
  a single vCPU of the instance;
* ``release(claim(u, f)) == u`` and the JSON document reads back equal.
"""

from __future__ import annotations

import random
import threading
from collections import Counter

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from virtdriver.claims.fit import DoesNotFit, fit
from virtdriver.claims.model import (
    CPU_DEDICATED, CPU_MIXED, CPU_SHARED, EMULATOR_ISOLATE, PAGE_ANY,
    PAGE_LARGE, PAGE_SMALL, THREAD_ISOLATE, THREAD_REQUIRE, CellRequest,
    Flavor, NUMARequest)
from virtdriver.claims.usage import (
    ClaimConflict, HostUsage, claim, release)
from virtdriver.claims.usage_json import usage_from_json, usage_to_json
from virtdriver.conf import PinningConfig
from virtdriver.drivers.fake_host import spec_from_dict
from virtdriver.drivers.host_resources import HostResources, host_resources

RATIOS = [1.0, 1.5, 4.0]


@st.composite
def hosts(draw) -> HostResources:
    cells = draw(st.integers(1, 3))
    cores = draw(st.integers(1, 4))
    threads = draw(st.integers(1, 2))
    memory = draw(st.sampled_from([2048, 4096]))
    pages = {2048: draw(st.integers(0, 512))}
    if memory == 4096:
        pages[1048576] = draw(st.integers(0, 2))
    caps = spec_from_dict({
        "cells": cells, "cores_per_cell": cores, "threads_per_core": threads,
        "memory_mb_per_cell": memory, "pages_per_cell": pages,
    }).host_capabilities()
    cpus = sorted(caps.cpu_ids)
    layout = draw(st.sampled_from(["dedicated", "shared", "halves", "any"]))
    if layout == "any":
        roles = draw(st.lists(st.sampled_from("dsn"), min_size=len(cpus),
                              max_size=len(cpus)))
    elif layout == "halves":  # first cell(s) dedicated, the rest shared
        roles = ["d" if cpu < len(cpus) // 2 else "s" for cpu in cpus]
    else:
        roles = [layout[0]] * len(cpus)
    dedicated = frozenset(c for c, r in zip(cpus, roles, strict=True)
                          if r == "d")
    shared = frozenset(c for c, r in zip(cpus, roles, strict=True)
                       if r == "s")
    return host_resources(caps, None, PinningConfig(
        cpu_dedicated_set=dedicated or None, cpu_shared_set=shared or None,
        reserved_host_memory_mb=draw(st.sampled_from([0, 256]))))


@st.composite
def requests(draw) -> tuple[NUMARequest | None, Flavor]:
    if draw(st.integers(0, 5)) == 0:
        return None, Flavor(draw(st.integers(1, 4)),
                            draw(st.sampled_from([128, 512])))
    nodes = draw(st.integers(1, 2))
    per_cpu = draw(st.integers(1, 3))
    per_mb = draw(st.sampled_from([128, 256, 512, 1024]))
    policy = draw(st.sampled_from([CPU_SHARED, CPU_DEDICATED, CPU_MIXED]))
    cells = []
    for node in range(nodes):
        cpus = frozenset(range(node * per_cpu, (node + 1) * per_cpu))
        if policy == CPU_DEDICATED:
            pinned = cpus
        elif policy == CPU_MIXED:
            pinned = frozenset(c for c in cpus if c % 2 == 0)
        else:
            pinned = frozenset()
        cells.append(CellRequest(node, cpus, per_mb, pinned))
    dedicated = policy != CPU_SHARED
    thread = draw(st.sampled_from(["prefer", THREAD_ISOLATE,
                                   THREAD_REQUIRE])) if dedicated else None
    emulator = (draw(st.sampled_from([None, EMULATOR_ISOLATE]))
                if dedicated else None)
    page = draw(st.sampled_from([None, PAGE_SMALL, PAGE_LARGE, PAGE_ANY,
                                 2048, 1048576]))
    return (NUMARequest(tuple(cells), policy, thread, emulator, page),
            Flavor(nodes * per_cpu, nodes * per_mb))


operations = st.lists(st.one_of(
    st.tuples(st.just("fit"), requests()),
    st.tuples(st.just("release"), st.integers(0, 20))), max_size=14)


def assert_within_host(usage: HostUsage, host: HostResources,
                       ratio: float) -> None:
    owners: Counter[int] = Counter()
    shared_total = 0
    small_total = 0
    for inst in usage.instances.values():
        shared_total += inst.floating_vcpus
        small_total += inst.floating_memory_mb
        for c in inst.cells:
            cell = host.cell(c.host_cell)
            cpus = [*c.pinning.values(), *c.reserved_cpus, *c.emulator_cpus]
            owners.update(cpus)
            assert set(cpus) <= cell.pcpus
            shared_total += len(c.shared_vcpus)
            if c.page_size_kib is None:
                small_total += c.memory_mb
        assert_thread_policy(inst, host)
    assert all(n == 1 for n in owners.values()), owners
    assert shared_total <= len(host.vcpus) * ratio
    assert small_total <= sum(small_capacity(c) for c in host.cells
                              if c.memory_mb is not None)
    for cell in host.cells:
        on_cell = [c for i in usage.instances.values() for c in i.cells
                   if c.host_cell == cell.cell_id]
        assert sum(len(c.shared_vcpus) for c in on_cell) \
            <= len(cell.vcpus) * ratio
        assert sum(c.memory_mb for c in on_cell if c.page_size_kib is None) \
            <= small_capacity(cell)
        pages: Counter[int] = Counter()
        for c in on_cell:
            if c.page_size_kib is not None:
                assert (c.memory_mb * 1024) % c.page_size_kib == 0
                pages[c.page_size_kib] += c.memory_mb * 1024 // c.page_size_kib
        for size, used in pages.items():
            assert used <= cell.huge_pages[size].available


def small_capacity(cell) -> int:
    huge = sum(p.size_kib * p.total for p in cell.huge_pages.values())
    small = cell.small_pages.available * cell.small_pages.size_kib
    return min(cell.memory_mb - huge // 1024, small // 1024)


def core_of(cell, cpu) -> frozenset[int]:
    return frozenset(cell.siblings.get(cpu, {cpu})) | {cpu}


def assert_thread_policy(inst, host) -> None:
    for c in inst.cells:
        cell = host.cell(c.host_cell)
        pinned = set(c.pinning.values())
        if inst.cpu_thread_policy == THREAD_ISOLATE:
            for cpu in pinned | c.emulator_cpus:
                assert core_of(cell, cpu) <= c.host_cpus
                assert len(core_of(cell, cpu) & pinned) <= 1
        elif inst.cpu_thread_policy == THREAD_REQUIRE and pinned:
            lone = [cpu for cpu in pinned
                    if len(core_of(cell, cpu) & pinned) == 1]
            assert len(lone) <= 1


@settings(max_examples=300, deadline=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(host=hosts(), ratio=st.sampled_from(RATIOS), ops=operations)
def test_no_sequence_of_claims_and_releases_overcommits(host, ratio, ops):
    usage = HostUsage()
    for n, (op, arg) in enumerate(ops):
        if op == "release":
            if usage.instances:
                uuid = sorted(usage.instances)[arg % len(usage.instances)]
                usage = release(usage, uuid)
            continue
        numa, flavor = arg
        try:
            new_fit = fit(numa, flavor, host, usage,
                          cpu_allocation_ratio=ratio, instance_uuid=f"i{n}")
        except DoesNotFit as refusal:
            assert refusal.reasons
            assert all(r.startswith(("cell ", "host: "))
                       for r in refusal.reasons)
            continue
        if numa is not None:
            assert set(new_fit.pinning) == numa.dedicated_cpus
            assert len(new_fit.emulator_cpus) == int(
                numa.emulator_threads_isolated)
        after = claim(usage, new_fit, host, cpu_allocation_ratio=ratio)
        assert release(after, new_fit.uuid) == usage
        usage = after
        assert_within_host(usage, host, ratio)
        assert usage_from_json(usage_to_json(usage), host,
                               cpu_allocation_ratio=ratio) == usage


def two_cpu_instance() -> tuple[NUMARequest, Flavor]:
    return (NUMARequest((CellRequest(0, frozenset({0, 1}), 256,
                                     frozenset({0, 1})),),
                        CPU_DEDICATED, "prefer", page_size=2048),
            Flavor(2, 256))


def pinned_host() -> HostResources:
    """2 cells × 8 cores × 2 threads, every CPU dedicated: 16 two-CPU
    instances fit, with 2 × 1024 pages of 2 MiB enough for all."""
    caps = spec_from_dict({"cells": 2, "cores_per_cell": 8,
                           "threads_per_core": 2, "memory_mb_per_cell": 8192,
                           "pages_per_cell": {2048: 1024}}
                          ).host_capabilities()
    return host_resources(caps, None, PinningConfig(
        cpu_dedicated_set=caps.cpu_ids, reserved_host_memory_mb=0))


class Tracker:
    """What the resource tracker does: one usage, one lock."""

    def __init__(self, host: HostResources) -> None:
        self.host = host
        self.usage = HostUsage()
        self.lock = threading.Lock()


def run_threads(count: int, work) -> None:
    barrier = threading.Barrier(count)
    errors: list[BaseException] = []

    def main(n: int) -> None:
        try:
            barrier.wait()
            work(n)
        except BaseException as exc:  # reported below, not lost in a thread
            errors.append(exc)

    threads = [threading.Thread(target=main, args=(n,)) for n in range(count)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors


def test_many_threads_claiming_under_one_lock_never_overcommit():
    tracker = Tracker(pinned_host())
    numa, flavor = two_cpu_instance()
    won: list[str] = []

    def work(n: int) -> None:
        for attempt in range(3):
            uuid = f"t{n}-{attempt}"
            with tracker.lock:
                try:
                    new = fit(numa, flavor, tracker.host, tracker.usage,
                              cpu_allocation_ratio=1.0, instance_uuid=uuid)
                except DoesNotFit:
                    continue
                tracker.usage = claim(tracker.usage, new, tracker.host)
                won.append(uuid)
            if random.random() < 0.3:
                with tracker.lock:
                    tracker.usage = release(tracker.usage, uuid)
                    won.remove(uuid)

    run_threads(24, work)

    assert set(tracker.usage.instances) == set(won)
    assert_within_host(tracker.usage, tracker.host, 1.0)
    with tracker.lock:  # fill what releases left: exactly 16 in all
        while True:
            try:
                new = fit(numa, flavor, tracker.host, tracker.usage,
                          cpu_allocation_ratio=1.0,
                          instance_uuid=f"fill{len(tracker.usage.instances)}")
            except DoesNotFit:
                break
            tracker.usage = claim(tracker.usage, new, tracker.host)
    assert len(tracker.usage.instances) == 16
    assert_within_host(tracker.usage, tracker.host, 1.0)


def test_fits_on_stale_usage_are_refused_at_claim_time():
    """Every thread fits on the same snapshot, then all claim: the claim's
    own re-check is what keeps them from pinning the same CPUs."""
    tracker = Tracker(pinned_host())
    numa, flavor = two_cpu_instance()
    count = 12
    fitted = threading.Barrier(count)
    refused: list[str] = []

    def work(n: int) -> None:
        for attempt in range(4):
            uuid = f"t{n}-{attempt}"
            fitted.wait()  # everyone has claimed what they will this round
            with tracker.lock:
                seen = tracker.usage
            fitted.wait()  # everyone has read the same usage
            new = fit(numa, flavor, tracker.host, seen,
                      cpu_allocation_ratio=1.0, instance_uuid=uuid)
            with tracker.lock:
                try:
                    tracker.usage = claim(tracker.usage, new, tracker.host,
                                          cpu_allocation_ratio=1.0)
                except ClaimConflict:
                    refused.append(uuid)

    run_threads(count, work)

    assert len(tracker.usage.instances) == 4  # one winner per round
    assert len(refused) == 4 * (count - 1)
    assert_within_host(tracker.usage, tracker.host, 1.0)
