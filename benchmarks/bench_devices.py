#!/usr/bin/env python3
"""Device providers: the tracker cycle of a host with 256 PCI functions
and 16 mdev parents, against the same host without devices.

The libvirt driver runs on a fakelibvirt host (2 NUMA cells) built with
the node-device builders: 16 GPUs offering an mdev type (two existing
mdevs each) and 8 SR-IOV NICs of 1 PF + 29 VFs — 256 PCI functions, 16
mdev parents, 32 mdevs, 288 node-device documents — with rules listing
the VFs and the mdev type (24 device providers).  The *plain* host has
the same CPUs, memory and rules but no node devices.  Each repetition
times, for both hosts side by side:

* **first read** — a fresh driver and tracker: ``init_host`` (host and
  device reading, parse) and the first ``update_all``;
* **steady cycle** — the next ``update_all`` with nothing changed
  (median of several): the devices are read again only when libvirt sent
  a node-device event since (``drivers/libvirt/device_watch.py``; a
  fakelibvirt without node-device events reads them every cycle), then
  selection, publication, the tracker's settlement; the report counts
  the device listings the steady cycles made;
* **device reading** — one reading alone (``listAllDevices`` +
  ``XMLDesc`` of every device through fakelibvirt, parse cache warm):
  what a cycle after an event, or without events, adds.

Goal (``--check`` exits 1 when missed), from issue 27: the steady cycle
with devices at most 1.5× the one without, the ratio being the median of
side-by-side pairs.  ``--smoke`` takes fewer samples (the host is the
same).

Usage::

    python benchmarks/bench_devices.py [--repeat N] [--smoke] [--json] [--check]
"""

from __future__ import annotations

import gc
import pathlib
import statistics
import sys
import tempfile
import time

import benchlib  # beside this script

benchlib.use_checkout()
from virtdriver.conf.options import make_conf  # noqa: E402
from virtdriver.drivers.libvirt.devices import (  # noqa: E402
    DeviceParseCache, read_devices)
from virtdriver.drivers.libvirt.driver import LibvirtDriver  # noqa: E402
from virtdriver.fakelibvirt.builders import (  # noqa: E402
    HostBuilder, host_documents)
from virtdriver.fakelibvirt.connection import (  # noqa: E402
    register_host, unregister_host)
from virtdriver.fakelibvirt.nodedev_builder import (  # noqa: E402
    MdevType, mdev_device, pci_device)
from virtdriver.fakelibvirt.swap import use_fakelibvirt  # noqa: E402
from virtdriver.resource_tracker.tracker import ResourceTracker  # noqa: E402

GPUS, NICS, VFS_PER_NIC, MDEVS_PER_GPU = 16, 8, 29, 2
GOAL_RATIO = 1.5
STEADY_CYCLES = 5
CONF = """
[pci]
device_spec = {"vendor_id": "8086", "product_id": "154c", "traits": "fast"}
[devices]
enabled_mdev_types = nvidia-35
"""


def node_devices() -> list:
    """The 256 PCI functions, 16 mdev parents and their mdevs."""
    devices = []
    for number in range(GPUS):
        address = f"0000:{0x40 + number:02x}:00.0"
        devices.append(pci_device(
            address, 0x10DE, 0x1EB8, numa_node=number % 2,
            class_id=0x030200,
            mdev_types=[MdevType("nvidia-35", "GRID T4-1B", 14)]))
        devices += [mdev_device(f"6b0c1f8e-{number:04x}-4000-8000-"
                                f"{m:012x}", "nvidia-35", address)
                    for m in range(MDEVS_PER_GPU)]
    for nic in range(NICS):
        pf = f"0000:{0x80 + 2 * nic:02x}:00.0"
        vfs = [f"0000:{0x81 + 2 * nic:02x}:{v // 8:02x}.{v % 8}"
               for v in range(VFS_PER_NIC)]
        devices.append(pci_device(pf, 0x8086, 0x1572, numa_node=nic % 2,
                                  virtual_functions=vfs))
        devices += [pci_device(vf, 0x8086, 0x154C, numa_node=nic % 2,
                               physical_function=pf) for vf in vfs]
    return devices


def timed(call) -> tuple[float, float]:
    """``(cpu, wall)`` seconds of ``call()``, after a collection."""
    gc.collect()
    cpu, wall = time.process_time(), time.perf_counter()
    call()
    return time.process_time() - cpu, time.perf_counter() - wall


class Side:
    """One host (with or without devices) and its conf file."""

    def __init__(self, tmp: pathlib.Path, name: str, devices: list) -> None:
        self.name = name
        self.uri = register_host(name, host_documents(
            host=HostBuilder(cells=2, cores=8, threads=2),
            node_devices=devices)).uri
        self.conf = tmp / f"{name}.conf"
        self.conf.write_text(CONF)
        self.tmp = tmp

    def first(self, round_: int) -> tuple[ResourceTracker, tuple]:
        state = self.tmp / f"state-{self.name}-{round_}"
        holder = {}

        def read():
            driver = LibvirtDriver(conf=make_conf(config_files=[self.conf]),
                                   uri=self.uri, disk_gb=None)
            driver.init_host("cmp1")
            holder["tracker"] = tracker = ResourceTracker(driver,
                                                          state_dir=state)
            tracker.update_all()

        sample = timed(read)
        return holder["tracker"], sample


