"""claims.fit: a NUMA request onto a host's cells, one rule per test.

Hosts come from the fake host presets through ``host_resources`` (the path
the drivers use); a few are hand-built cells for cases no preset shows.
``numa2-ht``: 2 cells × 8 cores × 2 threads, cell 0 CPUs 0-15 with
siblings (n, n+8), cell 1 CPUs 16-31 with siblings (n, n+8); 32768 MiB and
1024 pages of 2 MiB per cell.
"""

from __future__ import annotations

import dataclasses

import os_resource_classes as orc
import pytest

from virtdriver.claims.constraints import numa_constraints
from virtdriver.claims.fit import DoesNotFit, fit
from virtdriver.claims.model import (
    CPU_DEDICATED, CPU_MIXED, CPU_SHARED, EMULATOR_ISOLATE, PAGE_ANY,
    PAGE_LARGE, PAGE_SMALL, CellRequest, ClaimError, Flavor, InvalidRequest,
    NUMARequest)
from virtdriver.claims.capacity import cell_cores, check_capacity
from virtdriver.claims.usage import (
    CellFit, ClaimConflict, HostUsage, InstanceFit, UnknownClaim, claim,
    inventory_usage, release)
from virtdriver.conf import PageReservation, PinningConfig
from virtdriver.drivers.fake_host import load_spec, spec_from_dict
from virtdriver.drivers.host_resources import (
    CellResources, HostResources, PagePool, host_resources)
from virtdriver.drivers.host_tree import cell_inventory, page_resource_class

RATIO = 4.0
EMPTY = HostUsage()


def make_host(spec="numa2-ht", *, dedicated=None, shared=None,
              reserved_mb=0, reserved_pages=()) -> HostResources:
    caps = (load_spec(spec) if isinstance(spec, str)
            else spec_from_dict(spec)).host_capabilities()
    return host_resources(caps, None, PinningConfig(
        cpu_dedicated_set=None if dedicated is None else frozenset(dedicated),
        cpu_shared_set=None if shared is None else frozenset(shared),
        reserved_host_memory_mb=reserved_mb,
        reserved_huge_pages=tuple(reserved_pages)))


#: numa2-ht with every CPU of cell 0 dedicated and every CPU of cell 1 shared.
def split_host(**kwargs) -> HostResources:
    return make_host(dedicated=range(16), shared=range(16, 32), **kwargs)


#: numa2-ht with every CPU dedicated.
def pinned_host(**kwargs) -> HostResources:
    return make_host(dedicated=range(32), **kwargs)


def request(vcpus=4, memory_mb=1024, *, nodes=1, policy=CPU_DEDICATED,
            thread=None, page=None, emulator=None, mask=None, realtime=()
            ) -> tuple[NUMARequest, Flavor]:
    """A request of ``nodes`` equal guest nodes and its flavor."""
    per_cpu, per_mb = vcpus // nodes, memory_mb // nodes
    cells = []
    for node in range(nodes):
        cpus = frozenset(range(node * per_cpu, (node + 1) * per_cpu))
        if policy == CPU_DEDICATED:
            pinned = cpus
        elif policy == CPU_MIXED:
            pinned = cpus & frozenset(mask)
        else:
            pinned = frozenset()
        cells.append(CellRequest(node, cpus, per_mb, pinned))
    dedicated = policy != CPU_SHARED
    return (NUMARequest(tuple(cells), policy,
                        (thread or "prefer") if dedicated else None,
                        emulator, page, frozenset(realtime)),
            Flavor(vcpus, memory_mb))


def fit_one(host, usage=EMPTY, uuid="i-1", ratio=RATIO, **kwargs
            ) -> InstanceFit:
    numa, flavor = request(**kwargs)
    return fit(numa, flavor, host, usage, cpu_allocation_ratio=ratio,
               instance_uuid=uuid)


def refusal(host, usage=EMPTY, ratio=RATIO, **kwargs) -> DoesNotFit:
    with pytest.raises(DoesNotFit) as info:
        fit_one(host, usage, uuid="refused", ratio=ratio, **kwargs)
    return info.value


def fill(host, count, ratio=RATIO, **kwargs) -> HostUsage:
    """Claim ``count`` instances of the same request one after another."""
    usage = EMPTY
    for n in range(count):
        usage = claim(usage, fit_one(host, usage, f"i-{n}", ratio, **kwargs),
                      host, cpu_allocation_ratio=ratio)
    return usage


