"""host_resources: per-cell PCPU/VCPU, siblings, memory and pages, checked."""

from __future__ import annotations

import dataclasses

import pytest

from tests.corpus import corpus_files
from virtdriver.capabilities import parse_host_capabilities
from virtdriver.capabilities.host import (
    CellCPU, HostCapabilities, NUMACell, Pages)
from virtdriver.conf import PageReservation, PinningConfig
from virtdriver.drivers.host_resources import (
    HostResourceError,
    PagePool,
    host_resources,
)

NO_RESERVE = PinningConfig(reserved_host_memory_mb=0)


@pytest.fixture
def load(corpus_dir):
    def load(name: str) -> HostCapabilities:
        path = corpus_dir / "hostcaps" / name
        return parse_host_capabilities(path.read_text(), path.name)
    return load


@pytest.fixture
def real(load):
    """32 CPUs in one cell, thread siblings (n, n+16), 61907 MiB."""
    return load("caps-qemu-real-full.xml")


@pytest.fixture
def four_cells(load):
    """4 cells of 4 CPUs, 1-4 GiB, 4K/2M/1G pages, no SMT."""
    return load("vircaps-x86_64-basic.xml")


def pinning(dedicated=None, shared=None, **kwargs) -> PinningConfig:
    return dataclasses.replace(
        NO_RESERVE, **kwargs,
        cpu_dedicated_set=None if dedicated is None
        else frozenset(dedicated),
        cpu_shared_set=None if shared is None else frozenset(shared))


def problems(host, pin, online=None) -> tuple[str, ...]:
    with pytest.raises(HostResourceError) as info:
        host_resources(host, online, pin)
    return info.value.problems


class TestCPUs:
    def test_neither_set_means_every_online_cpu_is_shared(self, real):
        result = host_resources(real, None, NO_RESERVE)

        (cell,) = result.cells
        assert cell.vcpus == frozenset(range(32))
        assert cell.pcpus == frozenset()
        assert cell.siblings[0] == {0, 16}
        assert cell.siblings[31] == {15, 31}

    def test_offline_cpus_are_left_out_with_their_sibling_links(self, real):
        online = frozenset(range(32)) - {16, 17}

        (cell,) = host_resources(real, online, NO_RESERVE).cells

        assert cell.vcpus == online
        assert cell.siblings[0] == {0}
        assert 16 not in cell.siblings

    def test_dedicated_only_leaves_no_shared_cpus_as_in_nova(self, real):
        (cell,) = host_resources(real, None,
                                 pinning(dedicated=range(4, 32))).cells

        assert cell.pcpus == frozenset(range(4, 32))
        assert cell.vcpus == frozenset()
        # 0-3 are the host's: 16-19 lose those siblings.
        assert cell.siblings[16] == {16}
        assert cell.siblings[20] == {4, 20}
        assert set(cell.siblings) == set(range(4, 32))

    def test_shared_only(self, real):
        (cell,) = host_resources(real, None, pinning(shared=range(8))).cells
        assert cell.vcpus == frozenset(range(8))
        assert cell.pcpus == frozenset()
        assert cell.siblings[0] == {0}

    def test_siblings_span_both_pools(self, real):
        (cell,) = host_resources(
            real, None, pinning(dedicated=range(16), shared=range(16, 32))
        ).cells
        assert cell.siblings[0] == {0, 16}
        assert cell.siblings[16] == {0, 16}

    def test_cells_get_their_own_cpus(self, four_cells):
        result = host_resources(four_cells, None, pinning(
            dedicated=[4, 5, 6, 7, 12, 13], shared=[0, 1, 8, 9, 10, 11]))

        assert [(c.cell_id, sorted(c.pcpus), sorted(c.vcpus))
                for c in result.cells] == [
            (0, [], [0, 1]), (1, [4, 5, 6, 7], []),
            (2, [], [8, 9, 10, 11]), (3, [12, 13], [])]
        assert result.pcpus == {4, 5, 6, 7, 12, 13}
        assert result.vcpus == {0, 1, 8, 9, 10, 11}
        assert result.cell(3).siblings == {12: {12}, 13: {13}}
        assert result.cell(7) is None

    def test_online_cpus_outside_every_cell_are_not_offered(self,
                                                            four_cells):
        result = host_resources(four_cells, frozenset(range(64)), NO_RESERVE)
        assert result.vcpus == frozenset(range(16))

    def test_cpu_without_siblings_is_its_own(self):
        host = HostCapabilities(source="t", cells=(NUMACell(
            id=0, cpus=(CellCPU(id=0), CellCPU(id=1))),))
        (cell,) = host_resources(host, None, NO_RESERVE).cells
        assert cell.siblings == {0: {0}, 1: {1}}


