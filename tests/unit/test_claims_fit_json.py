"""The claims document: round trips, and every hostile edit refused by name.

A document is what the tracker keeps in its state directory; the edits
below are what a person or a bug could write into it.  Each must be
refused with :class:`InvalidClaims` naming the field, never loaded into a
usage that pins a CPU twice or overcommits the host.
"""

from __future__ import annotations

import copy
import json
import pathlib

import pytest

from tests.unit.test_claims_fit import (
    claim, fill, fit_one, inventory_usage, make_host, split_host)
from virtdriver.claims.fit import fit
from virtdriver.claims.model import CPU_SHARED, ClaimError, Flavor
from virtdriver.claims.usage import HostUsage
from virtdriver.claims.usage_json import (
    InvalidClaims, fit_from_json, fit_to_json, usage_from_json, usage_to_json)

HOST = split_host()


def document() -> dict:
    """Two instances on cell 0 (one isolated, one on 2 MiB pages), one
    shared on cell 1 and one without NUMA topology, through JSON text."""
    usage = fill(HOST, 1, vcpus=2, thread="isolate")
    usage = claim(usage, fit_one(HOST, usage, "pages", vcpus=2,
                                 memory_mb=1024, page=2048), HOST)
    usage = claim(usage, fit_one(HOST, usage, "shared", vcpus=4,
                                 policy=CPU_SHARED), HOST)
    usage = claim(usage, fit(None, Flavor(2, 512), HOST, usage,
                             cpu_allocation_ratio=4.0,
                             instance_uuid="float"), HOST)
    return json.loads(json.dumps(usage_to_json(usage)))


def refused(doc, host=HOST) -> str:
    with pytest.raises(InvalidClaims) as info:
        usage_from_json(doc, host)
    message = str(info.value)
    assert message.startswith("claims document refused: ")
    assert "\n" not in message
    return message


def edited(change) -> dict:
    doc = copy.deepcopy(document())
    change(doc)
    return doc


def cell0(doc, uuid="i-0") -> dict:
    return doc["instances"][uuid]["cells"][0]


class TestRoundTrip:
    def test_a_usage_reads_back_equal(self):
        doc = document()

        usage = usage_from_json(doc, HOST)

        assert usage_to_json(usage) == doc
        assert set(usage.instances) == {"i-0", "pages", "shared", "float"}
        assert usage.cell(0).reserved_cpus  # the isolated siblings

    def test_an_instance_fit_reads_back_equal(self):
        inst = fit_one(HOST, vcpus=3, emulator="isolate", page=2048)

        assert fit_from_json(json.loads(json.dumps(
            fit_to_json(inst)))) == inst

    def test_without_a_host_only_the_document_is_checked(self):
        doc = edited(lambda d: cell0(d).update(pinning={"0": 40, "1": 41}))

        usage = usage_from_json(doc, None)

        assert usage.instances["i-0"].pinning == {0: 40, 1: 41}
        assert "instances.i-0.cells[0].pinning: host CPUs 40-41 are not " \
               "dedicated on host cell 0" in refused(doc)

    def test_a_changed_host_refuses_claims_it_cannot_hold(self):
        smaller = make_host(dedicated=range(4), shared=range(16, 32))

        message = refused(document(), smaller)

        assert "not dedicated on host cell 0 (dedicated: 0-3)" \
            in message


