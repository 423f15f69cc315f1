"""Instance claims and the no-op rebuild claim through ResourceTracker, as
a compute service calls them: the fake driver's numa2-ht host (2 cells,
8 cores x 2 threads each) with every CPU dedicated, a real state
directory, restarts, threads, processes and edited files."""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys
import textwrap
import threading
import uuid as uuidlib

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from virtdriver.claims.fit import DoesNotFit
from virtdriver.claims.model import ClaimError, Flavor, Instance
from virtdriver.claims.rebuild import ProviderInfo, RebuildRefused
from virtdriver.claims.usage import UnknownClaim
from virtdriver.conf import make_conf
from virtdriver.drivers.fake import FakeDriver
from virtdriver.drivers.ironic import IronicDriver
from virtdriver.resource_tracker.claims_file import ClaimsFileError
from virtdriver.resource_tracker.tracker import ResourceTracker

NODE = "fake-numa2-ht"
PINNED = {"hw:cpu_policy": "dedicated"}


def driver(dedicated: str = "0-31") -> FakeDriver:
    conf = make_conf([])
    conf.set_override("cpu_dedicated_set", dedicated, group="compute")
    found = FakeDriver("numa2-ht", conf=conf)
    found.init_host("compute-1")
    return found


def tracker(state: pathlib.Path, **kwargs) -> ResourceTracker:
    made = ResourceTracker(driver(**kwargs), state_dir=state)
    made.update_all()
    return made


def instance(vcpus=8, memory_mb=4096, specs=None, image=None,
             allocations=None, uuid=None) -> Instance:
    return Instance(uuid or str(uuidlib.uuid4()),
                    Flavor(vcpus, memory_mb, dict(PINNED if specs is None
                                                  else specs)),
                    image or {}, allocations or {})


def pinned_cpus(fits) -> list[int]:
    return [cpu for fit in fits for cell in fit.cells
            for cpu in (*cell.pinning.values(), *cell.emulator_cpus,
                        *cell.reserved_cpus)]


def everything(t: ResourceTracker) -> tuple:
    """Every piece of state a call could change, generations included."""
    tree = [(p.uuid, p.generation, sorted(p.traits), dict(p.inventory))
            for p in t.tree.providers()]
    files = tuple(path.read_bytes() if path.exists() else None
                  for path in (t.ledger_path, t.claims_path))
    return tree, files


# -- claims -----------------------------------------------------------------

def test_claims_fill_the_host_then_say_which_cell_lacked_what(tmp_path):
    t = tracker(tmp_path)
    fits = [t.instance_claim(instance(), NODE) for _ in range(4)]
    assert len(set(pinned_cpus(fits))) == 32
    with pytest.raises(DoesNotFit) as refused:
        t.instance_claim(instance(vcpus=2), NODE)
    message = str(refused.value)
    assert "cell 0" in message and "cell 1" in message
    assert "dedicated" in message


def test_claims_survive_a_restart_neither_forgotten_nor_counted_twice(
        tmp_path):
    first = tracker(tmp_path)
    held = [first.instance_claim(instance(), NODE) for _ in range(3)]
    restarted = tracker(tmp_path)
    assert set(restarted.claims()[NODE].instances) == {f.uuid for f in held}
    last = restarted.instance_claim(instance(), NODE)    # the 4th fits
    assert not set(pinned_cpus([last])) & set(pinned_cpus(held))
    with pytest.raises(DoesNotFit):
        tracker(tmp_path).instance_claim(instance(), NODE)
    again = tracker(tmp_path)
    assert again.release(held[0].uuid) == NODE
    refit = tracker(tmp_path).instance_claim(instance(), NODE)
    assert set(pinned_cpus([refit])) == set(pinned_cpus([held[0]]))


def test_release_frees_exactly_what_was_taken(tmp_path):
    t = tracker(tmp_path)
    before = t.claims_path.read_bytes() if t.claims_path.exists() else None
    keep = t.instance_claim(instance(vcpus=4), NODE)
    snapshot = t.claims_path.read_bytes()
    gone = t.instance_claim(instance(vcpus=6, memory_mb=8192), NODE)
    t.release(gone.uuid)
    assert t.claims_path.read_bytes() == snapshot
    t.release(keep.uuid)
    assert t.claims() == {} and before is None
    with pytest.raises(UnknownClaim, match="holds no claim"):
        t.release(keep.uuid)


def test_usage_shows_on_the_cell_providers(tmp_path):
    t = tracker(tmp_path)
    fit = t.instance_claim(instance(vcpus=4, memory_mb=2048), NODE)
    usages = t.usages()
    cell = t.tree.record(f"{NODE}_NUMA{fit.cells[0].host_cell}").uuid
    other = t.tree.record(f"{NODE}_NUMA{1 - fit.cells[0].host_cell}").uuid
    assert usages[cell]["PCPU"] == 4 and usages[cell]["MEMORY_MB"] == 2048
    assert usages[other]["PCPU"] == 0