class TestCPUErrors:
    def test_cpus_the_host_lacks(self, real):
        assert problems(real, pinning(dedicated=range(30, 34))) == (
            "[compute] cpu_dedicated_set names CPUs 32-33, which this host "
            "does not have (its NUMA cells hold CPUs 0-31); remove them "
            "from the option",)

    def test_offline_cpu(self, real):
        online = frozenset(range(32)) - {5}
        assert problems(real, pinning(shared=range(8)), online) == (
            "[compute] cpu_shared_set names CPU 5, which is offline "
            "(online: 0-4,6-31); bring it online or remove it from the "
            "option",)

    def test_cpus_in_both_sets(self, real):
        assert problems(real, pinning(dedicated=range(2, 8),
                                      shared=range(4))) == (
            "CPUs 2-3 are in both [compute] cpu_dedicated_set and "
            "[compute] cpu_shared_set; a CPU is either dedicated or shared, "
            "remove them from one",)

    def test_host_without_numa_cells(self, load):
        host = load("caps.x86_64.xml")
        assert host_resources(host, None, NO_RESERVE).cells == ()
        assert problems(host, pinning(shared=[0])) == (
            "[compute] cpu_shared_set names CPU 0, which this host does not "
            "have (its NUMA cells hold CPUs none); remove it from the "
            "option",)

    def test_every_problem_at_once_and_nothing_half_applied(self, real):
        pin = pinning(
            dedicated=[1, 2, 40], shared=[2, 3, 41, 42],
            reserved_host_memory_mb=100_000,
            reserved_huge_pages=(PageReservation(0, 2048, 0),
                                 PageReservation(1, 2048, 1)))
        online = frozenset(range(32)) - {1, 3}

        with pytest.raises(HostResourceError) as info:
            host_resources(real, online, pin)

        assert info.value.problems == (
            "[compute] cpu_dedicated_set names CPU 40, which this host does "
            "not have (its NUMA cells hold CPUs 0-31); remove it from the "
            "option",
            "[compute] cpu_dedicated_set names CPU 1, which is offline "
            "(online: 0,2,4-31); bring it online or remove it from the "
            "option",
            "[compute] cpu_shared_set names CPUs 41-42, which this host does "
            "not have (its NUMA cells hold CPUs 0-31); remove them from the "
            "option",
            "[compute] cpu_shared_set names CPU 3, which is offline "
            "(online: 0,2,4-31); bring it online or remove it from the "
            "option",
            "CPU 2 is in both [compute] cpu_dedicated_set and [compute] "
            "cpu_shared_set; a CPU is either dedicated or shared, remove it "
            "from one",
            "[compute] reserved_host_memory_mb = 100000 is more than the "
            "61907 MiB the host's NUMA cells have; lower it",
            "[compute] reserved_huge_pages entry 'node:1,size:2048,count:1':"
            " the host has no NUMA node 1 (nodes: 0); name one of those")
        assert str(info.value).startswith(
            "the configuration does not fit this host:\n  - [compute] "
            "cpu_dedicated_set names CPU 40")
        assert isinstance(info.value, ValueError)


class TestMemory:
    def test_cell_memory_in_mib_minus_the_reservation(self, real):
        (cell,) = host_resources(real, None, PinningConfig()).cells
        # 63393224 KiB // 1024; Nova's default 512 MiB reserved.
        assert cell.total_memory_mb == 61907
        assert cell.reserved_memory_mb == 512
        assert cell.memory_mb == 61395

    def test_reservation_fills_cell_0_first_then_the_next(self, four_cells):
        result = host_resources(four_cells, None,
                                pinning(reserved_host_memory_mb=1536))
        assert [(c.total_memory_mb, c.reserved_memory_mb, c.memory_mb)
                for c in result.cells] == [
            (1024, 1024, 0), (2048, 512, 1536), (3072, 0, 3072),
            (4096, 0, 4096)]

    def test_all_memory_may_be_reserved_but_not_more(self, four_cells):
        everything = pinning(reserved_host_memory_mb=10240)
        assert all(c.memory_mb == 0 for c in
                   host_resources(four_cells, None, everything).cells)
        assert problems(four_cells, pinning(reserved_host_memory_mb=10241)) \
            == ("[compute] reserved_host_memory_mb = 10241 is more than the "
                "10240 MiB the host's NUMA cells have; lower it",)

    def test_unstated_memory_is_unknown_not_zero(self, load):
        host = load("caps-qemu-kvm.xml")  # no <memory> in its cell
        (cell,) = host_resources(host, None, PinningConfig()).cells
        assert cell.total_memory_mb is None
        assert cell.memory_mb is None
        assert cell.reserved_memory_mb == 0


