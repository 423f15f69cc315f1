#!/usr/bin/env python3
"""One ``GET /allocation_candidates``: a 4-cell host with 8 devices per
cell against the same host without devices.

Both hosts are the fake driver's (4 cells × 8 cores × 2 threads, 32 GiB
per cell) synced through the real path (driver → ResourceTracker →
TrackerOwnership → Syncer) into a fresh ``openstack-placement`` on
loopback (SQLite).  The device host adds per cell 4 PCI functions, 2 PFs
of 4 VFs each (pooled) and 2 mdev parents of 4 vGPUs (32 device
providers, 48 more classes' worth of units).  Timed, each the median of
``--repeat`` requests (wall time of the HTTP request, Placement in this
process's server thread):

* the same NUMA request (2 guest nodes, no device) of both hosts: what
  device providers cost a request that does not ask for them;
* on the device host, the request with devices: a GPU and a VF that must
  share guest node 0's cell (``required``, ``same_subtree``), and the
  same with the devices floating (``legacy``).

The goal (issue 28): the device host answers the NUMA request within 3×
the plain host's time.  Results in ``<results>/device_candidates.json``.

Usage::

    python benchmarks/bench_device_candidates.py [--repeat N] [--json]
        [--check] [--smoke] [--results DIR]
"""

from __future__ import annotations

import pathlib
import statistics
import sys
import tempfile
import time

import benchlib  # beside this script

benchlib.use_checkout()
from virtdriver.claims.device_request import parse_aliases  # noqa: E402
from virtdriver.claims.model import Flavor  # noqa: E402
from virtdriver.claims.placement_request import (  # noqa: E402
    placement_request)
from virtdriver.drivers.fake import FakeDriver  # noqa: E402
from virtdriver.placement.candidates import (  # noqa: E402
    allocation_candidates)
from virtdriver.placement.loopback import PlacementServer  # noqa: E402
from virtdriver.placement.ownership import TrackerOwnership  # noqa: E402
from virtdriver.placement.sync import Syncer  # noqa: E402
from virtdriver.resource_tracker.tracker import ResourceTracker  # noqa: E402

CELLS = 4
ALIASES = parse_aliases([
    '{"name": "gpu", "vendor_id": "10de", "product_id": "1eb8"}',
    '{"name": "vf", "vendor_id": "8086", "product_id": "154c"}'])
#: The goal: the device host's NUMA request within this many times the
#: plain host's.
RATIO_LIMIT = 3.0


def host(name: str, devices: bool) -> dict:
    spec = {"name": name, "cells": CELLS, "cores_per_cell": 8,
            "threads_per_core": 2, "memory_mb_per_cell": 32768}
    if devices:
        entries = []
        for cell in range(CELLS):
            base = 0x20 + cell * 0x10
            for n in range(4):
                entries.append({"address": f"0000:{base + n:02x}:00.0",
                                "vendor_id": "10de", "product_id": "1eb8",
                                "numa_node": cell})
            for n in range(2):
                entries.append({"address": f"0000:{base + 4 + n:02x}:00.0",
                                "vendor_id": "8086", "product_id": "1572",
                                "vf_product_id": "154c", "vfs": 4,
                                "numa_node": cell})
            for n in range(2):
                entries.append({"address": f"0000:{base + 6 + n:02x}:00.0",
                                "vendor_id": "10de", "product_id": "2236",
                                "mdev_type": "nvidia-35", "instances": 4,
                                "numa_node": cell})
        spec["devices"] = entries
    return spec


def synced(name: str, devices: bool, work: pathlib.Path, client) -> int:
    driver = FakeDriver(host(name, devices))
    driver.init_host(name)
    tracker = ResourceTracker(driver, state_dir=work / name)
    owned = TrackerOwnership(tracker)
    owned.note(tracker.update_all())
    result = Syncer(client, work / name).sync(
        tracker.tree, owned_for=owned, remove=owned.gone)
    assert result.ok, result.describe()
    return len(tracker.tree)