def siblings(host, cpu) -> frozenset[int]:
    cell = next(c for c in host.cells if cpu in c.pcpus | c.vcpus)
    return next(frozenset(core) for core in cell_cores(cell) if cpu in core)


def free_pcpus(host, usage, cell_id=0) -> frozenset[int]:
    return host.cell(cell_id).pcpus - usage.cell(cell_id).used_cpus


class TestThreadPolicies:
    def test_prefer_packs_vcpus_onto_whole_cores(self):
        host = split_host()

        (cell,) = fit_one(host, vcpus=4).cells

        used = set(cell.pinning.values())
        assert cell.host_cell == 0
        assert len(used) == 4 and cell.reserved_cpus == frozenset()
        assert all(siblings(host, cpu) <= used for cpu in used)

    def test_prefer_falls_back_to_lone_threads_when_no_core_is_free(self):
        host = split_host()
        usage = claim(EMPTY, hand_fit("other", {v: v for v in range(8)}),
                      host)  # one thread of every core of cell 0

        (cell,) = fit_one(host, usage, vcpus=4).cells

        assert set(cell.pinning.values()) == {8, 9, 10, 11}

    def test_isolate_pins_one_thread_per_core_and_reserves_its_siblings(self):
        host = split_host()

        (cell,) = fit_one(host, vcpus=4, thread="isolate").cells

        pinned = set(cell.pinning.values())
        assert len({siblings(host, cpu) for cpu in pinned}) == 4
        assert cell.reserved_cpus == frozenset().union(
            *(siblings(host, cpu) for cpu in pinned)) - pinned

    def test_isolated_siblings_are_unusable_by_others(self):
        host = split_host()
        usage = fill(host, 1, vcpus=4, thread="isolate")

        assert len(free_pcpus(host, usage)) == 8
        after = claim(usage, fit_one(host, usage, "i-2", vcpus=8), host)
        taken = after.instances["i-2"].host_cpus
        assert not taken & usage.instances["i-0"].host_cpus
        error = refusal(host, after, vcpus=1)
        assert "cell 0: needs 1 dedicated CPU, 0 free" in str(error)

    def test_isolate_counts_whole_free_cores_in_its_refusal(self):
        host = split_host()
        usage = claim(EMPTY, hand_fit("other", {0: 0, 1: 1, 2: 2}), host)

        error = refusal(host, usage, vcpus=6, thread="isolate")

        assert ("cell 0: needs 6 dedicated CPUs with thread policy isolate, "
                "5 free cores") in str(error)
        assert "cell 1: needs 6 dedicated CPUs with thread policy isolate, " \
               "the cell has no dedicated CPUs" in str(error)

    def test_isolate_refuses_cores_with_a_shared_thread(self):
        # Dedicated 0-7, shared 8-15: every core of cell 0 has a shared
        # sibling, so no core can be kept for one guest alone.
        host = make_host(dedicated=range(8), shared=range(8, 32))

        error = refusal(host, vcpus=2, thread="isolate")

        assert "cell 0: needs 2 dedicated CPUs with thread policy isolate, " \
               "0 free cores" in str(error)

    def test_isolate_on_a_host_without_smt_is_plain_pinning(self):
        host = make_host("small", dedicated=range(4))

        (cell,) = fit_one(host, vcpus=4, thread="isolate").cells

        assert sorted(cell.pinning.values()) == [0, 1, 2, 3]
        assert cell.reserved_cpus == frozenset()

    def test_require_places_vcpus_on_thread_siblings(self):
        host = split_host()

        (cell,) = fit_one(host, vcpus=4, thread="require").cells

        pinned = set(cell.pinning.values())
        assert all(siblings(host, cpu) <= pinned for cpu in pinned)

    def test_require_with_an_odd_count_leaves_one_thread_to_others(self):
        host = split_host()

        usage = fill(host, 1, vcpus=3, thread="require")

        pinned = set(usage.instances["i-0"].pinning.values())
        halves = [cpu for cpu in pinned if not siblings(host, cpu) <= pinned]
        assert len(halves) == 1
        (lone,) = siblings(host, halves[0]) - pinned
        assert lone in free_pcpus(host, usage)

    def test_require_refuses_a_host_without_smt(self):
        host = make_host("small", dedicated=range(4))

        error = refusal(host, vcpus=2, thread="require")

        assert "cell 0: needs 2 dedicated CPUs with thread policy require, " \
               "the cell has no thread siblings (no SMT)" in str(error)

    def test_require_refuses_when_only_lone_threads_are_free(self):
        host = split_host()
        usage = claim(EMPTY, hand_fit("other", {v: v for v in range(8)}),
                      host)

        error = refusal(host, usage, vcpus=2, thread="require")

        assert "cell 0: needs 2 dedicated CPUs with thread policy require, " \
               "0 free as thread siblings" in str(error)


