"""Generation conflicts and outages against a real Placement.

A concurrent writer is another client making a real write just before
one of ours, so Placement itself answers 409; an outage is the service
really stopped (connection refused) or a service answering 5xx."""

from __future__ import annotations

import os_traits

from placement_helpers import Api, assert_placement_equals
from virtdriver.placement.client import PlacementClient, RetryPolicy
from virtdriver.placement.embedded import IN_PROCESS_URL, WSGITransport
from virtdriver.placement.state import SyncState
from virtdriver.placement.sync import DEFAULT_ATTEMPTS, sync


class RacingClient(PlacementClient):
    """Before each of its first ``races`` trait writes to ``target``,
    another writer adds a foreign trait: our write then meets a moved
    generation."""

    races = 0
    target = None
    writer = None

    def put_part(self, uuid, part, generation, content):
        if part == "traits" and uuid == self.target and self.races:
            self.races -= 1
            self.writer.add_traits(uuid, f"CUSTOM_RACER_{self.races}")
        return super().put_part(uuid, part, generation, content)


def racing(placement, api, target, races):
    client = placement.client(RacingClient)
    client.target, client.writer, client.races = target, api, races
    return client


def test_a_concurrent_writer_forces_a_409_and_the_sync_converges(
        host, placement, api):
    root = host.root.uuid
    client = racing(placement, api, root, races=1)
    delays = []

    result = host.sync(client, sleep=delays.append)

    assert result.ok, result.describe()
    assert result.conflicts == 1 and result.get(root).retries == 1
    assert len(delays) == 1 and 0 < delays[0] < 1
    assert_placement_equals(api, host.tree)
    # The other writer's trait survived our retry.
    assert "CUSTOM_RACER_0" in api.traits(root)
    assert api.traits(root) == host.root.traits | {"CUSTOM_RACER_0"}
    # GET /, the marked listing, the new root's tree; then only that
    # provider was re-read: its three parts, once.
    assert client.counts.by_method["GET"] == 3 + 3


def test_a_provider_that_keeps_conflicting_fails_alone(host, placement,
                                                       api):
    root = host.root.uuid
    client = racing(placement, api, root, races=100)
    delays = []

    result = host.sync(client, sleep=delays.append)

    assert not result.ok and not result.pending
    failed = result.get(root)
    assert failed.error and "generation conflict" in failed.error
    assert failed.retries == DEFAULT_ATTEMPTS
    assert [o.uuid for o in result.errors] == [root]
    # Bounded, growing, jittered backoff between the attempts.
    assert len(delays) == DEFAULT_ATTEMPTS - 1
    assert all(0 < d <= 2 for d in delays)
    assert delays[-1] > delays[0]
    # The cells still synced in full.
    for cell in host.tree.providers()[1:]:
        assert api.traits(cell.uuid) == cell.traits
        assert api.inventories(cell.uuid)

    client.races = 0
    again = host.sync(client)
    assert again.ok
    assert host.root.traits <= api.traits(root)


def test_placement_stopped_mid_sync_then_restarted_converges(
        host, own_placement):
    placement = own_placement
    api = Api(placement)
    class Cut(PlacementClient):
        cut_after = 5

        def _send(self, method, path, **kwargs):
            if sum(self.counts.by_method.values()) == self.cut_after:
                placement.stop()
            return super()._send(method, path, **kwargs)

    client = placement.client(Cut)

    result = host.sync(client)

    assert result.pending and not result.ok
    assert "not reachable" in result.reason
    assert result.counts.total == Cut.cut_after + 1   # no busy loop
    placement.run()
    Cut.cut_after = -1
    again = host.sync(client)
    assert again.ok, again.describe()
    assert_placement_equals(api, host.tree)
    for provider in host.tree.providers():
        assert api.traits(provider.uuid) == provider.traits
    steady = host.sync(client)
    assert steady.ok and steady.counts.by_method == {"GET": 1}


def test_a_placement_answering_5xx_leaves_the_sync_pending(host):
    """Placement's root answers, every other request fails with 503."""
    calls = []

    def failing(environ, start_response):
        calls.append(environ["PATH_INFO"])
        if environ["PATH_INFO"] == "/":
            start_response("200 OK", [("Content-Type", "application/json")])
            return [b'{"versions": [{"id": "v1.0", "max_version": "1.39",'
                    b' "min_version": "1.0"}]}']
        start_response("503 Service Unavailable",
                       [("Content-Type", "application/json")])
        return [b'{"errors": [{"status": 503, "title": "Service '
                b'Unavailable", "detail": "database is down"}]}']

    import requests
    session = requests.Session()
    session.mount(IN_PROCESS_URL, WSGITransport(failing))
    delays = []
    client = PlacementClient.from_url(
        IN_PROCESS_URL, requests_session=session,
        retry=RetryPolicy(sleep=delays.append))
    state = SyncState()

    result = sync(host.tree, client, owned_for=host.owned, state=state)

    assert result.pending and "503" in result.reason
    assert "database is down" in result.reason
    # The failing request was retried a bounded number of times (a
    # transient 5xx), then the sync stopped at it.
    attempts = RetryPolicy().attempts
    assert calls == ["/"] + ["/resource_providers"] * attempts
    assert len(delays) == attempts - 1
    assert state.providers == {}


def test_foreign_and_owned_traits_under_concurrent_edits(host, placement,
                                                         api):
    """Many cycles while another writer edits traits between them: no
    foreign trait is lost, owned traits end right."""
    client = placement.client()
    host.sync(client)
    root = host.root.uuid
    owned = os_traits.HW_CPU_HYPERTHREADING
    foreign = set()
    for cycle in range(6):
        name = f"CUSTOM_EDIT_{cycle}"
        foreign.add(name)
        api.add_traits(root, name)
        if cycle % 2:
            api.remove_traits(root, owned)
        result = host.sync(client)
        assert result.ok
        traits = api.traits(root)
        assert foreign <= traits and owned in traits
