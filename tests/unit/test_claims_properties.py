"""Properties of numa_constraints, consumption and rebuild_conflicts over
generated flavors, images and provider trees."""

from __future__ import annotations

import os_resource_classes as orc
import os_traits
from hypothesis import given, settings
from hypothesis import strategies as st

from virtdriver.claims.constraints import numa_constraints
from virtdriver.claims.consumption import consumption
from virtdriver.claims.model import (
    CPU_POLICIES, PAGE_SIZES, THREAD_POLICIES, Flavor, Instance,
    InvalidRequest)
from virtdriver.claims.rebuild import KINDS, ProviderInfo, rebuild_conflicts

HT = os_traits.HW_CPU_HYPERTHREADING
TRAITS = ["CUSTOM_A", "CUSTOM_B", "CUSTOM_C", os_traits.COMPUTE_NODE]

FLAVOR_VALUES = {
    "hw:numa_nodes": ["1", "2", "3", "0", "x"],
    "hw:numa_cpus.0": ["0", "0-1", "0-3", "^0"],
    "hw:numa_cpus.1": ["1", "1-3", "2-3"],
    "hw:numa_mem.0": ["1024", "2048", "0"],
    "hw:numa_mem.1": ["1024", "2048", "3072"],
    "hw:cpu_policy": ["shared", "dedicated", "mixed", "bad"],
    "hw:cpu_thread_policy": ["prefer", "isolate", "require", "bad"],
    "hw:cpu_dedicated_mask": ["^0", "0-1", "1", "0-9"],
    "hw:cpu_realtime": ["yes", "no", "maybe"],
    "hw:cpu_realtime_mask": ["^0", "0-1", "^0-1", "x"],
    "hw:emulator_threads_policy": ["share", "isolate", "bad"],
    "hw:mem_page_size": ["small", "large", "any", "2048", "2MB", "1GB", "x"],
    "hw:locked_memory": ["true", "false", "sure"],
    f"resources:{orc.VCPU}": ["0", "2", "4"],
    f"resources:{orc.PCPU}": ["2", "4", "5"],
    f"trait:{HT}": ["required", "forbidden"],
    "trait:CUSTOM_A": ["required", "forbidden"],
}
IMAGE_VALUES = {
    "hw_numa_nodes": ["1", "2", "4", "0"],
    "hw_numa_cpus.0": ["0", "0-1"],
    "hw_numa_cpus.1": ["1-3", "2-3"],
    "hw_numa_mem.0": ["1024", "2048"],
    "hw_numa_mem.1": ["1024", "2048", "3072"],
    "hw_cpu_policy": [*CPU_POLICIES, "bad"],
    "hw_cpu_thread_policy": [*THREAD_POLICIES, "bad"],
    "hw_cpu_realtime_mask": ["^0", "^0-1", "1-3"],
    "hw_mem_page_size": [*PAGE_SIZES, "2048", "1GB"],
    "hw_locked_memory": ["true", "false"],
    f"trait:{HT}": ["required", "forbidden"],
    **{f"trait:{t}": ["required", "forbidden"] for t in TRAITS},
    "os_distro": ["debian", "fedora"],
}


def settings_dict(values, free_text=False):
    def pick(keys):
        return st.fixed_dictionaries({
            k: (st.one_of(st.sampled_from(values[k]), st.text(max_size=5))
                if free_text else st.sampled_from(values[k]))
            for k in keys})
    return st.lists(st.sampled_from(sorted(values)), unique=True,
                    max_size=6).flatmap(pick)


flavors = st.builds(Flavor, st.sampled_from([1, 2, 4, 8]),
                    st.sampled_from([1024, 2048, 4096]),
                    settings_dict(FLAVOR_VALUES))
images = settings_dict(IMAGE_VALUES)