def hand_fit(uuid, pinning, host_cell=0, **kwargs) -> InstanceFit:
    return InstanceFit(uuid, (CellFit(0, host_cell, pinning, frozenset(),
                                      kwargs.pop("memory_mb", 256),
                                      **kwargs),), "prefer")


class TestEmulatorThreads:
    def test_isolated_emulator_threads_take_one_more_dedicated_cpu(self):
        host = split_host()

        inst = fit_one(host, vcpus=3, emulator=EMULATOR_ISOLATE)

        (cpu,) = inst.emulator_cpus
        assert cpu in host.cell(0).pcpus
        assert cpu not in inst.pinning.values()
        assert len(inst.host_cpus) == 4

    def test_the_emulator_cpu_is_a_spare_thread_of_a_used_core(self):
        host = split_host()

        inst = fit_one(host, vcpus=3, emulator=EMULATOR_ISOLATE)

        (cpu,) = inst.emulator_cpus
        assert siblings(host, cpu) & set(inst.pinning.values())

    def test_with_isolate_the_emulator_gets_a_whole_core(self):
        host = split_host()

        (cell,) = fit_one(host, vcpus=3, thread="isolate",
                          emulator=EMULATOR_ISOLATE).cells

        (cpu,) = cell.emulator_cpus
        assert siblings(host, cpu) <= cell.host_cpus
        assert len(cell.host_cpus) == 8

    def test_the_emulator_cpu_is_on_the_cell_of_guest_node_0(self):
        host = pinned_host()

        inst = fit_one(host, vcpus=4, nodes=2, emulator=EMULATOR_ISOLATE)

        by_node = {c.guest_cell: c for c in inst.cells}
        assert by_node[0].emulator_cpus and not by_node[1].emulator_cpus

    def test_the_extra_cpu_is_named_in_the_refusal(self):
        host = make_host("small", dedicated=range(4))

        error = refusal(host, vcpus=4, emulator=EMULATOR_ISOLATE)

        assert ("cell 0: needs 5 dedicated CPUs (4 vCPUs + 1 for the "
                "emulator threads), 4 free") in str(error)


class TestSharedCPUs:
    def test_shared_vcpus_are_placed_within_the_overcommit(self):
        host = split_host()  # cell 1: 16 shared CPUs

        usage = fill(host, 4, ratio=2.0, vcpus=8, policy=CPU_SHARED)

        assert usage.cell(1).shared_vcpus == 32
        error = refusal(host, usage, ratio=2.0, vcpus=1, policy=CPU_SHARED)
        assert ("cell 1: needs 1 shared vCPU, 0 free (16 shared CPUs × "
                "cpu_allocation_ratio 2)") in str(error)
        assert "cell 0: needs 1 shared vCPU, the cell has no shared CPUs" \
            in str(error)

    def test_one_instance_cannot_overcommit_a_cell_by_itself(self):
        host = split_host()

        error = refusal(host, ratio=16.0, vcpus=17, policy=CPU_SHARED)

        assert "cell 1: needs 17 shared vCPUs, more than the cell's 16 " \
               "shared CPUs" in str(error)

    def test_mixed_pins_the_mask_and_floats_the_rest(self):
        host = make_host(dedicated=range(8), shared=range(8, 32))

        (cell,) = fit_one(host, vcpus=4, policy=CPU_MIXED,
                          mask={0, 1}).cells

        assert set(cell.pinning) == {0, 1}
        assert set(cell.pinning.values()) <= host.cell(0).pcpus
        assert cell.shared_vcpus == {2, 3}

    def test_shared_cells_are_tried_least_used_first(self):
        host = make_host()  # every CPU shared

        usage = fill(host, 2, vcpus=2, policy=CPU_SHARED)

        assert {f.cells[0].host_cell for f in usage.instances.values()} \
            == {0, 1}


