"""PlacementClient: microversion negotiation, typed errors, counts — and
the in-process embedded Placement (the WSGI app called directly)."""

from __future__ import annotations

import json
import uuid as uuidlib

import pytest
import requests

from virtdriver.placement import errors
from virtdriver.placement.client import (
    MAX_VERSION, MIN_VERSION, PlacementClient, version_text)
from virtdriver.placement.embedded import (
    HOST, IN_PROCESS_URL, EmbeddedError, WSGITransport, build_app,
    in_process_client)
from virtdriver.placement.loopback import PlacementServer
from virtdriver.placement.state import SyncState
from virtdriver.placement.sync import sync


def fake_placement(max_version: str, calls: list):
    """A WSGI app with Placement's root document and microversion check;
    every other path answers ``{"resource_providers": []}``."""
    def app(environ, start_response):
        header = environ.get("HTTP_OPENSTACK_API_VERSION")
        calls.append((environ["PATH_INFO"], header))
        if environ["PATH_INFO"] == "/":
            start_response("200 OK", [("Content-Type", "application/json")])
            return [json.dumps({"versions": [{
                "id": "v1.0", "min_version": "1.0",
                "max_version": max_version}]}).encode()]
        wanted = tuple(map(int, header.split()[1].split(".")))
        if wanted > tuple(map(int, max_version.split("."))):
            start_response("406 Not Acceptable",
                           [("Content-Type", "application/json")])
            return [b'{"errors": [{"status": 406, "detail": "no"}]}']
        start_response("200 OK", [("Content-Type", "application/json")])
        return [b'{"resource_providers": []}']
    return app


def client_for(app, **options) -> PlacementClient:
    session = requests.Session()
    session.mount(IN_PROCESS_URL, WSGITransport(app))
    return PlacementClient.from_url(IN_PROCESS_URL, requests_session=session,
                                    **options)


def test_the_microversion_is_negotiated_once_and_sent_every_time():
    calls = []
    client = client_for(fake_placement("1.99", calls))
    for _ in range(3):
        client.list_providers()
    assert client.microversion == version_text(MAX_VERSION)
    assert [path for path, _ in calls].count("/") == 1
    assert {header for path, header in calls if path != "/"} == {
        f"placement {version_text(MAX_VERSION)}"}
    assert client.counts.by_method == {"GET": 4}


def test_a_placement_older_than_the_minimum_is_refused():
    older = f"{MIN_VERSION[0]}.{MIN_VERSION[1] - 1}"
    client = client_for(fake_placement(older, []))
    with pytest.raises(errors.MicroversionUnsupported) as caught:
        client.list_providers()
    message = str(caught.value)
    assert older in message and version_text(MIN_VERSION) in message
    assert "upgrade Placement" in message and "\n" not in message


def test_a_remembered_microversion_the_service_refuses_is_renegotiated():
    calls = []
    client = client_for(fake_placement("1.35", calls), microversion="1.39")
    assert client.list_providers() == []
    assert client.microversion == "1.35"
    assert [h for _, h in calls] == ["placement 1.39", None,
                                     "placement 1.35"]


def test_connection_refused_is_unreachable_at_once(tmp_path):
    server = PlacementServer(tmp_path / "p.db", port=1)
    client = server.client()
    with pytest.raises(errors.PlacementUnreachable) as caught:
        client.list_providers()
    assert "Connection refused" in str(caught.value)
    assert client.counts.total == 1   # no retries inside the client


def test_placement_errors_are_typed(placement, api):
    client = placement.client()
    rp = str(uuidlib.uuid4())
    client.create_provider(rp, "cn1", None)

    with pytest.raises(errors.DuplicateProvider):
        client.create_provider(str(uuidlib.uuid4()), "cn1", None)
    with pytest.raises(errors.GenerationConflict) as conflict:
        client.put_part(rp, "traits", 7, [])
    assert conflict.value.code == "placement.concurrent_update"
    with pytest.raises(errors.UnknownName):
        client.put_part(rp, "traits", 0, ["CUSTOM_NEVER_CREATED"])
    with pytest.raises(errors.ProviderNotFound):
        client.get_part(str(uuidlib.uuid4()), "traits")

    client.put_part(rp, "inventories", 0, {
        "VCPU": {"total": 4}, "MEMORY_MB": {"total": 1024}})
    api.allocate(rp, {"VCPU": 1})   # moves the provider's generation too
    generation, _ = client.get_part(rp, "inventories")
    with pytest.raises(errors.InventoryInUse) as in_use:
        client.put_part(rp, "inventories", generation,
                        {"MEMORY_MB": {"total": 1024}})
    assert in_use.value.provider == rp
    assert in_use.value.resource_classes == ("VCPU",)
    with pytest.raises(errors.ProviderInUse):
        client.delete_provider(rp)
    for exc in (conflict.value, in_use.value):
        assert "\n" not in str(exc) and "; " in str(exc)