def test_an_instance_claims_once(tmp_path):
    t = tracker(tmp_path)
    one = instance()
    t.instance_claim(one, NODE)
    with pytest.raises(ClaimError, match="already holds a claim"):
        t.instance_claim(one, NODE)


def test_bare_metal_nodes_have_nothing_to_claim(tmp_path):
    path = tmp_path / "nodes.json"
    uuid = str(uuidlib.uuid4())
    path.write_text(json.dumps({"nodes": [
        {"uuid": uuid, "name": "n1", "resource_class": "gold"}]}))
    ironic = IronicDriver(inventory_path=str(path))
    ironic.init_host("conductor")
    t = ResourceTracker(ironic, state_dir=tmp_path)
    with pytest.raises(ClaimError, match="no NUMA cells to claim on"):
        t.instance_claim(instance(), uuid)


@pytest.mark.parametrize("edit", [
    lambda document, cell: cell["pinning"].update({"0": 99}),   # not a CPU
    lambda document, cell: cell.update({"memory_mb": 10**9}),   # too much
    lambda document, cell: document.update({"version": 2}),
])
def test_an_edited_claims_file_is_refused_and_changes_nothing(tmp_path,
                                                              edit):
    t = tracker(tmp_path)
    t.instance_claim(instance(), NODE)
    document = json.loads(t.claims_path.read_text())
    node = document["nodes"][NODE]
    edit(document, next(iter(node["instances"].values()))["cells"][0])
    t.claims_path.write_text(json.dumps(document))
    before = everything(t)
    with pytest.raises(ClaimsFileError, match="instance claims"):
        tracker(tmp_path).instance_claim(instance(vcpus=2), NODE)
    assert everything(t)[1] == before[1]


def test_a_claims_file_that_no_longer_fits_the_options_is_refused(tmp_path):
    """Changing cpu_dedicated_set under held claims is caught, not
    overcommitted: the claims name the CPUs no longer dedicated."""
    tracker(tmp_path).instance_claim(instance(), NODE)
    narrowed = tracker(tmp_path, dedicated="0-7")
    with pytest.raises(ClaimsFileError, match="not dedicated"):
        narrowed.instance_claim(instance(vcpus=2), NODE)


# -- concurrency ------------------------------------------------------------

@settings(max_examples=15, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture,
                                 HealthCheck.too_slow])
@given(sizes=st.lists(st.sampled_from([1, 2, 3, 4, 6, 8]), min_size=4,
                      max_size=12),
       policies=st.lists(st.sampled_from(["prefer", "isolate", "require"]),
                         min_size=12, max_size=12))