def median(pairs):
    return (statistics.median(p[0] for p in pairs),
            statistics.median(p[1] for p in pairs))


def run(repeat: int) -> dict:
    with tempfile.TemporaryDirectory() as name, use_fakelibvirt() as fake:
        tmp = pathlib.Path(name)
        sides = {"devices": Side(tmp, "benchdevs", node_devices()),
                 "plain": Side(tmp, "benchplain", [])}
        import libvirt  # fakelibvirt here
        conn = libvirt.open(sides["devices"].uri)
        cache = DeviceParseCache()
        read_devices(conn, sides["devices"].uri, cache=cache)
        try:
            samples = []
            for round_ in range(-1, repeat):  # round -1 warms up
                trackers, sample = {}, {}
                for key, side in sides.items():
                    trackers[key], sample[f"{key}_first"] = side.first(
                        round_)
                steady = {key: [] for key in sides}
                listings = 0
                for _ in range(STEADY_CYCLES):
                    for key, tracker in trackers.items():  # side by side
                        listed = fake.GLOBAL_FAULTS.calls("listAllDevices")
                        steady[key].append(timed(tracker.update_all))
                        if key == "devices":
                            listings += fake.GLOBAL_FAULTS.calls(
                                "listAllDevices") - listed
                for key in sides:
                    sample[f"{key}_steady"] = median(steady[key])
                sample["listings"] = listings / STEADY_CYCLES
                sample["reading"] = median([timed(lambda: read_devices(
                    conn, sides["devices"].uri, cache=cache))
                    for _ in range(STEADY_CYCLES)])
                sample["ratio"] = statistics.median(
                    d[0] / p[0] for d, p in zip(
                        steady["devices"], steady["plain"], strict=True))
                sample["providers"] = len(trackers["devices"].tree)
                if round_ >= 0:
                    samples.append(sample)
        finally:
            for side in sides.values():
                unregister_host(side.name)
    row = {}
    for key in ("devices_first", "plain_first", "devices_steady",
                "plain_steady", "reading"):
        row[f"{key}_s"], row[f"{key}_wall_s"] = median(
            [s[key] for s in samples])
    ratio = statistics.median(s["ratio"] for s in samples)
    return {"repeat": repeat, "steady_cycles": STEADY_CYCLES,
            "pci_functions": GPUS + NICS * (1 + VFS_PER_NIC),
            "mdev_parents": GPUS, "mdevs": GPUS * MDEVS_PER_GPU,
            "providers_with_devices": samples[0]["providers"],
            "rows": [row], "steady_ratio": ratio,
            "first_ratio": row["devices_first_s"] / row["plain_first_s"],
            "device_listings_per_steady_cycle": statistics.median(
                s["listings"] for s in samples),
            "clock": "CPU seconds of this process (wall in *_wall_s)",
            "goals": [benchlib.goal(
                "steady cycle, devices / none (side by side)", ratio,
                GOAL_RATIO, unit="x")]}


def print_table(report: dict) -> None:
    row = report["rows"][0]
    print(f"{report['pci_functions']} PCI functions, "
          f"{report['mdev_parents']} mdev parents, {report['mdevs']} "
          f"mdevs; {report['providers_with_devices']} providers with "
          f"devices. CPU ms (wall), median of {report['repeat']}")
    print(f"{'':>14} {'first read':>18} {'steady cycle':>18}")
    for key in ("devices", "plain"):
        cells = [f"{row[f'{key}_{p}_s'] * 1e3:7.1f} "
                 f"({row[f'{key}_{p}_wall_s'] * 1e3:6.1f})"
                 for p in ("first", "steady")]
        print(f"{key:>14} {cells[0]:>18} {cells[1]:>18}")
    print(f"{'reading alone':>14} {'':>18} {row['reading_s'] * 1e3:7.1f} "
          f"({row['reading_wall_s'] * 1e3:6.1f})")
    print(f"\nsteady devices / none: {report['steady_ratio']:.2f}x "
          f"({report['device_listings_per_steady_cycle']:g} device "
          f"listings per steady cycle); first read: "
          f"{report['first_ratio']:.2f}x")


def main(argv: list[str] | None = None) -> int:
    args = benchlib.parse(benchlib.parser(
        __doc__, repeat=3, repeat_help="repetitions of both hosts",
        check_help="exit 1 if the goal of issue 27 is missed"), argv)
    report = run(1 if args.smoke else args.repeat)
    row = report["rows"][0]
    series = {key: [(1, row[f"{key}_first_s"]), (2, row[f"{key}_steady_s"])]
              for key in ("devices", "plain")}
    return benchlib.finish(report, args, print_table, name="devices", plot={
        "title": "devices: first read (1), steady cycle (2)",
        "series": series, "xlabel": "phase", "ylabel": "CPU seconds",
        "log": False})


if __name__ == "__main__":
    sys.exit(main())
