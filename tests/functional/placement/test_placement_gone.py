"""Providers gone from the tree while no sync ran: a new process still
deletes the ones whose identity proves them ours (names and parents from
Placement's own listing), and never anyone else's."""

from __future__ import annotations

import uuid as uuidlib

from placement_helpers import Host

from virtdriver.drivers.fake import FakeDriver


def test_a_new_process_switched_to_flat_deletes_the_old_cells(
        tmp_path, client, api):
    nested = Host(tmp_path / "nested")
    assert nested.sync(client).ok
    cells = [p.uuid for p in nested.tree.providers() if p.parent_uuid]
    root = nested.root.uuid
    foreign = str(uuidlib.uuid4())
    api.client.request("POST", "/resource_providers", body={
        "name": "cyborg-fpga", "uuid": foreign,
        "parent_provider_uuid": root})

    flat = Host(tmp_path / "flat", FakeDriver("numa2-ht", nested=False))
    result = flat.sync(client)

    assert result.ok, result.describe()
    left = api.providers()
    assert not set(cells) & set(left), "the old cells count twice"
    assert foreign in left                       # someone else's child
    assert {o.uuid for o in result.outcomes if o.deleted} == set(cells)
    assert "VCPU" in api.inventories(root)


def test_a_listed_child_with_an_imposter_uuid_is_not_deleted(
        tmp_path, client, api):
    host = Host(tmp_path / "a")
    assert host.sync(client).ok
    root = host.root.uuid
    imposter = str(uuidlib.uuid4())
    api.client.request("POST", "/resource_providers", body={
        "name": f"{host.root.name}_NUMA7", "uuid": imposter,
        "parent_provider_uuid": root})
    again = Host(tmp_path / "b")
    assert again.sync(client).ok
    assert imposter in api.providers()