def test_concurrent_claims_from_many_threads_never_overcommit(
        tmp_path_factory, sizes, policies):
    state = tmp_path_factory.mktemp("threads")
    trackers = [tracker(state) for _ in range(3)]   # three agents, one dir
    won, lost = [], []

    def claim(index: int, vcpus: int) -> None:
        specs = {**PINNED, "hw:cpu_thread_policy": policies[index]}
        try:
            won.append(trackers[index % 3].instance_claim(
                instance(vcpus, 1024, specs), NODE))
        except DoesNotFit:
            lost.append(vcpus)

    threads = [threading.Thread(target=claim, args=(i, size))
               for i, size in enumerate(sizes)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    cpus = pinned_cpus(won)
    assert len(cpus) == len(set(cpus)), "a host CPU was taken twice"
    assert set(cpus) <= set(range(32))
    assert set(tracker(state).claims().get(NODE, {}).instances
               if won else ()) == {f.uuid for f in won}
    assert len(won) + len(lost) == len(sizes)


def test_two_processes_claiming_at_once_never_overcommit(tmp_path):
    script = textwrap.dedent(f"""
        import sys, uuid
        sys.path.insert(0, {str(pathlib.Path(__file__).parent)!r})
        from test_tracker_claims import tracker, instance, NODE
        from virtdriver.claims.fit import DoesNotFit
        import pathlib
        t = tracker(pathlib.Path({str(tmp_path)!r}))
        won = 0
        for _ in range(6):
            try:
                t.instance_claim(instance(vcpus=4), NODE)
                won += 1
            except DoesNotFit:
                pass
        print(won)
    """)
    runs = [subprocess.Popen([sys.executable, "-c", script],
                             stdout=subprocess.PIPE, text=True)
            for _ in range(2)]
    won = [int(run.communicate(timeout=120)[0]) for run in runs]
    assert sum(won) == 8                       # 32 CPUs / 4, no more
    claims = tracker(tmp_path).claims()[NODE]
    assert len(claims.instances) == 8
    cpus = pinned_cpus(claims.instances.values())
    assert len(cpus) == len(set(cpus)) == 32


# -- the no-op rebuild claim ------------------------------------------------

def test_rebuilding_a_pinned_instance_on_a_full_host_succeeds(tmp_path):
    t = tracker(tmp_path)
    image = {"hw_cpu_thread_policy": "prefer"}
    held = [t.instance_claim(instance(image=image), NODE) for _ in range(4)]
    before = everything(t)
    mine = instance(image=image, uuid=held[0].uuid)
    t.rebuild_claim(mine, {"hw_cpu_thread_policy": "prefer",
                           "os_distro": "debian"})
    assert everything(t) == before


def test_a_new_image_adding_numa_nodes_is_refused_and_changes_nothing(
        tmp_path):
    t = tracker(tmp_path)
    fit = t.instance_claim(instance(), NODE)
    before = everything(t)
    with pytest.raises(RebuildRefused) as refused:
        t.rebuild_claim(instance(uuid=fit.uuid), {"hw_numa_nodes": "2"})
    assert [c.kind for c in refused.value.conflicts] == ["numa"]
    assert "numa_nodes 1 → 2" in str(refused.value)
    assert everything(t) == before
    assert t.claims()[NODE].instances[fit.uuid] == fit


def test_shared_to_dedicated_is_refused_as_a_resources_change(tmp_path):
    t = tracker(tmp_path)
    floating = instance(vcpus=2, specs={})
    with pytest.raises(RebuildRefused) as refused:
        t.rebuild_claim(floating, {"hw_cpu_policy": "dedicated"})
    kinds = {c.kind for c in refused.value.conflicts}
    assert "resources" in kinds
    assert "VCPU" in str(refused.value) and "PCPU" in str(refused.value)


def nic_tree(t: ResourceTracker) -> tuple[str, str]:
    """Two NIC providers under the node's root, only A with the trait."""
    a = t.tree.new_child("nic-a", NODE)
    b = t.tree.new_child("nic-b", NODE)
    t.tree.add_traits(b, "CUSTOM_PHYSNET_FAST")
    return a, b


def test_a_sibling_provider_not_allocated_does_not_count(tmp_path):
    t = tracker(tmp_path)
    a, b = nic_tree(t)
    holder = instance(specs={}, allocations={a: {"CUSTOM_VF": 1}})
    with pytest.raises(RebuildRefused) as refused:
        t.rebuild_claim(holder, {"trait:CUSTOM_PHYSNET_FAST": "required"})
    assert "CUSTOM_PHYSNET_FAST" in str(refused.value)
    on_b = instance(specs={}, allocations={b: {"CUSTOM_VF": 1}})
    t.rebuild_claim(on_b, {"trait:CUSTOM_PHYSNET_FAST": "required"})


def test_forbidden_image_traits_are_checked_on_allocated_providers(
        tmp_path):
    t = tracker(tmp_path)
    cell = t.tree.record(f"{NODE}_NUMA0").uuid
    holder = instance(specs={}, allocations={cell: {"MEMORY_MB": 4096}})
    with pytest.raises(RebuildRefused) as refused:
        t.rebuild_claim(holder, {"trait:HW_CPU_HYPERTHREADING":
                                 "forbidden"})
    assert "HW_CPU_HYPERTHREADING" in str(refused.value)   # on the root


def test_a_sharing_provider_is_checked_with_its_traits_or_refused_clearly(
        tmp_path):
    t = tracker(tmp_path)
    disk = str(uuidlib.uuid4())
    holder = instance(specs={}, allocations={disk: {"DISK_GB": 10}})
    image = {"trait:CUSTOM_SSD": "required"}
    with pytest.raises(RebuildRefused, match="cannot verify"):
        t.rebuild_claim(holder, image)
    t.rebuild_claim(holder, image, sharing={
        disk: ProviderInfo(frozenset({"CUSTOM_SSD"}), None, "nfs")})
    with pytest.raises(RebuildRefused, match="CUSTOM_SSD"):
        t.rebuild_claim(holder, image, sharing={
            disk: ProviderInfo(frozenset(), None, "nfs")})


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(image=st.dictionaries(
    st.sampled_from(["hw_numa_nodes", "hw_cpu_policy", "hw_mem_page_size",
                     "hw_cpu_thread_policy", "trait:CUSTOM_X",
                     "trait:HW_CPU_HYPERTHREADING", "hw_numa_cpus.0"]),
    st.sampled_from(["1", "2", "dedicated", "shared", "large", "2048",
                     "isolate", "required", "forbidden", "0-3", "x"]),
    max_size=4))
def test_rebuild_claim_never_changes_tracker_state(tmp_path_factory, image):
    t = tracker(tmp_path_factory.mktemp("rebuild"))
    fit = t.instance_claim(instance(vcpus=4), NODE)
    before = everything(t)
    try:
        t.rebuild_claim(instance(vcpus=4, uuid=fit.uuid), image)
    except RebuildRefused as refused:
        assert refused.conflicts
    assert everything(t) == before
