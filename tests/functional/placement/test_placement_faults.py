"""Faults of the environment against the real Placement on loopback:
TLS (a throw-away CA, Placement behind an HTTPS proxy), keystone
answering 5xx, a flaky Placement (503s, answers lost after the write
landed), and our own provider moved under a foreign tree."""

from __future__ import annotations

import json
import re
import warnings
import uuid as uuidlib

import os_traits
import pytest
from fault_servers import BrokenKeystone, Proxy, make_ca, server_context
from placement_helpers import Api, Host, assert_placement_equals
from test_placement_cli import (  # noqa: F401
    config, keystone_config, run_sync, state_dir)

from virtdriver.drivers.ironic import IronicDriver
from virtdriver.placement import transport
from virtdriver.placement.client import PlacementClient, RetryPolicy

FAKE = ["--driver", "fake", "--host-spec", "numa2-ht"]
#: Every test: VIRTDRIVER_STATE_DIR in its tmp_path (the CLI's state).
pytestmark = pytest.mark.usefixtures("state_dir")


class Sleeps(list):
    """An injected ``sleep``: records the delays, never waits."""

    def __call__(self, seconds: float) -> None:
        self.append(seconds)


@pytest.fixture
def sleeps(monkeypatch) -> Sleeps:
    """Every client made without a policy records instead of sleeping."""
    recorder = Sleeps()
    monkeypatch.setattr(transport, "DEFAULT_RETRY",
                        RetryPolicy(sleep=recorder))
    return recorder


# -- TLS -----------------------------------------------------------------------


@pytest.fixture(scope="module")
def ca(tmp_path_factory):
    return make_ca(tmp_path_factory.mktemp("ca"))


@pytest.fixture
def https(placement, ca):
    """The shared Placement behind an HTTPS proxy signed by ``ca``."""
    proxy = Proxy(placement.url, tls=server_context(ca))
    yield proxy
    proxy.close()


def test_without_cafile_a_certificate_failure_says_so_and_exits_2(
        tmp_path, https, capsys):
    conf = config(tmp_path, f"[placement]\nendpoint_override = "
                  f"{https.url}\n")

    status, doc, err = run_sync(capsys, *conf, *FAKE)

    assert status == 2
    assert not doc["sync"]["pending"]
    assert err.count("\n") == 1 and "Traceback" not in err
    assert "not reachable" not in err
    assert err.startswith(f"virtdriver: sync failed: GET /: the TLS "
                          f"connection to Placement at {https.url} failed "
                          "(certificate verify failed: ")
    assert "set [placement] cafile to the CA that signed" in err


def test_with_cafile_the_sync_works_over_https(tmp_path, https, ca, api,
                                               capsys):
    conf = config(tmp_path, f"""\
        [placement]
        endpoint_override = {https.url}
        cafile = {ca['ca']}
        """)

    status, doc, err = run_sync(capsys, *conf, *FAKE)

    assert (status, err) == (0, "")
    assert doc["sync"]["ok"]
    assert https.what("forwarded")        # it went through the TLS proxy
    assert_placement_equals(api, Host(tmp_path / "expected").tree)


def test_insecure_skips_verification(tmp_path, https, api, capsys):
    conf = config(tmp_path, f"[placement]\nendpoint_override = {https.url}\n"
                  "insecure = true\n")

    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        status, doc, err = run_sync(capsys, *conf, *FAKE)

    assert (status, err) == (0, "")
    assert doc["sync"]["ok"]
    # Not urllib3's warning on every request: the operator asked for it.
    assert not [w for w in seen if "Unverified HTTPS" in str(w.message)]
    assert_placement_equals(api, Host(tmp_path / "expected").tree)


def test_a_client_certificate_is_sent_from_certfile_and_keyfile(
        tmp_path, placement, ca, api, capsys):
    proxy = Proxy(placement.url, tls=server_context(ca, client_cert=True))
    without = config(tmp_path, f"""\
        [placement]
        endpoint_override = {proxy.url}
        cafile = {ca['ca']}
        """)
    try:
        status, doc, err = run_sync(capsys, *without, *FAKE)
        assert status == 2 and not doc["sync"]["pending"]
        assert err.count("\n") == 1 and "not reachable" not in err
        # The server hung up in the handshake (OpenSSL's words vary:
        # "EOF occurred in violation of protocol", "… certificate
        # required"): one short reason, not keystoneauth's whole text.
        assert re.search(
            rf"the TLS connection to Placement at {re.escape(proxy.url)} "
            r"failed \([^()]{5,80}\); set \[placement\] cafile", err), err
        assert "(certfile and keyfile if it wants a client certificate)" \
            in err

        with_cert = config(tmp_path, f"""\
            [placement]
            endpoint_override = {proxy.url}
            cafile = {ca['ca']}
            certfile = {ca['client']}
            keyfile = {ca['client_key']}
            """)
        status, doc, err = run_sync(capsys, *with_cert, *FAKE)
    finally:
        proxy.close()
    assert (status, err) == (0, "")
    assert_placement_equals(api, Host(tmp_path / "expected").tree)


