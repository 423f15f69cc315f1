"""The embedded QEMU driver starts on one fixed CPU whatever CPU the
process runs on (connection.on_probe_cpu: libvirt's cached QEMU
capabilities hold the starting CPU's CPUID), and everything is restored
after."""

from __future__ import annotations

import os
import threading

import pytest

from virtdriver.drivers.libvirt import connection

pytestmark = pytest.mark.skipif(not hasattr(os, "sched_setaffinity"),
                                reason="no CPU affinity on this platform")


def in_thread(fn):
    """``fn()`` in a new thread (affinity is per thread: pytest's own
    thread keeps its own); its result, or its exception raised here."""
    result: dict = {}

    def run():
        try:
            result["value"] = fn()
        except BaseException as exc:  # noqa: BLE001 — re-raised below
            result["error"] = exc

    thread = threading.Thread(target=run)
    thread.start()
    thread.join(30)
    if "error" in result:
        raise result["error"]
    return result["value"]


def usable_cpus() -> list[int]:
    return sorted(os.sched_getaffinity(0))


def test_pinned_to_the_lowest_cpu_whatever_the_callers_affinity():
    cpus = usable_cpus()

    def probe():
        os.sched_setaffinity(0, {cpus[-1]})   # as under `taskset -c N`
        with connection.on_probe_cpu() as cpu:
            inside = os.sched_getaffinity(0)
        return cpu, inside, os.sched_getaffinity(0)

    cpu, inside, after = in_thread(probe)
    assert cpu == cpus[0] == min(connection.online_cpus())
    assert inside == {cpus[0]}
    assert after == {cpus[-1]}


def test_threads_started_inside_get_the_callers_affinity_back():
    cpus = usable_cpus()
    if len(cpus) < 2:
        pytest.skip("needs two CPUs")
    release = threading.Event()
    started: dict = {}

    def worker():
        started["tid"] = threading.get_native_id()
        started["affinity"] = os.sched_getaffinity(0)
        release.wait(30)

    def probe():
        os.sched_setaffinity(0, set(cpus))
        with connection.on_probe_cpu():
            thread = threading.Thread(target=worker)
            thread.start()
            while "affinity" not in started:
                threading.Event().wait(0.01)
        return thread, os.sched_getaffinity(started["tid"])

    try:
        thread, after = in_thread(probe)
    finally:
        release.set()
    thread.join(30)
    assert started["affinity"] == {cpus[0]}   # inherited while pinned
    assert after == set(cpus)                 # restored with the caller


def test_an_embed_open_runs_pinned_and_other_uris_do_not(tmp_path,
                                                         monkeypatch):
    cpus = usable_cpus()
    seen: dict[str, set[int]] = {}

    def fake_open(uri):
        seen[uri] = os.sched_getaffinity(0)
        return object()

    monkeypatch.setattr(connection.libvirt, "open", fake_open)
    embed = connection.embed_uri(tmp_path / "embed")

    def both():
        os.sched_setaffinity(0, {cpus[-1]})
        connection._open(embed, lock_timeout=5)
        connection._open("test:///default")

    in_thread(both)
    assert seen[embed] == {cpus[0]}
    assert seen["test:///default"] == {cpus[-1]}


def test_no_affinity_call_means_no_pinning(monkeypatch):
    monkeypatch.delattr(os, "sched_setaffinity")
    before = os.sched_getaffinity(0)
    with connection.on_probe_cpu() as cpu:
        assert cpu is None
        assert os.sched_getaffinity(0) == before


def test_cpus_outside_the_cpuset_are_skipped(monkeypatch):
    cpus = usable_cpus()
    # CPU 4096 cannot be in any affinity mask: setting it fails (EINVAL).
    monkeypatch.setattr(connection, "online_cpus",
                        lambda: [4096, *cpus])

    def probe():
        with connection.on_probe_cpu() as cpu:
            return cpu

    assert in_thread(probe) == cpus[0]


@pytest.mark.parametrize(("text", "expected"), [
    ("0\n", [0]), ("0-3\n", [0, 1, 2, 3]), ("0-1,4,6-7\n", [0, 1, 4, 6, 7])])
def test_online_cpu_list(text, expected):
    assert connection._cpu_list(text) == expected