class TestPages:
    def test_smallest_size_apart_huge_pages_by_size(self, real):
        (cell,) = host_resources(real, None, NO_RESERVE).cells
        assert cell.small_pages == PagePool(4, 15848306)
        assert cell.huge_pages == {2048: PagePool(2048, 0),
                                   1048576: PagePool(1048576, 0)}

    def test_reservations_subtract_per_node_and_size(self, four_cells):
        result = host_resources(four_cells, None, pinning(
            reserved_huge_pages=(PageReservation(1, 2048, 100),
                                 PageReservation(1, 1048576, 8192),
                                 PageReservation(0, 4, 48))))

        cell0, cell1 = result.cells[:2]
        assert cell1.huge_pages[2048] == PagePool(2048, 6144, 100)
        assert cell1.huge_pages[2048].available == 6044
        assert cell1.huge_pages[1048576].available == 0
        assert cell0.huge_pages[2048].available == 4096
        assert cell0.small_pages == PagePool(4, 2048, 48)
        assert cell0.small_pages.available == 2000
        assert result.cell(2).huge_pages[2048].reserved == 0

    def test_no_pages_listed(self, load):
        (cell,) = host_resources(load("caps-qemu-kvm.xml"), None,
                                 NO_RESERVE).cells
        assert cell.small_pages is None
        assert cell.huge_pages == {}

    def test_small_page_size_is_the_cells_smallest(self):
        host = HostCapabilities(source="t", cells=(NUMACell(
            id=0, memory_kib=1 << 20,
            pages=(Pages(524288, 2), Pages(64, 16384))),))
        (cell,) = host_resources(host, None, NO_RESERVE).cells
        assert cell.small_pages == PagePool(64, 16384)
        assert list(cell.huge_pages) == [524288]

    def test_page_reservation_errors(self, four_cells):
        assert problems(four_cells, pinning(reserved_huge_pages=(
            PageReservation(4, 2048, 1), PageReservation(0, 4096, 1),
            PageReservation(3, 1048576, 12289)))) == (
            "[compute] reserved_huge_pages entry 'node:4,size:2048,count:1':"
            " the host has no NUMA node 4 (nodes: 0-3); name one of those",
            "[compute] reserved_huge_pages entry 'node:0,size:4096,count:1':"
            " NUMA node 0 has no 4096 KiB pages (sizes in KiB: 4, 2048, "
            "1048576); use one of those",
            "[compute] reserved_huge_pages entry "
            "'node:3,size:1048576,count:12289': NUMA node 3 has only 12288 "
            "pages of 1048576 KiB; reserve at most that many")


def test_result_is_read_only(real):
    result = host_resources(real, None, NO_RESERVE)
    with pytest.raises(dataclasses.FrozenInstanceError):
        result.cells[0].vcpus = frozenset()
    with pytest.raises(TypeError):
        result.cells[0].siblings[0] = frozenset()
    with pytest.raises(TypeError):
        result.cells[0].huge_pages[4] = PagePool(4, 1)
    assert result.pinning is NO_RESERVE


@pytest.mark.parametrize("path", corpus_files("hostcaps"),
                         ids=lambda p: p.name)
def test_every_corpus_host_with_the_default_options(path):
    host = parse_host_capabilities(path.read_text(), path.name)

    result = host_resources(host, None, PinningConfig())

    assert result.vcpus == host.cpu_ids
    assert result.pcpus == frozenset()
    stated = [c.total_memory_mb for c in result.cells
              if c.total_memory_mb is not None]
    reserved = sum(c.reserved_memory_mb for c in result.cells)
    assert reserved == (512 if stated else 0)