# -- keystone failing -----------------------------------------------------------


@pytest.mark.parametrize("answer", [500, 503])
@pytest.mark.parametrize("override", [False, True])
def test_keystone_answering_5xx_is_unreachable_not_refused(
        tmp_path, placement, sleeps, capsys, answer, override):
    """From the catalog lookup, or (with ``endpoint_override``) from the
    first request's token: pending, exit 3, after the retries."""
    keystone = BrokenKeystone(answer)
    endpoint = f"endpoint_override = {placement.url}" if override else ""
    conf = keystone_config(tmp_path, f"{keystone.url}/v3", extra=endpoint)
    try:
        status, _, err = run_sync(capsys, *conf, *FAKE)
    finally:
        keystone.close()

    assert status == 3
    assert err.count("\n") == 1 and "refused" not in err
    said = (f"GET /: keystone answered {answer} while logging in to "
            "Placement (" if override else
            f"keystone at the [placement] auth_url answered {answer} (")
    assert err.startswith("virtdriver: sync pending (the next `virtdriver "
                          f"sync` catches up): {said}"), err
    assert len(sleeps) == transport.DEFAULT_RETRY.attempts - 1   # retried


# -- a flaky Placement ---------------------------------------------------------


def ironic_host(tmp_path, count: int) -> Host:
    path = tmp_path / "nodes.json"
    path.write_text(json.dumps({"nodes": [
        {"uuid": str(uuidlib.uuid5(uuidlib.NAMESPACE_URL, f"flaky-{i}")),
         "name": f"flaky-{i}", "resource_class": "baremetal.gold",
         "traits": [os_traits.HW_CPU_X86_AVX2]} for i in range(count)]}))
    return Host(tmp_path / "state", IronicDriver(inventory_path=path))


def through(proxy: Proxy, sleeps: Sleeps) -> PlacementClient:
    return PlacementClient.from_url(proxy.url,
                                    retry=RetryPolicy(sleep=sleeps))


def test_one_request_in_seven_answering_503_still_syncs_in_one_run(
        tmp_path, placement, api):
    farm = ironic_host(tmp_path, 30)
    proxy = Proxy(placement.url, fault=lambda n, m, p: "503" if n % 7 == 0
                  else None)
    sleeps = Sleeps()
    client = through(proxy, sleeps)
    try:
        result = farm.sync(client)
    finally:
        proxy.close()

    assert result.ok and not result.pending, result.reason
    failed = len(proxy.what("503"))
    assert failed >= 10                       # 30 nodes: ~95 requests
    assert client.retried == failed == len(sleeps)
    assert result.counts.total == len(proxy.log)
    providers = farm.tree.providers()
    assert {p.uuid for p in providers} <= set(api.providers())
    for provider in providers[::10]:          # a sample: reads cost time
        assert api.inventories(provider.uuid) == {
            rc: rec.as_dict() for rc, rec in provider.inventory.items()}
        assert provider.traits <= api.traits(provider.uuid)


def test_a_request_failing_every_time_is_tried_a_bounded_number_of_times(
        tmp_path, placement):
    host = Host(tmp_path / "state")
    proxy = Proxy(placement.url, fault=lambda n, m, p: "503")
    sleeps = Sleeps()
    try:
        result = host.sync(through(proxy, sleeps))
    finally:
        proxy.close()

    attempts = RetryPolicy().attempts
    assert result.pending and "answered 503" in result.reason
    assert len(proxy.log) == attempts == len(sleeps) + 1
    assert all(0 < s <= RetryPolicy().max_delay for s in sleeps)