def timed(client, request, repeat: int) -> tuple[float, int]:
    times, count = [], 0
    allocation_candidates(client, request)          # warm
    for _ in range(repeat):
        started = time.perf_counter()
        body = allocation_candidates(client, request)
        times.append(time.perf_counter() - started)
        count = len(body["allocation_requests"])
    return statistics.median(times), count


def request(specs: dict):
    return placement_request(Flavor(4, 4096, specs), {}, aliases=ALIASES)


def run(repeat: int) -> dict:
    numa = request({"hw:numa_nodes": "2"})
    with_devices = request({"hw:numa_nodes": "2",
                            "pci_passthrough:alias": "gpu:1,vf:1",
                            "hw:pci_numa_affinity_policy": "required"})
    floating = request({"hw:numa_nodes": "2",
                        "pci_passthrough:alias": "gpu:1,vf:1",
                        "hw:pci_numa_affinity_policy": "legacy"})
    rows = {}
    with tempfile.TemporaryDirectory() as tmp:
        work = pathlib.Path(tmp)
        for label, devices in (("plain", False), ("devices", True)):
            with PlacementServer(work / f"{label}.db") as server:
                client = server.client()
                providers = synced(f"bench-{label}", devices, work, client)
                seconds, count = timed(client, numa, repeat)
                rows[label] = {"providers": providers,
                               "numa_request_s": seconds,
                               "numa_candidates": count}
                if devices:
                    for key, req in (("required", with_devices),
                                     ("legacy", floating)):
                        seconds, count = timed(client, req, repeat)
                        rows[label][f"{key}_request_s"] = seconds
                        rows[label][f"{key}_candidates"] = count
    ratio = rows["devices"]["numa_request_s"] / rows["plain"]["numa_request_s"]
    plain = rows["plain"]["numa_request_s"]
    return {"rows": rows, "ratio": ratio, "repeat": repeat,
            "ratio_required": rows["devices"]["required_request_s"] / plain,
            "ratio_legacy": rows["devices"]["legacy_request_s"] / plain,
            "goals": [benchlib.goal(
                "NUMA request, device host / plain host", ratio,
                RATIO_LIMIT, unit="x")]}


def print_table(report: dict) -> None:
    plain, devices = report["rows"]["plain"], report["rows"]["devices"]
    print("host      providers  request                  candidates   "
          "median ms")
    print(f"plain     {plain['providers']:9}  NUMA (2 guest nodes)     "
          f"{plain['numa_candidates']:10}  {plain['numa_request_s'] * 1e3:10.1f}")
    print(f"devices   {devices['providers']:9}  NUMA (2 guest nodes)     "
          f"{devices['numa_candidates']:10}  "
          f"{devices['numa_request_s'] * 1e3:10.1f}")
    for key in ("required", "legacy"):
        print(f"devices   {devices['providers']:9}  + gpu, vf ({key:8})   "
              f"{devices[f'{key}_candidates']:10}  "
              f"{devices[f'{key}_request_s'] * 1e3:10.1f}")
    print(f"ratio to the plain host's NUMA request: the same request "
          f"{report['ratio']:.2f}x, with devices required "
          f"{report['ratio_required']:.2f}x, floating (legacy) "
          f"{report['ratio_legacy']:.2f}x")


def main(argv: list[str] | None = None) -> int:
    args = benchlib.parse(benchlib.parser(
        __doc__, repeat=7, repeat_help="requests timed per case",
        check_help="exit 1 if the goal of issue 28 is missed"), argv)
    report = run(1 if args.smoke else args.repeat)
    plain, devices = report["rows"]["plain"], report["rows"]["devices"]
    return benchlib.finish(report, args, print_table,
                           name="device_candidates", plot={
        "title": "allocation_candidates: NUMA (1), required (2), legacy (3)",
        "series": {
            "plain host": [(1, plain["numa_request_s"] * 1e3)],
            "8 devices per cell": [
                (1, devices["numa_request_s"] * 1e3),
                (2, devices["required_request_s"] * 1e3),
                (3, devices["legacy_request_s"] * 1e3)]},
        "xlabel": "request", "ylabel": "median ms", "log": False})


if __name__ == "__main__":
    sys.exit(main())