class TestMemory:
    def test_small_pages_exclude_the_memory_held_in_huge_pages(self):
        host = split_host()  # 32768 MiB, 2048 MiB of it in 2 MiB pages

        fit_one(host, vcpus=2, memory_mb=30720)
        error = refusal(host, vcpus=2, memory_mb=30722)

        assert "cell 0: needs 30722 MiB of memory, 30720 MiB free" \
            in str(error)

    def test_the_host_memory_reservation_is_taken_from_cell_0(self):
        host = pinned_host(reserved_mb=1024)

        usage = fill(host, 1, vcpus=2, memory_mb=30000)

        assert usage.instances["i-0"].cells[0].host_cell == 1
        error = refusal(host, usage, vcpus=2, memory_mb=30000)
        assert "cell 0: needs 30000 MiB of memory, 29696 MiB free" \
            in str(error)
        assert "cell 1: needs 30000 MiB of memory, 720 MiB free" in str(error)

    def test_a_page_size_takes_pages_of_that_size(self):
        host = split_host()

        usage = fill(host, 1, vcpus=2, memory_mb=2048, page=2048)

        (cell,) = usage.instances["i-0"].cells
        assert (cell.page_size_kib, cell.pages) == (2048, 1024)
        assert usage.cell(0).small_memory_mb == 0
        error = refusal(host, usage, vcpus=2, memory_mb=2, page=2048)
        assert "cell 0: needs 2 MiB of 2048 KiB pages, 0 MiB free" \
            in str(error)

    def test_a_page_size_the_host_lacks_is_named(self):
        error = refusal(split_host(), vcpus=2, page=1048576)

        assert ("cell 0: needs 1024 MiB of 1048576 KiB pages, the cell has "
                "no 1048576 KiB pages (page sizes in KiB: 4, 2048)"
                ) in str(error)

    def test_memory_must_be_whole_pages(self):
        error = refusal(split_host(), vcpus=2, memory_mb=1025, page=2048)

        assert "needs 1025 MiB of 2048 KiB pages, not a whole number of " \
               "pages" in str(error)

    def test_large_takes_the_largest_size_that_fits(self):
        host = make_host("numa4-large", dedicated=range(128))

        assert fit_one(host, memory_mb=4096, page=PAGE_LARGE
                       ).cells[0].page_size_kib == 1048576
        assert fit_one(host, memory_mb=1536, page=PAGE_LARGE
                       ).cells[0].page_size_kib == 2048

    def test_large_never_falls_back_to_small_pages(self):
        host = split_host()
        usage = fill(host, 1, vcpus=2, memory_mb=2048, page=PAGE_LARGE)

        error = refusal(host, usage, vcpus=2, memory_mb=1024, page=PAGE_LARGE)

        assert "cell 0: needs 1024 MiB of huge pages, free: 0 MiB of 2048 " \
               "KiB pages" in str(error)

    def test_any_prefers_huge_pages_then_small(self):
        host = split_host()

        usage = fill(host, 2, vcpus=2, memory_mb=2048, page=PAGE_ANY)

        sizes = [f.cells[0].page_size_kib for f in usage.instances.values()]
        assert sizes == [2048, None]

    def test_the_small_page_size_means_small_pages(self):
        for page in (4, PAGE_SMALL):
            (cell,) = fit_one(split_host(), memory_mb=2048, page=page).cells
            assert cell.page_size_kib is None

    def test_reserved_huge_pages_are_not_offered(self):
        host = split_host(reserved_pages=[PageReservation(0, 2048, 512)])

        error = refusal(host, vcpus=2, memory_mb=1026, page=2048)

        assert "cell 0: needs 1026 MiB of 2048 KiB pages, 1024 MiB free" \
            in str(error)

    def test_a_cell_of_unknown_memory_offers_only_its_pages(self):
        cell = CellResources(0, frozenset({0, 1}), frozenset(), {},
                             None, 0, None, {2048: PagePool(2048, 512)})
        host = HostResources((cell,), PinningConfig())

        assert fit_one(host, vcpus=2, memory_mb=1024, page=2048).cells
        error = refusal(host, vcpus=2, memory_mb=1024)
        assert "cell 0: needs 1024 MiB of memory, the cell's memory is " \
               "unknown" in str(error)