def test_a_create_whose_answer_was_lost_is_not_created_twice(
        tmp_path, placement, api):
    host = Host(tmp_path / "state")
    lost = []

    def fault(n, method, path):
        if method == "POST" and not lost:
            lost.append(path)
            return "reset"
        return None

    proxy = Proxy(placement.url, fault=fault)
    sleeps = Sleeps()
    try:
        result = host.sync(through(proxy, sleeps))
    finally:
        proxy.close()

    assert lost == ["/resource_providers"]
    assert result.ok, result.describe()
    # The lost POST had landed: its retry was a 409 duplicate, resolved
    # by reading the provider (one GET of it), not a second provider.
    posts = [p for m, p, _ in proxy.log if m == "POST"]
    assert len(posts) == len(host.tree.providers()) + 1
    assert ("GET", f"/resource_providers/{host.root.uuid}") in \
        proxy.what("forwarded")
    assert len(sleeps) == 1
    assert result.get(host.root.uuid).created       # said as it happened
    assert_placement_equals(api, host.tree)
    assert len(api.providers()) == len(host.tree.providers())


def test_a_generation_put_whose_answer_was_lost_is_reread_not_reapplied(
        tmp_path, placement, api):
    host = Host(tmp_path / "state")
    lost = []

    def fault(n, method, path):
        if method == "PUT" and path.endswith("/traits") and not lost:
            lost.append(path)
            return "reset"
        return None

    proxy = Proxy(placement.url, fault=fault)
    try:
        result = host.sync(through(proxy, Sleeps()))
    finally:
        proxy.close()

    assert lost and result.ok, result.describe()
    assert result.conflicts >= 1       # the retry met its own write: 409
    assert_placement_equals(api, host.tree)
    assert host.sync(placement.client()).counts.writes == 0


# -- our provider moved under a foreign root -----------------------------------


def foreign_root(api: Api, name: str = "someone-else") -> str:
    uuid = str(uuidlib.uuid4())
    api.client.create_provider(uuid, name, None)
    return uuid


def test_our_child_moved_under_a_foreign_root_is_moved_back(
        tmp_path, client, api):
    host = Host(tmp_path / "state")
    assert host.sync(client).ok
    cell, root = host.uuid("fake-numa2-ht_NUMA0"), host.root.uuid
    other = foreign_root(api)
    api.client.update_provider(cell, "fake-numa2-ht_NUMA0", other)
    api.add_traits(other, "CUSTOM_THEIRS")
    assert api.providers()[cell]["root_provider_uuid"] == other

    result = host.sync(client)

    assert result.ok, result.describe()
    outcome = {o.uuid: o for o in result.outcomes}[cell]
    assert outcome.reparented_from == other
    assert any("fake-numa2-ht_NUMA0" in n and "moved back" in n for n in result.notes)
    assert api.providers()[cell]["parent_provider_uuid"] == root
    assert api.providers()[other]["parent_provider_uuid"] is None
    assert api.traits(other) == {"CUSTOM_THEIRS"}       # theirs untouched
    assert_placement_equals(api, host.tree)
    assert host.sync(client).counts.writes == 0


def test_our_root_moved_under_a_foreign_root_is_moved_back(
        tmp_path, client, api):
    host = Host(tmp_path / "state")
    assert host.sync(client).ok
    root = host.root.uuid
    other = foreign_root(api)
    api.client.update_provider(root, host.root.name, other)

    result = host.sync(client)

    assert result.ok, result.describe()
    assert api.providers()[root]["parent_provider_uuid"] is None
    assert other in api.providers()                    # not deleted
    assert_placement_equals(api, host.tree)


def test_without_reparenting_the_moved_provider_is_reported_precisely(
        tmp_path, placement, api):
    host = Host(tmp_path / "state")
    assert host.sync(placement.client()).ok
    cell = host.uuid("fake-numa2-ht_NUMA0")
    other = foreign_root(api)
    api.client.update_provider(cell, "fake-numa2-ht_NUMA0", other)
    old = placement.client()
    old.adopt_microversion("1.36")

    result = host.sync(old)

    error = {o.uuid: o for o in result.outcomes}[cell].error
    assert error.startswith(
        f"our provider 'fake-numa2-ht_NUMA0' ({cell}) is in Placement under parent "
        f"{other} in the tree of {other}, not under {host.root.uuid}, and "
        "Placement 1.36 cannot re-parent (needs 1.37)")
    assert "delete or rename" not in error


def test_a_foreign_provider_holding_our_name_is_named(tmp_path, client, api):
    host = Host(tmp_path / "state")
    squatter = foreign_root(api, "fake-numa2-ht_NUMA1")

    result = host.sync(client)

    error = {o.name: o for o in result.outcomes}["fake-numa2-ht_NUMA1"].error
    assert f"another provider of that name ({squatter}, in the tree of " \
           f"{squatter}) — not ours, so it is left alone" in error
    assert api.providers()[squatter]["parent_provider_uuid"] is None