#: (edit, the words the refusal must contain)
HOSTILE = {
    "pin outside the host": (
        lambda d: cell0(d)["pinning"].update({"0": 99}),
        "instances.i-0.cells[0].pinning: host CPU 99 is not dedicated on "
        "host cell 0"),
    "two instances on one CPU": (
        lambda d: cell0(d, "pages")["pinning"].update(
            {"0": cell0(d)["pinning"]["0"]}),
        "instances.pages: host CPU 0 is already taken by instance i-0"),
    "isolated siblings given away": (
        lambda d: cell0(d).update(reserved_cpus=[]),
        "instances.i-0.cells[0]: thread policy isolate, but core 0,8 is not "
        "kept whole for it (missing: 8)"),
    "pin a shared CPU": (
        lambda d: cell0(d)["pinning"].update({"1": 20}),
        "host CPU 20 is not dedicated on host cell 0"),
    "a host cell the host lacks": (
        lambda d: cell0(d, "shared").update(host_cell=7),
        "instances.shared.cells[0].host_cell: the host has no cell 7"),
    "shared vCPUs over the ratio": (
        lambda d: cell0(d, "shared").update(shared_vcpus=list(range(16))) or
        d["instances"].update({
            f"s{n}": {**copy.deepcopy(d["instances"]["shared"]), "uuid":
                      f"s{n}"} for n in range(4)}),
        "cell 1: 80 shared vCPUs placed, above 16 shared CPUs × "
        "cpu_allocation_ratio 4"),
    "more pages than the pool": (
        lambda d: cell0(d, "pages").update(memory_mb=4096),
        "cell 0: 2048 pages of 2048 KiB used, above the 1024 available"),
    "a page size the cell lacks": (
        lambda d: cell0(d, "pages").update(page_size_kib=1048576),
        "instances.pages.cells[0].page_size_kib: host cell 0 has no 1048576 "
        "KiB huge pages"),
    "partial pages": (
        lambda d: cell0(d, "pages").update(memory_mb=1025),
        "instances.pages.cells[0].memory_mb: 1025 MiB is not a whole number "
        "of 2048 KiB pages"),
    "small memory beyond the cell": (
        lambda d: cell0(d, "shared").update(memory_mb=40000),
        "cell 1: 40000 MiB of small pages used, above the 30720 MiB it has"),
    "floating beyond the host's shared CPUs": (
        lambda d: d["instances"]["float"]["floating"].update(vcpus=17),
        "instances.float.floating: 17 vCPUs, more than the host's 16 shared "
        "CPUs"),
    "floating memory beyond the host": (
        lambda d: d["instances"]["float"]["floating"].update(
            memory_mb=60000),
        "host: 62048 MiB of small pages used, above the 61440 MiB it has"),
    "a boolean for a number": (
        lambda d: cell0(d).update(memory_mb=True),
        "instances.i-0.cells[0].memory_mb: the boolean true, not a whole "
        "number"),
    "a negative amount": (
        lambda d: cell0(d).update(memory_mb=-1),
        "instances.i-0.cells[0].memory_mb: the number -1, not a whole number "
        "from 1 to 2147483647"),
    "a pinned cell without memory": (
        lambda d: cell0(d).update(memory_mb=0),
        "instances.i-0.cells[0].memory_mb: the number 0, not a whole number "
        "from 1 to 2147483647"),
    "a guest cell beyond the instance's cells": (
        lambda d: cell0(d).update(guest_cell=5),
        "instances.i-0.cells: guest cells [5] are not 0 to 0, each once"),
    "an instance key that is a path": (
        lambda d: d["instances"].update({"../../etc": {
            **d["instances"].pop("i-0"), "uuid": "../../etc"}}),
        "instances.../../etc.uuid: '../../etc', not an instance uuid"),
    "a CPU id past the limit": (
        lambda d: cell0(d).update(reserved_cpus=[70000]),
        "instances.i-0.cells[0].reserved_cpus[0]: the number 70000, not a "
        "whole number from 0 to 65535"),
    "a CPU listed twice": (
        lambda d: cell0(d).update(reserved_cpus=[8, 8]),
        "instances.i-0.cells[0].reserved_cpus: lists a CPU more than once"),
    "a vCPU key that is not a number": (
        lambda d: cell0(d)["pinning"].update({"x": 3}),
        "instances.i-0.cells[0].pinning.x: is not a guest vCPU id"),
    "an unknown field": (
        lambda d: cell0(d).update(extra=1),
        "instances.i-0.cells[0].extra: is not a field of a claim"),
    "a missing field": (
        lambda d: cell0(d).pop("pinning"),
        "instances.i-0.cells[0].pinning: missing"),
    "a fit under another uuid": (
        lambda d: d["instances"].update(x=d["instances"].pop("i-0")),
        "instances.x.uuid: 'i-0' is not the key it is under"),
    "an unknown thread policy": (
        lambda d: d["instances"]["i-0"].update(cpu_thread_policy="sloppy"),
        "instances.i-0.cpu_thread_policy: 'sloppy' is not null or one of "
        "prefer, isolate, require"),
    "cells and floating at once": (
        lambda d: d["instances"]["i-0"]["floating"].update(vcpus=1),
        "instances.i-0.floating: an instance with cells has no floating"),
    "one vCPU pinned and shared": (
        lambda d: cell0(d).update(shared_vcpus=[0]),
        "instances.i-0: guest vCPUs 0 appear more than once"),
    "another format": (
        lambda d: d.update(format="ledger"),
        "format: 'ledger' is not 'virtdriver-claims'"),
    "another version": (
        lambda d: d.update(version=2),
        "version: 2 is not 1, the only version this virtdriver reads"),
    "instances not an object": (
        lambda d: d.update(instances=[]),
        "instances: a list, not an object of instance uuid -> fit"),
}