class TestCells:
    def test_guest_nodes_go_to_distinct_host_cells(self):
        inst = fit_one(pinned_host(), vcpus=4, nodes=2)

        assert sorted(c.host_cell for c in inst.cells) == [0, 1]
        for c in inst.cells:
            assert set(c.pinning.values()) <= pinned_host().cell(
                c.host_cell).pcpus

    def test_more_guest_nodes_than_host_cells_is_refused(self):
        error = refusal(pinned_host(), vcpus=3, memory_mb=3072, nodes=3)

        assert "host: needs 3 NUMA cells, it has 2" in str(error)

    def test_dedicated_instances_spread_to_the_cell_with_most_free_cpus(self):
        host = pinned_host()

        usage = fill(host, 2, vcpus=4)

        assert [f.cells[0].host_cell for f in usage.instances.values()] \
            == [0, 1]

    def test_full_cells_are_refused_naming_every_cell(self):
        host = pinned_host()
        usage = fill(host, 2, vcpus=16)

        error = refusal(host, usage, vcpus=2)

        assert error.reasons == (
            "cell 0: needs 2 dedicated CPUs, 0 free",
            "cell 1: needs 2 dedicated CPUs, 0 free")
        assert str(error).startswith(
            "instance refused does not fit on this host: cell 0: needs 2 "
            "dedicated CPUs, 0 free; cell 1: ")
        assert "release instances" in str(error)

    def test_every_lack_of_a_cell_is_named(self):
        host = split_host()
        usage = fill(host, 1, vcpus=16, memory_mb=2048, page=2048)

        error = refusal(host, usage, vcpus=2, memory_mb=2048, page=2048)

        assert ("cell 0: needs 2 dedicated CPUs, 0 free and 2048 MiB of 2048 "
                "KiB pages, 0 MiB free") in str(error)

    def test_nodes_that_fit_only_one_cell_between_them_are_explained(self):
        host = split_host()  # only cell 0 has dedicated CPUs

        error = refusal(host, vcpus=4, nodes=2)

        assert "cell 1: needs 2 dedicated CPUs, the cell has no dedicated " \
               "CPUs" in str(error)
        assert "host: guest nodes 0-1 fit only on cells 0, and each guest " \
               "node needs a cell of its own" in str(error)

    def test_unlike_guest_nodes_are_named_apart(self):
        host = split_host()
        numa = NUMARequest((CellRequest(0, frozenset({0}), 512,
                                        frozenset({0})),
                            CellRequest(1, frozenset({1}), 512)),
                           CPU_MIXED, "prefer")
        usage = fill(host, 1, vcpus=16)

        with pytest.raises(DoesNotFit) as info:
            fit(numa, Flavor(2, 1024), host, usage, cpu_allocation_ratio=1,
                instance_uuid="x")

        assert ("cell 0: guest node 0 needs 1 dedicated CPU, 0 free, guest "
                "node 1 needs 1 shared vCPU, the cell has no shared CPUs"
                ) in str(info.value)