def test_the_server_listens_on_loopback_only(placement):
    assert placement.url.startswith(f"http://{HOST}:")
    assert HOST == "127.0.0.1"


# -- the in-process embedded Placement ---------------------------------------
# Placement configures its database once per process: this module's
# in-process tests share one database.

@pytest.fixture(scope="module")
def in_process_db(tmp_path_factory, placement_pool):
    return tmp_path_factory.mktemp("in-process") / "placement.db"


def test_the_in_process_placement_syncs_a_host(in_process_db, host):
    client = in_process_client(in_process_db)
    state = SyncState()

    first = sync(host.tree, client, owned_for=host.owned, state=state)
    steady = sync(host.tree, client, owned_for=host.owned, state=state)

    assert first.ok and first.changed
    assert client.endpoint.startswith("in-process:sqlite:///")
    assert steady.ok and steady.counts.by_method == {"GET": 1}
    listed = {p["uuid"] for p in client.list_providers()}
    assert listed == {p.uuid for p in host.tree.providers()}


def test_one_process_serves_one_database(in_process_db, tmp_path):
    build_app(in_process_db)
    with pytest.raises(EmbeddedError, match="one process serves one"):
        build_app(tmp_path / "other.db")


def test_the_documented_microversions_are_the_clients():
    import pathlib
    import re

    from virtdriver.placement.client import FEATURES
    doc = (pathlib.Path(__file__).resolve().parents[3] / "docs"
           / "placement.md").read_text()
    rows = set(re.findall(r"^\| (1\.\d+) \|", doc, re.M))
    assert rows == {version_text(v) for v, _ in FEATURES.values()}
    assert f"`MIN_VERSION` = **{version_text(MIN_VERSION)}**" in doc
    assert f"`MAX_VERSION` = {version_text(MAX_VERSION)}" in doc


KEYSTONE = "http://keystone.in-process.invalid"


def fake_keystone(status: str, calls: list):
    """Keystone v3's token API: a token whose catalog has Placement at
    IN_PROCESS_URL (or ``status`` as the refusal)."""
    def app(environ, start_response):
        calls.append(environ["PATH_INFO"])
        if not status.startswith("201"):
            start_response(status, [("Content-Type", "application/json")])
            return [b'{"error": {"code": 401, "message": "bad password"}}']
        token = {"token": {
            "methods": ["password"], "expires_at": "2099-01-01T00:00:00Z",
            "issued_at": "2024-01-01T00:00:00Z",
            "user": {"id": "u", "name": "nova", "domain": {"id": "default"}},
            "project": {"id": "p", "name": "service",
                        "domain": {"id": "default"}},
            "catalog": [{"type": "placement", "name": "placement", "id": "s",
                         "endpoints": [{
                             "id": "e", "interface": "public",
                             "region": "RegionOne", "region_id": "RegionOne",
                             "url": IN_PROCESS_URL}]}]}}
        start_response("201 Created", [("Content-Type", "application/json"),
                                       ("X-Subject-Token", "tok-123")])
        return [json.dumps(token).encode()]
    return app


def keystone_session(status: str, keystone_calls: list,
                     placement_calls: list):
    from keystoneauth1 import session as ks_session
    from keystoneauth1.identity import v3

    transport = requests.Session()
    transport.mount(KEYSTONE, WSGITransport(fake_keystone(status,
                                                          keystone_calls)))

    def placement_app(environ, start_response):
        placement_calls.append(environ.get("HTTP_X_AUTH_TOKEN"))
        return fake_placement("1.39", [])(environ, start_response)

    transport.mount(IN_PROCESS_URL, WSGITransport(placement_app))
    auth = v3.Password(auth_url=f"{KEYSTONE}/v3", username="nova",
                       password="secret", project_name="service",
                       user_domain_id="default", project_domain_id="default")
    return ks_session.Session(auth=auth, session=transport)


def test_the_endpoint_comes_from_the_service_catalog():
    keystone_calls, placement_calls = [], []
    client = PlacementClient.from_session(
        keystone_session("201 Created", keystone_calls, placement_calls))

    assert client.list_providers() == []
    assert client.endpoint == IN_PROCESS_URL
    assert keystone_calls == ["/v3/auth/tokens"]
    assert placement_calls == ["tok-123", "tok-123"]


def test_a_keystone_refusal_is_a_request_error_not_a_crash():
    client = PlacementClient.from_session(
        keystone_session("401 Unauthorized", [], []),
        endpoint_override=IN_PROCESS_URL)
    with pytest.raises(errors.PlacementRequestError) as caught:
        client.list_providers()
    assert "[placement] auth options" in str(caught.value)
