#!/usr/bin/env python3
"""Node-device reading: the first read of a host's devices, and the steady one.

A host of N PCI functions built with fakelibvirt's builders (N/16 GPUs
offering mdev types — the mdev parents —, N/16 SR-IOV PFs, the rest their
VFs, and two mdevs per GPU) is read by the libvirt driver's own code
(:func:`virtdriver.drivers.libvirt.devices.read_devices`).  Measured side
by side in one run, medians:

* ``parse``: :func:`parse_node_devices` of the documents, against a bare
  ``lxml.etree.fromstring`` of the same bytes (the goal: at most 3.0×;
  the capability parsers' 2.0× of issue 13 is for documents of hundreds
  of like elements, read by column; a node-device document is ~0.7 KiB
  of a dozen different ones, so the per-document Python work — about
  twice lxml's own parse — is what remains);
* ``first``: a whole reading through fakelibvirt (listing, ``XMLDesc``,
  parse) with an empty parse cache;
* ``steady``: the same with the cache of the previous reading (devices
  unchanged: nothing is parsed again; the goal: at most 0.75× the first,
  since what remains is ``listing``, the list and every ``XMLDesc``,
  which here is fakelibvirt's own XML handling).

Each sample round runs every measure in turn, so a machine's load drifts
alike over all of them.

Usage::

    python benchmarks/bench_devices_parse.py [--repeat N] [--json]
                                             [--check] [--smoke]
                                             [--results DIR]
"""

from __future__ import annotations

import gc
import statistics
import sys
import time

import benchlib  # beside this script
from lxml import etree

benchlib.use_checkout()
from virtdriver.capabilities.devices.parser import (  # noqa: E402
    parse_node_devices)
from virtdriver.drivers.libvirt.devices import (  # noqa: E402
    DeviceParseCache, read_devices)
from virtdriver.fakelibvirt import use_fakelibvirt  # noqa: E402
from virtdriver.fakelibvirt.builders import (  # noqa: E402
    HostBuilder, MdevType, host_documents, mdev_device, pci_device)

SIZES = (16, 64, 256)
#: Our parse / a bare lxml parse of the same documents (see above).
PARSE_GOAL = 3.0
#: The steady reading (devices unchanged) / the first one.
STEADY_GOAL = 0.75


def build_host(functions: int):
    """Documents of a host of ``functions`` PCI functions (see above)."""
    groups = max(1, functions // 16)
    devices = []
    for n in range(groups):
        gpu = f"0000:{0x40 + n:02x}:00.0"
        devices.append(pci_device(
            gpu, 0x10DE, 0x1EB8, numa_node=n % 2, class_id=0x030200,
            iommu_group=n, mdev_types=[
                MdevType("nvidia-222", "GRID T4-1B", 14),
                MdevType("nvidia-223", "GRID T4-2B", 6)]))
        for k in range(2):
            devices.append(mdev_device(
                f"{n:08x}-0000-4000-8000-{k:012x}", "nvidia-222", gpu))
    vfs_per_pf = (functions - 2 * groups) // groups
    for n in range(groups):
        pf = f"0000:{0x80 + n:02x}:00.0"
        vfs = [f"0000:{0x80 + n:02x}:{2 + i // 8:02x}.{i % 8}"
               for i in range(vfs_per_pf)]
        devices.append(pci_device(pf, 0x8086, 0x1521, numa_node=n % 2,
                                  virtual_functions=vfs, max_vfs=64,
                                  iommu_group=100 + n))
        devices += [pci_device(vf, 0x8086, 0x1520, numa_node=n % 2,
                               physical_function=pf,
                               iommu_group=1000 + 64 * n + i)
                    for i, vf in enumerate(vfs)]
    return host_documents(HostBuilder(cells=2), node_devices=devices)


def medians_ms(calls: dict, repeat: int) -> dict:
    """Median ms of each call, sampled in turn (load drifts alike)."""
    samples: dict = {name: [] for name in calls}
    for _ in range(repeat):
        for name, call in calls.items():
            gc.collect()
            start = time.perf_counter_ns()
            call()
            samples[name].append(time.perf_counter_ns() - start)
    return {f"{name}_ms": statistics.median(values) / 1e6
            for name, values in samples.items()}


def listing(conn) -> None:
    """libvirt's (here fakelibvirt's) part: the list and every XMLDesc."""
    for device in conn.listAllDevices(0):
        device.XMLDesc(0)


def measure(functions: int, repeat: int, fake) -> dict:
    documents = build_host(functions)
    data = [(name, xml.encode()) for name, xml in
            sorted(documents.node_devices.items())]
    conn = fake.connection_for(documents)
    reading = read_devices(conn, "fake:///bench")
    assert reading.known and len(reading.pci) == functions, reading
    warm = DeviceParseCache()
    read_devices(conn, "fake:///bench", cache=warm)
    row = {
        "functions": functions, "documents": len(data),
        "mdev_parents": len(reading.mdev_parents),
        "mdevs": len(reading.mdevs),
        "bytes": sum(len(xml) for _, xml in data),
        **medians_ms({
            "lxml": lambda: [etree.fromstring(xml) for _, xml in data],
            "parse": lambda: parse_node_devices(data),
            "listing": lambda: listing(conn),
            "first": lambda: read_devices(conn, "fake:///bench",
                                          cache=DeviceParseCache()),
            "steady": lambda: read_devices(conn, "fake:///bench",
                                           cache=warm)}, repeat),
    }
    row["parse_ratio"] = row["parse_ms"] / row["lxml_ms"]
    row["steady_ratio"] = row["steady_ms"] / row["first_ms"]
    row["parse_us_per_document"] = row["parse_ms"] * 1000 / len(data)
    return row


def print_table(report: dict) -> None:
    print("functions  docs  mdev parents   lxml ms  parse ms  ratio  "
          "listing ms  first ms  steady ms  steady/first")
    for row in report["rows"]:
        print(f"{row['functions']:9}  {row['documents']:4}  "
              f"{row['mdev_parents']:12}  {row['lxml_ms']:8.2f}  "
              f"{row['parse_ms']:8.2f}  {row['parse_ratio']:5.2f}  "
              f"{row['listing_ms']:10.2f}  "
              f"{row['first_ms']:8.2f}  {row['steady_ms']:9.2f}  "
              f"{row['steady_ratio']:12.2f}")


def main(argv: list[str] | None = None) -> int:
    args = benchlib.parse(benchlib.parser(
        __doc__, repeat=21, repeat_help="timed samples per measure",
        check_help="exit 1 if a goal is missed"), argv)
    sizes = SIZES[:1] if args.smoke else SIZES
    with use_fakelibvirt() as fake:
        rows = [measure(n, args.repeat, fake) for n in sizes]
    largest = rows[-1] if not args.smoke else None
    report = {"rows": rows, "goals": [
        benchlib.goal("device parse / bare lxml, 256 functions",
                      largest and largest["parse_ratio"], PARSE_GOAL,
                      unit="x"),
        benchlib.goal("steady / first reading, 256 functions",
                      largest and largest["steady_ratio"], STEADY_GOAL,
                      unit="x")]}
    return benchlib.finish(report, args, print_table, name="devices_parse",
                           plot={"title": "node-device reading",
                                 "series": {
                                     what: [(r["functions"], r[f"{what}_ms"])
                                            for r in rows]
                                     for what in ("lxml", "parse", "listing",
                                                  "first", "steady")},
                                 "xlabel": "PCI functions",
                                 "ylabel": "ms (median)"})


if __name__ == "__main__":
    sys.exit(main())