class TestNoNUMATopology:
    def test_it_is_charged_to_the_host_not_a_cell(self):
        host = make_host()
        inst = fit(None, Flavor(4, 2048), host, EMPTY,
                   cpu_allocation_ratio=RATIO, instance_uuid="float")

        usage = claim(EMPTY, inst, host)

        assert inst.cells == () and usage.cells == {}
        assert inventory_usage(usage, host)[None] == {orc.VCPU: 4,
                                                      orc.MEMORY_MB: 2048}
        assert inventory_usage(usage, host)[0][orc.VCPU] == 0

    def test_its_vcpus_count_against_the_host_wide_overcommit(self):
        host = split_host()  # 16 shared CPUs in all
        usage = claim(EMPTY, fit(None, Flavor(16, 1024), host, EMPTY,
                                 cpu_allocation_ratio=1.0,
                                 instance_uuid="float"), host,
                      cpu_allocation_ratio=1.0)

        error = refusal(host, usage, ratio=1.0, vcpus=1, policy=CPU_SHARED)

        assert "host: needs 1 shared vCPU, 0 free (16 shared CPUs × " \
               "cpu_allocation_ratio 1)" in str(error)

    def test_its_memory_counts_against_the_host_small_pages(self):
        host = split_host()  # 2 × 30720 MiB of small pages
        usage = claim(EMPTY, fit(None, Flavor(1, 61000), host, EMPTY,
                                 cpu_allocation_ratio=RATIO,
                                 instance_uuid="float"), host)

        error = refusal(host, usage, vcpus=2, memory_mb=1024)
        assert "host: needs 1024 MiB of memory, 440 MiB free" in str(error)
        assert fit_one(host, usage, vcpus=2, memory_mb=2048, page=2048)

    def test_a_host_without_shared_cpus_refuses_it(self):
        with pytest.raises(DoesNotFit, match="host: needs 2 shared vCPUs, the "
                           "host has no shared CPUs"):
            fit(None, Flavor(2, 512), pinned_host(), EMPTY,
                cpu_allocation_ratio=RATIO, instance_uuid="float")


class TestRequestChecks:
    def test_realtime_vcpus_must_be_dedicated(self):
        with pytest.raises(InvalidRequest, match="realtime vCPUs 3 are not "
                           "dedicated"):
            fit_one(make_host(dedicated=range(8), shared=range(8, 32)),
                    vcpus=4, policy=CPU_MIXED, mask={0, 1, 2}, realtime={3})

    def test_dedicated_realtime_vcpus_fit(self):
        inst = fit_one(split_host(), vcpus=4, realtime={2, 3})

        assert set(inst.pinning) == {0, 1, 2, 3}

    def test_a_request_not_of_the_flavor_is_refused(self):
        numa, _ = request(vcpus=4)
        with pytest.raises(InvalidRequest, match="4 vCPUs and 1024 MiB"):
            fit(numa, Flavor(8, 1024), split_host(), EMPTY,
                cpu_allocation_ratio=RATIO, instance_uuid="x")

    def test_an_instance_cannot_fit_twice(self):
        usage = fill(split_host(), 1)

        with pytest.raises(ClaimConflict, match="already holds a claim"):
            fit_one(split_host(), usage, "i-0")

    @pytest.mark.parametrize("ratio", [0.0, -1.0, float("nan")])
    def test_the_ratio_must_be_positive(self, ratio):
        with pytest.raises(ClaimError, match="cpu_allocation_ratio"):
            fit_one(split_host(), ratio=ratio)


class TestClaimAndRelease:
    def test_release_gives_back_exactly_what_claim_took(self):
        host = split_host()
        before = fill(host, 2, vcpus=3, thread="isolate", page=2048,
                      memory_mb=512)
        inst = fit_one(host, before, "new", vcpus=2, emulator="isolate")

        after = claim(before, inst, host)

        assert after != before
        assert release(after, "new") == before
        assert release(after, "new").cells == before.cells

    def test_releasing_an_unknown_instance_is_a_clear_error(self):
        usage = fill(split_host(), 1)

        with pytest.raises(UnknownClaim, match="instance nope holds no claim "
                           "on this host .claims held: i-0."):
            release(usage, "nope")

    def test_a_fit_on_stale_usage_cannot_double_pin(self):
        host = split_host()
        first = fit_one(host, EMPTY, "a", vcpus=16)
        second = fit_one(host, EMPTY, "b", vcpus=2)
        usage = claim(EMPTY, first)

        with pytest.raises(ClaimConflict, match="instances.b: host CPU 0 is "
                           "already taken by instance a"):
            claim(usage, second)

    def test_with_the_host_a_stale_fit_cannot_overcommit_pages(self):
        host = make_host()  # all shared: pinning cannot clash
        first = fit_one(host, EMPTY, "a", policy=CPU_SHARED, vcpus=1,
                        memory_mb=2048, page=2048)
        second = fit_one(host, EMPTY, "b", policy=CPU_SHARED, vcpus=1,
                         memory_mb=2048, page=2048)
        usage = claim(EMPTY, first, host)
        assert second.cells[0].host_cell == first.cells[0].host_cell

        with pytest.raises(ClaimConflict, match="cell 0: 2048 pages of 2048 "
                           "KiB used, above the 1024 available"):
            claim(usage, second, host)

    def test_a_uuid_claims_once(self):
        host = split_host()
        usage = fill(host, 1)

        with pytest.raises(ClaimConflict, match="already holds a claim"):
            claim(usage, hand_fit("i-0", {0: 15}), host)

    def test_claims_of_a_fit_always_pass_the_capacity_check(self):
        host = split_host()
        usage = fill(host, 2, vcpus=4, thread="isolate", page=PAGE_ANY,
                     memory_mb=1024)
        usage = claim(usage, fit_one(host, usage, "s", policy=CPU_SHARED,
                                     vcpus=16, memory_mb=30720), host)

        assert check_capacity(usage, host) == []


