"""A Placement client: keystoneauth1 session and adapter, one microversion.

:class:`PlacementClient` sends every request through a keystoneauth1
``Adapter`` (service-catalog lookup or an endpoint override), with the
microversion negotiated once and sent on every request; its
:class:`~.transport.Transport` retries transient failures (5xx, a reset
connection) and turns each failure into one of
:mod:`virtdriver.placement.errors`.  It counts what it sends
(:attr:`PlacementClient.counts`), so tests and the sync report can say
exactly how many reads and writes a cycle cost.

Microversions
-------------
The client asks ``GET /`` once for Placement's range, then uses the
highest version both sides know (at most :data:`MAX_VERSION`, the newest
this code was tested against, so a future Placement cannot change
behaviour under it) and refuses a Placement older than
:data:`MIN_VERSION`.  Why each feature needs what it needs
(``placement/rest_api_version_history.rst``) is :data:`FEATURES`; the
minimum is the highest of those the sync and its planned reshaper need.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from keystoneauth1 import adapter as ks_adapter
from keystoneauth1 import session as ks_session
from keystoneauth1 import token_endpoint

from virtdriver.placement.errors import (
    MicroversionUnsupported, PlacementRequestError, ProviderNotFound)
from virtdriver.placement.transport import (
    NotAcceptable, RequestCounts, RetryPolicy, Transport, catalog_endpoint)
from virtdriver.redact import redact_userinfo

__all__ = ["FEATURES", "MAX_VERSION", "MIN_VERSION", "PlacementClient",
           "RequestCounts", "RetryPolicy", "parse_version", "version_text"]

#: Feature → (microversion, why virtdriver needs it).
FEATURES: Mapping[str, tuple[tuple[int, int], str]] = {
    "nested": ((1, 14), "parent_provider_uuid / root_provider_uuid: NUMA "
               "cells and devices are children of the compute node"),
    "in_tree": ((1, 14), "GET /resource_providers?in_tree=<root>: one read "
                "lists a whole tree with its generations"),
    "aggregate_generations": ((1, 19), "PUT .../aggregates checks the "
                              "provider generation, so a concurrent "
                              "writer is a 409, not a lost update"),
    "create_returns_provider": ((1, 20), "POST /resource_providers returns "
                                "the provider (its generation) — no GET "
                                "after a create"),
    "forbidden_traits": ((1, 22), "required=!T on GET /resource_providers "
                         "(rebuild-check asks Placement the question)"),
    "error_codes": ((1, 23), "errors carry a code, so a generation "
                    "conflict, inventory in use and a duplicate name are "
                    "told apart without parsing English"),
    "reserved_equals_total": ((1, 26), "reserved may equal total: an "
                              "unavailable bare-metal node reserves its "
                              "one unit"),
    "consumer_generations": ((1, 28), "allocations carry consumer "
                             "generations (moving them safely)"),
    "reshaper": ((1, 30), "POST /reshaper moves inventory and allocations "
                 "in one atomic request (flat <-> nested)"),
    "reparent": ((1, 37), "PUT /resource_providers/{uuid} may change "
                 "parent_provider_uuid (used only when a parent moved)"),
    "consumer_types": ((1, 38), "allocation and reshaper bodies need "
                       "consumer_type from here on"),
    "any_traits": ((1, 39), "required=in:T1,T2"),
}
#: The oldest Placement virtdriver talks to: every feature up to the
#: reshaper (Rocky, 2018).  Re-parenting and newer are used when present.
MIN_VERSION = (1, 30)
#: The newest microversion this code was tested against (Placement 16).
MAX_VERSION = (1, 39)
#: What Placement's ``noauth2`` mode takes as an admin token.
NOAUTH_TOKEN = "admin"
#: The roles sent with it (``noauth2`` reads them from ``X-Roles``; without
#: them it grants only ``admin``, and ``POST /reshaper`` needs ``service``).
#: Behind keystonemiddleware the token's own roles replace the header.
NOAUTH_ROLES = "admin,service"
SERVICE_TYPE = "placement"


def version_text(version: tuple[int, int]) -> str:
    """``(1, 30)`` → ``"1.30"``."""
    return f"{version[0]}.{version[1]}"


def parse_version(text: object) -> tuple[int, int] | None:
    """``"1.30"`` → ``(1, 30)``; ``None`` for anything else."""
    if not isinstance(text, str):
        return None
    match = re.fullmatch(r"(\d{1,4})\.(\d{1,4})", text)
    return (int(match[1]), int(match[2])) if match else None


class PlacementClient:
    """Talks to one Placement service through a keystoneauth1 adapter.

    Build it with :meth:`from_url` (an endpoint and the ``noauth2`` admin
    token, or a given token), :meth:`from_session` (a keystone-authenticated
    session; the endpoint from the service catalog unless overridden), or
    directly from an ``Adapter``.

    Args:
        adapter: a keystoneauth1 adapter for the placement service.
        endpoint_id: how the state file names this service (default: the
            adapter's endpoint URL).
        microversion: a version to start with (from the sync state);
            ``None`` negotiates on the first request.  A version the
            service refuses (406) is renegotiated once.
        retry: how transient failures (5xx, a reset connection) are
            retried per request (:class:`~.transport.RetryPolicy`; its
            ``sleep`` is injectable).
    """

    def __init__(self, adapter: ks_adapter.Adapter, *,
                 endpoint_id: str | None = None,
                 microversion: str | None = None,
                 retry: RetryPolicy | None = None) -> None:
        self._adapter = adapter
        self._endpoint_id = endpoint_id
        self._version = parse_version(microversion) if microversion else None
        self._transport = Transport(adapter, where=self._where, retry=retry)

    @classmethod
    def from_url(cls, url: str, *, token: str | None = None,
                 timeout: float = 30.0, requests_session: Any = None,
                 session: ks_session.Session | None = None,
                 endpoint_id: str | None = None,
                 microversion: str | None = None,
                 retry: RetryPolicy | None = None) -> PlacementClient:
        """A client for ``url`` with a fixed token (Placement's
        ``noauth2`` takes ``admin``, sent with :data:`NOAUTH_ROLES`).

        Without ``token``: the token of the ``virtdriver placement serve``
        at ``url`` when this user's state directory holds one
        (:func:`~.serve_token.served_token`), else ``admin``.

        ``session``: a keystoneauth1 session carrying the TLS and timeout
        options (``[placement]`` ``cafile``, ``certfile``, ``keyfile``,
        ``insecure``, ``timeout`` through
        ``ks_loading.load_session_from_conf_options``); its auth plugin
        becomes the fixed token.  Without it a session is made with
        ``timeout`` and the system's CAs; ``requests_session`` carries a
        custom transport (the in-process embedded service).
        """
        if token is None:
            from virtdriver.placement.serve_token import served_token
            served = served_token(url)
            token = served[0] if served is not None else NOAUTH_TOKEN
        auth = token_endpoint.Token(url, token)
        if session is None:
            session = ks_session.Session(auth=auth, timeout=timeout,
                                         session=requests_session)
        else:
            session.auth = auth
        roles = {"X-Roles": NOAUTH_ROLES} if token == NOAUTH_TOKEN else None
        return cls(ks_adapter.Adapter(
            session, service_type=SERVICE_TYPE, endpoint_override=url,
            connect_retries=0, status_code_retries=0, raise_exc=False,
            additional_headers=roles),
            endpoint_id=redact_userinfo(endpoint_id or url.rstrip("/")),
            microversion=microversion, retry=retry)

    @classmethod
    def from_session(cls, session: ks_session.Session, *,
                     endpoint_override: str | None = None,
                     interface: str | Iterable[str] = "public",
                     region_name: str | None = None,
                     microversion: str | None = None,
                     retry: RetryPolicy | None = None) -> PlacementClient:
        """A client on a keystone-authenticated session: the placement
        endpoint from the catalog (``interface``, ``region_name``) unless
        ``endpoint_override`` names it."""
        return cls(ks_adapter.Adapter(
            session, service_type=SERVICE_TYPE, interface=interface,
            region_name=region_name, endpoint_override=endpoint_override,
            connect_retries=0, status_code_retries=0, raise_exc=False),
            microversion=microversion, retry=retry)

    # -- identity, version, counts ---------------------------------------

    @property
    def endpoint(self) -> str:
        """This service's identity for the sync state: the endpoint URL.

        Raises:
            PlacementError: the catalog could not be read
                (:func:`~.transport.catalog_endpoint`).
        """
        if self._endpoint_id is None:
            url = catalog_endpoint(self._adapter, self._transport.retry)
            if not url:
                raise PlacementRequestError(
                    "the service catalog has no placement endpoint for "
                    "[placement] valid_interfaces and region_name; check "
                    "them, or set endpoint_override")
            self._endpoint_id = redact_userinfo(url.rstrip("/"))
        return self._endpoint_id

    @property
    def counts(self) -> RequestCounts:
        """Every request sent so far, by method (each retry counted)."""
        return RequestCounts(dict(self._transport.counts))

    @property
    def retried(self) -> int:
        """Transient failures retried so far (:mod:`~.transport`)."""
        return self._transport.retried

    @property
    def microversion(self) -> str:
        """The microversion sent on every request (negotiated if need be)."""
        if self._version is None:
            self.negotiate()
        return version_text(self._version)

    @property
    def negotiated(self) -> str | None:
        """The microversion in use, or ``None`` before the first request
        (reading this never sends one)."""
        return version_text(self._version) if self._version else None

    def adopt_microversion(self, text: str) -> None:
        """Use ``text`` (remembered from an earlier run) instead of
        negotiating, unless a version is already chosen or ``text`` is out
        of the range this client supports.  Placement refusing it (406)
        makes the client negotiate after all."""
        version = parse_version(text)
        if (self._version is None and version is not None
                and MIN_VERSION <= version <= MAX_VERSION):
            self._version = version

    def has(self, feature: str) -> bool:
        """Whether the negotiated version offers a :data:`FEATURES` key."""
        self.microversion  # noqa: B018 (negotiates)
        return self._version >= FEATURES[feature][0]

    def negotiate(self) -> str:
        """Ask ``GET /`` for Placement's range and pick the version.

        Raises:
            MicroversionUnsupported: Placement is older than
                :data:`MIN_VERSION`.
            PlacementUnavailable, PlacementRequestError: no usable answer.
        """
        body = self._send("GET", "/", version=None)
        versions = body.get("versions") if isinstance(body, dict) else None
        found = None
        for entry in versions if isinstance(versions, list) else ():
            if isinstance(entry, dict):
                found = parse_version(entry.get("max_version")) or found
        if found is None:
            raise PlacementRequestError(
                f"GET {self.endpoint}/ did not list Placement's "
                "microversions; check that the URL is Placement's root",
                method="GET", path="/")
        if found < MIN_VERSION:
            raise MicroversionUnsupported(
                f"Placement at {self.endpoint} offers microversions up to "
                f"{version_text(found)}; virtdriver needs at least "
                f"{version_text(MIN_VERSION)} ({FEATURES['reshaper'][1]}); "
                "upgrade Placement", method="GET", path="/")
        self._version = min(found, MAX_VERSION)
        return version_text(self._version)

    # -- requests -------------------------------------------------------------

    def request(self, method: str, path: str, *, body: Any = None,
                params: Mapping[str, str] | None = None) -> Any:
        """Send one request at the negotiated microversion.

        Returns the decoded JSON body, or ``None`` for an empty one.

        Raises:
            PlacementError: a subclass naming what failed.
        """
        version = self.microversion
        try:
            return self._send(method, path, body=body, params=params,
                              version=version)
        except NotAcceptable:
            # The version came from a state file or the service was
            # downgraded: renegotiate once.
            self._version = None
            return self._send(method, path, body=body, params=params,
                              version=self.microversion)

    def _send(self, method: str, path: str, **kwargs: Any) -> Any:
        """One request through the transport, its retries included (the
        hook a test's subclass wraps)."""
        return self._transport.send(method, path, **kwargs)

    def _where(self) -> str:
        return self._endpoint_id or "(catalog endpoint)"

    # -- Placement's resources -----------------------------------------------

    def list_providers(self, **filters: str) -> list[dict]:
        """``GET /resource_providers`` with filters (``in_tree=<uuid>``…)."""
        body = self.request("GET", "/resource_providers", params=filters)
        return _field(body, "resource_providers", list, "GET",
                      "/resource_providers")

    def create_provider(self, uuid: str, name: str,
                        parent_uuid: str | None) -> dict:
        """``POST /resource_providers``; returns the new provider."""
        payload = {"uuid": uuid, "name": name}
        if parent_uuid is not None:
            payload["parent_provider_uuid"] = parent_uuid
        body = self.request("POST", "/resource_providers", body=payload)
        return _provider(body, "POST", "/resource_providers")

    def get_provider(self, uuid: str) -> dict | None:
        """``GET /resource_providers/{uuid}``; ``None`` if there is none."""
        path = f"/resource_providers/{uuid}"
        try:
            body = self.request("GET", path)
        except ProviderNotFound:
            return None
        return _provider(body, "GET", path)

    def name_holder(self, name: str) -> dict | None:
        """The provider named ``name`` (names are unique), or ``None``."""
        found = self.list_providers(name=name)
        return found[0] if found else None

    def update_provider(self, uuid: str, name: str,
                        parent_uuid: str | None) -> dict:
        """``PUT /resource_providers/{uuid}``: name (and parent, from
        microversion 1.37)."""
        payload: dict[str, Any] = {"name": name}
        if self.has("reparent"):
            payload["parent_provider_uuid"] = parent_uuid
        path = f"/resource_providers/{uuid}"
        return _provider(self.request("PUT", path, body=payload), "PUT",
                         path)

    def delete_provider(self, uuid: str) -> None:
        """``DELETE /resource_providers/{uuid}``."""
        self.request("DELETE", f"/resource_providers/{uuid}")

    def get_part(self, uuid: str, part: str) -> tuple[int, Any]:
        """``GET /resource_providers/{uuid}/{part}`` for ``inventories``,
        ``traits`` or ``aggregates``: ``(generation, content)``."""
        path = f"/resource_providers/{uuid}/{part}"
        body = self.request("GET", path)
        return (_field(body, "resource_provider_generation", int, "GET",
                       path), _field(body, part, _PART_TYPES[part], "GET",
                                     path))

    def put_part(self, uuid: str, part: str, generation: int,
                 content: Any) -> int:
        """``PUT /resource_providers/{uuid}/{part}`` at ``generation``;
        returns the new generation."""
        path = f"/resource_providers/{uuid}/{part}"
        body = self.request("PUT", path, body={
            "resource_provider_generation": generation, part: content})
        return _field(body, "resource_provider_generation", int, "PUT",
                      path)

    def ensure_trait(self, name: str) -> None:
        """``PUT /traits/{name}`` (created, or already there)."""
        self.request("PUT", f"/traits/{name}")

    def ensure_resource_class(self, name: str) -> None:
        """``PUT /resource_classes/{name}`` (created, or already there)."""
        self.request("PUT", f"/resource_classes/{name}")


_PART_TYPES = {"inventories": dict, "traits": list, "aggregates": list}


def _field(body: Any, name: str, kind: type, method: str, path: str) -> Any:
    value = body.get(name) if isinstance(body, dict) else None
    if not isinstance(value, kind) or isinstance(value, bool):
        raise PlacementRequestError(
            f"{method} {path}: Placement's answer has no {name} "
            f"({kind.__name__}); check that the URL is Placement's",
            method=method, path=path)
    return value


def _provider(body: Any, method: str, path: str) -> dict:
    """A provider object with its generation, as POST/PUT return it."""
    _field(body, "generation", int, method, path)
    return body