@pytest.mark.parametrize("name", HOSTILE)
def test_a_hostile_edit_is_refused_naming_the_field(name):
    change, words = HOSTILE[name]

    message = refused(edited(change))

    assert words in message
    assert "fix or remove the entries named" in message


def test_every_problem_is_named_at_once():
    def change(d):
        cell0(d).update(memory_mb="a lot")
        cell0(d, "pages").update(guest_cell=None)

    message = refused(edited(change))

    assert "instances.i-0.cells[0].memory_mb: a string" in message
    assert "instances.pages.cells[0].guest_cell: null" in message


@pytest.mark.parametrize("doc", [None, [], "claims", 3])
def test_a_document_that_is_not_an_object_is_refused(doc):
    assert "the document is" in refused(doc)


def test_refusals_are_claim_errors():
    assert issubclass(InvalidClaims, ClaimError)


class TestTheDocumentedExamples:
    """docs/claims.md "Claims on a host" shows what the code does."""

    @staticmethod
    def section() -> str:
        text = (pathlib.Path(__file__).resolve().parents[2] / "docs"
                / "claims.md").read_text()
        return text.split("## Claims on a host", 1)[1].split("\n## ", 1)[0]

    @staticmethod
    def blocks(kind: str) -> list[str]:
        """The fenced blocks of the section in language ``kind``."""
        found, language, lines = [], None, []
        for line in TestTheDocumentedExamples.section().splitlines():
            if line.startswith("```") and language is None:
                language, lines = line[3:].strip(), []
            elif line.startswith("```"):
                if language == kind:
                    found.append("\n".join(lines))
                language = None
            elif language is not None:
                lines.append(line)
        return found

    @staticmethod
    def flat(text: str) -> str:
        return " ".join(text.split())

    def db_1(self) -> HostUsage:
        return claim(HostUsage(), fit_one(
            HOST, HostUsage(), "db-1", vcpus=2, thread="isolate",
            emulator="isolate", memory_mb=1024, page=2048), HOST)

    def test_the_claims_document_is_the_one_the_code_writes(self):
        (doc,) = self.blocks("json")

        assert usage_from_json(json.loads(doc), HOST) == self.db_1()
        assert json.loads(doc) == usage_to_json(self.db_1())

    def test_the_messages_are_the_ones_the_code_gives(self):
        web_1 = fill(HOST, 1, vcpus=12, memory_mb=2048, page=2048)
        with pytest.raises(ClaimError) as does_not_fit:
            fit_one(HOST, web_1, "web-2", vcpus=6, thread="isolate",
                    memory_mb=4096, page=2048)
        hostile = usage_to_json(self.db_1())
        hostile["instances"]["db-1"]["cells"][0]["pinning"]["1"] = 20
        with pytest.raises(ClaimError) as refused_document:
            usage_from_json(hostile, HOST)
        shown = [self.flat(b) for b in self.blocks("")]

        assert self.flat(str(does_not_fit.value)) in shown
        assert self.flat(str(refused_document.value)) in shown

    def test_the_usage_shown_is_the_one_the_code_gives(self):
        shown = [self.flat(b) for b in self.blocks("")]

        assert self.flat(str(inventory_usage(self.db_1(), HOST))) in shown
