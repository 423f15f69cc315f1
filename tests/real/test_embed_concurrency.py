"""Several virtdriver processes on one ``qemu:///embed`` root take turns.

libvirt's embedded QEMU driver keeps the root's pid file for the life of
the process that opened it; without virtdriver's ``<root>.lock`` all but
one of several concurrent runs failed with "Failed to acquire pid file".
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

from tests.conftest import REPO
from virtdriver.drivers.libvirt import connection

pytestmark = pytest.mark.real

RUNS = 6


@pytest.fixture
def fresh_state_dir(tmp_path, embed_uri, virtdriver_state_dir):
    """A state directory of its own, its embed root seeded with QEMU
    capabilities probed before (probing takes seconds): this test's own
    from its last run, else the session root's.  What the children probed
    is kept for the next run."""
    saved = virtdriver_state_dir / "embed-concurrency-cache"
    session = virtdriver_state_dir / "embed" / "cache"
    seed = saved if saved.is_dir() else session
    if seed.is_dir():
        shutil.copytree(seed, tmp_path / "embed" / "cache")
    yield tmp_path
    probed = tmp_path / "embed" / "cache"
    if probed.is_dir():
        shutil.rmtree(saved, ignore_errors=True)
        shutil.copytree(probed, saved)


@pytest.fixture
def one_cpu():
    """Run the children on one CPU.

    libvirt 9.0 keys its capabilities cache on the CPUID of the CPU the
    probing process ran on; on hosts whose CPUs differ there (APIC ids in
    some VMs) every run that lands on another CPU probes again, about 8 s
    each.  One CPU keeps this test at one probe at most.
    """
    before = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {min(before)})
    try:
        yield
    finally:
        os.sched_setaffinity(0, before)


def test_concurrent_reports_on_one_embed_root_all_succeed(fresh_state_dir,
                                                          one_cpu):
    if any(connection.is_socket(s) for s in connection.DAEMON_SOCKETS):
        pytest.skip("a libvirt daemon socket exists; it would be chosen")
    env = dict(os.environ, VIRTDRIVER_STATE_DIR=str(fresh_state_dir))

    runs = [subprocess.Popen(
        [sys.executable, "-m", "virtdriver.cli", "report", "--format",
         "json"], cwd=REPO, env=env, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True) for _ in range(RUNS)]
    results = [run.communicate(timeout=300) for run in runs]

    failed = [(run.returncode, err)
              for run, (_out, err) in zip(runs, results, strict=True)
              if run.returncode != 0]
    assert not failed, failed
    assert all("pid file" not in err for _out, err in results)
    trees = [json.loads(out) for out, _err in results]
    assert trees[0]["providers"], "the report lists the host"
    assert all(tree == trees[0] for tree in trees[1:])
    # They went through the embed root and its lock.
    root = fresh_state_dir / "embed"
    assert (root / connection.EMBED_PID_FILE).exists()
    assert connection.embed_lock_path(root).exists()
