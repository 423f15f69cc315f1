"""The shared loopback Placement is handed to each test empty (the
``placement`` fixture, emptied on its SQLite file between tests): what one
test left is gone as far as Placement's API can tell, Placement's own
names stay, and the next sync into it is a first sync."""

from __future__ import annotations

from placement_helpers import Api, Host, expected_writes


def custom_names(client) -> tuple[list[str], list[str]]:
    traits = client.request("GET", "/traits",
                            params={"name": "startswith:CUSTOM_"})["traits"]
    classes = [rc["name"] for rc in
               client.request("GET", "/resource_classes")["resource_classes"]
               if rc["name"].startswith("CUSTOM_")]
    return traits, classes


def test_what_a_test_left_is_gone_and_the_standard_names_stay(
        placement_pool, tmp_path):
    server = placement_pool.take_shared()
    client, api = server.client(), Api(server)
    standard_traits = client.request("GET", "/traits")["traits"]
    standard_classes = client.request("GET", "/resource_classes")
    host = Host(tmp_path / "first")
    host.sync(client)
    root = host.root.uuid
    client.ensure_trait("CUSTOM_LEFT_BEHIND")
    client.ensure_resource_class("CUSTOM_LEFT_BEHIND")
    api.add_traits(root, "CUSTOM_LEFT_BEHIND")
    api.set_aggregates(root, {"5e1f2a3b-4c5d-4e6f-8a9b-0c1d2e3f4a5b"})
    cell = next(p.uuid for p in host.tree.providers()
                if "VCPU" in p.inventory)
    consumer = api.allocate(cell, {"VCPU": 1})
    assert custom_names(client) != ([], [])

    again = placement_pool.take_shared()

    assert again is server
    assert client.list_providers() == []
    assert custom_names(client) == ([], [])
    assert client.request("GET", f"/allocations/{consumer}") == \
        {"allocations": {}}
    assert client.request("GET", "/traits")["traits"] == [
        t for t in standard_traits if not t.startswith("CUSTOM_")]
    assert client.request("GET", "/resource_classes") == standard_classes
    # A new host's first sync writes what a first sync into an empty
    # Placement writes, its CUSTOM_ names created anew.
    other = Host(tmp_path / "second")
    result = other.sync(client)
    assert result.ok, result.describe()
    assert result.counts.writes == expected_writes(other.tree)
    assert sorted(p["uuid"] for p in client.list_providers()) == sorted(
        p.uuid for p in other.tree.providers())