class TestInventoryUsage:
    def test_usage_per_cell_in_the_tree_resource_classes(self):
        host = split_host()
        usage = fill(host, 1, vcpus=4, thread="isolate", page=2048,
                     memory_mb=1024)
        usage = claim(usage, fit_one(host, usage, "s", policy=CPU_SHARED,
                                     vcpus=3, memory_mb=512), host)

        rows = inventory_usage(usage, host)

        page_rc = page_resource_class(2048)
        # The pages, not the same memory again as MEMORY_MB.
        assert rows[0] == {orc.PCPU: 8, orc.MEMORY_MB: 0, page_rc: 512}
        assert rows[1] == {orc.VCPU: 3, orc.MEMORY_MB: 512, page_rc: 0}
        assert None not in rows

    def test_the_classes_are_those_of_the_cell_inventories(self):
        host = make_host("numa4-large", dedicated=range(0, 64, 2),
                         shared=range(1, 64, 2))

        rows = inventory_usage(EMPTY, host)

        for cell in host.cells:
            assert set(rows[cell.cell_id]) == set(cell_inventory(
                (cell,), RATIO, 1.0))
            assert set(rows[cell.cell_id].values()) == {0}


def test_hand_built_cells_without_siblings_are_lone_cores():
    cell = dataclasses.replace(split_host().cell(0), siblings={})

    assert cell_cores(cell) == tuple((cpu,) for cpu in range(16))


class TestFromFlavorAndImage:
    """The path the tracker takes: numa_constraints, then fit and claim."""

    @staticmethod
    def place(host, extra_specs, image=None, vcpus=4, memory_mb=2048,
              usage=EMPTY, uuid="i-1") -> InstanceFit:
        flavor = Flavor(vcpus, memory_mb, extra_specs)
        return fit(numa_constraints(flavor, image or {}), flavor, host,
                   usage, cpu_allocation_ratio=RATIO, instance_uuid=uuid)

    def test_a_pinned_isolated_two_node_flavor_on_huge_pages(self):
        host = pinned_host()

        inst = self.place(host, {"hw:cpu_policy": "dedicated",
                                 "hw:cpu_thread_policy": "isolate",
                                 "hw:numa_nodes": "2",
                                 "hw:mem_page_size": "2MB"})

        assert sorted(c.host_cell for c in inst.cells) == [0, 1]
        assert all(c.page_size_kib == 2048 and len(c.pinning) == 2
                   and len(c.reserved_cpus) == 2 for c in inst.cells)

    def test_isolated_emulator_threads_take_a_fifth_cpu(self):
        host = split_host()

        inst = self.place(host, {"hw:cpu_policy": "dedicated",
                                 "hw:emulator_threads_policy": "isolate"})

        assert len(inst.host_cpus) == 5 and len(inst.emulator_cpus) == 1

    def test_a_flavor_without_numa_settings_floats(self):
        inst = self.place(make_host(), {})

        assert inst.cells == () and inst.floating_vcpus == 4

    def test_a_full_host_refuses_naming_the_cells(self):
        host = split_host()
        specs = {"hw:cpu_policy": "dedicated"}
        usage = EMPTY
        for n in range(4):
            usage = claim(usage, self.place(host, specs, usage=usage,
                                            uuid=f"i-{n}"), host)

        with pytest.raises(DoesNotFit, match="cell 0: needs 4 dedicated "
                           "CPUs, 0 free; cell 1: needs 4 dedicated CPUs, "
                           "the cell has no dedicated CPUs"):
            self.place(host, specs, usage=usage, uuid="one-more")