@st.composite
def coherent(draw):
    """A flavor and image built to be mostly valid, covering every policy,
    node split, page size and trait source."""
    vcpus = draw(st.sampled_from([2, 4, 8]))
    memory = draw(st.sampled_from([2048, 4096]))
    specs, props = {}, {}

    def put(source, name, value):
        if source == "flavor":
            specs[f"hw:{name}"] = value
        else:
            props[f"hw_{name}"] = value

    policy = draw(st.sampled_from([None, *CPU_POLICIES]))
    if policy:
        put(draw(st.sampled_from(["flavor", "image"])), "cpu_policy", policy)
    if policy == "mixed":
        if draw(st.booleans()):
            specs["hw:cpu_dedicated_mask"] = "^0"
        else:
            specs.update({"hw:cpu_realtime": "yes",
                          "hw:cpu_realtime_mask": "^0"})
    if policy in ("dedicated", "mixed"):
        thread = draw(st.sampled_from([None, "flavor", "image", "trait"]))
        if thread == "trait":
            specs[f"trait:{HT}"] = draw(st.sampled_from(["required",
                                                         "forbidden"]))
        elif thread:
            put(thread, "cpu_thread_policy",
                draw(st.sampled_from(THREAD_POLICIES)))
        emulator = draw(st.sampled_from([None, "share", "isolate"]))
        if emulator:
            specs["hw:emulator_threads_policy"] = emulator
        if policy == "dedicated" and draw(st.booleans()):
            specs.update({"hw:cpu_realtime": "yes",
                          "hw:cpu_realtime_mask": "^0"})
    nodes = draw(st.sampled_from([None, 1, 2]))
    if nodes:
        put(draw(st.sampled_from(["flavor", "image"])), "numa_nodes",
            str(nodes))
    if nodes == 2 and draw(st.booleans()):
        source = draw(st.sampled_from(["flavor", "image"]))
        put(source, "numa_cpus.0", "0")
        put(source, "numa_cpus.1", f"1-{vcpus - 1}")
        put(source, "numa_mem.0", str(memory // 2))
        put(source, "numa_mem.1", str(memory // 2))
    page = draw(st.sampled_from([None, "small", "2048", "large", "any"]))
    if page:
        specs["hw:mem_page_size"] = page
        if page in ("large", "any") and draw(st.booleans()):
            props["hw_mem_page_size"] = draw(st.sampled_from(
                ["small", "2MB", "1GB", "large"]))
        if draw(st.booleans()):
            put(draw(st.sampled_from(["flavor", "image"])), "locked_memory",
                "true")
    for trait in draw(st.sets(st.sampled_from(TRAITS))):
        props[f"trait:{trait}"] = draw(st.sampled_from(["required",
                                                        "forbidden"]))
    return Flavor(vcpus, memory, specs), props


def mutated(props):
    """``props`` with a few keys dropped, changed or added."""
    return st.tuples(
        st.sets(st.sampled_from(sorted(props))) if props else st.just(set()),
        settings_dict(IMAGE_VALUES)).map(
        lambda drop_add: {**{k: v for k, v in props.items()
                             if k not in drop_add[0]}, **drop_add[1]})


pairs = st.one_of(st.tuples(flavors, images), coherent())


def outcome(flavor, props):
    try:
        return "ok", numa_constraints(flavor, props)
    except InvalidRequest as exc:
        return "invalid", tuple((p.message, dict(p.keys))
                                for p in exc.problems)


SETTINGS = settings(max_examples=200, deadline=None, derandomize=True)


def test_the_coherent_strategy_mostly_makes_valid_topologies():
    seen = []

    @settings(max_examples=200, deadline=None, derandomize=True)
    @given(coherent())
    def collect(pair):
        seen.append(outcome(*pair))
    collect()
    with_topology = [r for kind, r in seen if kind == "ok" and r is not None]
    assert len(with_topology) > len(seen) // 2


@SETTINGS
@given(pairs)
def test_numa_constraints_is_deterministic(pair):
    flavor, props = pair
    first = outcome(flavor, props)
    assert outcome(flavor, props) == first
    shuffled = Flavor(flavor.vcpus, flavor.memory_mb,
                      dict(reversed(list(flavor.extra_specs.items()))))
    assert outcome(shuffled, dict(reversed(list(props.items())))) == first


@SETTINGS
@given(st.builds(Flavor, st.integers(-2, 10), st.integers(-2, 5000),
                 settings_dict(FLAVOR_VALUES, free_text=True)),
       settings_dict(IMAGE_VALUES, free_text=True))
def test_bad_input_is_only_ever_an_invalid_request(flavor, props):
    kind, result = outcome(flavor, props)
    if kind == "invalid":
        assert result, "an InvalidRequest always carries a problem"
        for message, keys in result:
            assert "; " in message and "\n" not in message
            assert keys


@SETTINGS
@given(pairs)
def test_a_valid_request_splits_the_flavor_exactly(pair):
    flavor, props = pair
    kind, request = outcome(flavor, props)
    if kind != "ok" or request is None:
        return
    every = set(range(flavor.vcpus))
    seen = [cpu for cell in request.cells for cpu in cell.cpus]
    assert sorted(seen) == sorted(every)
    assert request.memory_mb == flavor.memory_mb
    assert [c.id for c in request.cells] == list(range(len(request.cells)))
    for cell in request.cells:
        assert cell.cpus and cell.dedicated_cpus <= cell.cpus
    assert request.realtime_cpus <= request.dedicated_cpus
    pinned = request.dedicated_cpus
    assert (request.cpu_policy == "dedicated") == (pinned == every)
    assert (request.cpu_policy == "shared") == (not pinned)


@SETTINGS
@given(pairs)
def test_consumption_counts_every_vcpu_once(pair):
    flavor, props = pair
    kind, request = outcome(flavor, props)
    explicit = any(k.startswith("resources") for k in flavor.extra_specs)
    if kind != "ok" or explicit:
        return
    used = consumption(flavor, request)
    extra = 1 if request is not None and request.emulator_threads_isolated \
        else 0
    assert used.get(orc.VCPU, 0) + used.get(orc.PCPU, 0) == \
        flavor.vcpus + extra
    # Memory counts once: as MEMORY_MB (small pages), as pages of one
    # huge size (never both), or not at all for a page size the claim
    # chooses (large, any).
    pages = {rc: n for rc, n in used.items()
             if rc.startswith("CUSTOM_MEM_PAGE_SIZE_")}
    page_size = None if request is None else request.page_size
    if page_size in (None, "small", 4):
        assert used[orc.MEMORY_MB] == flavor.memory_mb and not pages
    elif isinstance(page_size, int):
        assert orc.MEMORY_MB not in used
        assert pages == {f"CUSTOM_MEM_PAGE_SIZE_{page_size}":
                         flavor.memory_mb * 1024 // page_size}
    else:
        assert orc.MEMORY_MB not in used and not pages


ROOT, CELL, NIC, OUTSIDE = "root", "cell", "nic", "sharing"


@st.composite
def provider_facts(draw):
    """A small tree (root, a cell, a NIC) and maybe a sharing provider, with
    random traits; some providers may be left unknown."""
    facts = {ROOT: ProviderInfo(frozenset(draw(st.sets(st.sampled_from(
        TRAITS)))), None, "cn")}
    for uuid in (CELL, NIC):
        facts[uuid] = ProviderInfo(frozenset(draw(st.sets(st.sampled_from(
            TRAITS)))), ROOT, uuid)
    facts[OUTSIDE] = ProviderInfo(frozenset(draw(st.sets(st.sampled_from(
        TRAITS)))), None, "disk")
    unknown = draw(st.sets(st.sampled_from(sorted(facts))))
    return {u: f for u, f in facts.items() if u not in unknown}


allocations = st.sets(st.sampled_from([CELL, NIC, OUTSIDE]), min_size=1).map(
    lambda rps: {rp: {orc.VCPU: 1} for rp in sorted(rps)})


@SETTINGS
@given(pairs, allocations, provider_facts())
def test_the_instances_own_image_always_rebuilds(pair, held, facts):
    flavor, props = pair
    if outcome(flavor, props)[0] != "ok":
        return
    vm = Instance("vm", flavor, props, held)
    assert rebuild_conflicts(vm, dict(props), facts) == []
    # The same properties in another order, plus one that means nothing
    # to the claims, go through every check and still pass.
    again = dict(reversed(list(props.items())))
    again["os_version"] = "12"
    assert rebuild_conflicts(vm, again, facts) == []


@SETTINGS
@given(pairs.flatmap(lambda p: st.tuples(st.just(p), mutated(p[1]))),
       allocations, provider_facts())
def test_no_conflict_means_nothing_changes(pair_new, held, facts):
    """rebuild_conflicts never raises; when it finds nothing, the NUMA
    request and the consumption really are the same."""
    (flavor, old), new = pair_new
    vm = Instance("vm", flavor, old, held)
    conflicts = rebuild_conflicts(vm, new, facts)
    assert all(c.kind in KINDS and "; " in c.message for c in conflicts)
    if conflicts:
        return
    before, after = outcome(flavor, old), outcome(flavor, new)
    assert before == after or old == new
    if before[0] == "ok" and after[0] == "ok":
        assert consumption(flavor, before[1]) == consumption(flavor, after[1])
