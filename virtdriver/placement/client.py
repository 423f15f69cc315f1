"""A Placement client: keystoneauth1 session and adapter, one microversion.

:class:`PlacementClient` sends every request through a keystoneauth1
``Adapter`` (service-catalog lookup or an endpoint override), with the
microversion negotiated once and sent on every request, and turns each
failure into one of :mod:`virtdriver.placement.errors`.  It counts what it
sends (:attr:`PlacementClient.counts`), so tests and the sync report can
say exactly how many reads and writes a cycle cost.

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
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from keystoneauth1 import adapter as ks_adapter
from keystoneauth1 import exceptions as ks_exc
from keystoneauth1 import session as ks_session
from keystoneauth1 import token_endpoint

from virtdriver.placement.errors import (
    DuplicateProvider, GenerationConflict, InventoryInUse,
    MicroversionUnsupported, PlacementError, PlacementRequestError,
    PlacementServerError, PlacementUnreachable, ProviderInUse,
    ProviderNotFound, UnknownName)

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
_READS = frozenset({"GET", "HEAD"})
_IN_USE = re.compile(r"Inventory for '([^']*)' on resource provider")


def version_text(version: tuple[int, int]) -> str:
    """``(1, 30)`` → ``"1.30"``."""
    return f"{version[0]}.{version[1]}"


def parse_version(text: object) -> tuple[int, int] | None:
    """``"1.30"`` → ``(1, 30)``; ``None`` for anything else."""
    if not isinstance(text, str):
        return None
    match = re.fullmatch(r"(\d{1,4})\.(\d{1,4})", text)
    return (int(match[1]), int(match[2])) if match else None


@dataclass(frozen=True)
class RequestCounts:
    """Requests sent, by method (attempts, answered or not)."""

    by_method: Mapping[str, int]

    @property
    def reads(self) -> int:
        return sum(n for m, n in self.by_method.items() if m in _READS)

    @property
    def writes(self) -> int:
        return sum(n for m, n in self.by_method.items() if m not in _READS)

    @property
    def total(self) -> int:
        return sum(self.by_method.values())

    def __sub__(self, other: RequestCounts) -> RequestCounts:
        diff = Counter(self.by_method)
        diff.subtract(other.by_method)
        return RequestCounts({m: n for m, n in diff.items() if n})

    def __str__(self) -> str:
        return f"{self.total} requests ({self.reads} reads, " \
               f"{self.writes} writes)"


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
    """

    def __init__(self, adapter: ks_adapter.Adapter, *,
                 endpoint_id: str | None = None,
                 microversion: str | None = None) -> None:
        self._adapter = adapter
        self._endpoint_id = endpoint_id
        self._version = parse_version(microversion) if microversion else None
        self._counts: Counter[str] = Counter()

    @classmethod
    def from_url(cls, url: str, *, token: str = NOAUTH_TOKEN,
                 timeout: float = 30.0, requests_session: Any = None,
                 endpoint_id: str | None = None,
                 microversion: str | None = None) -> PlacementClient:
        """A client for ``url`` with a fixed token (Placement's
        ``noauth2`` takes ``admin``, sent with :data:`NOAUTH_ROLES`);
        ``requests_session`` carries a custom transport (the in-process
        embedded service)."""
        session = ks_session.Session(
            auth=token_endpoint.Token(url, token), timeout=timeout,
            session=requests_session)
        roles = {"X-Roles": NOAUTH_ROLES} if token == NOAUTH_TOKEN else None
        return cls(ks_adapter.Adapter(
            session, service_type=SERVICE_TYPE, endpoint_override=url,
            connect_retries=0, status_code_retries=0, raise_exc=False,
            additional_headers=roles),
            endpoint_id=endpoint_id or url.rstrip("/"),
            microversion=microversion)

    @classmethod
    def from_session(cls, session: ks_session.Session, *,
                     endpoint_override: str | None = None,
                     interface: str | Iterable[str] = "public",
                     region_name: str | None = None,
                     microversion: str | None = None) -> PlacementClient:
        """A client on a keystone-authenticated session: the placement
        endpoint from the catalog (``interface``, ``region_name``) unless
        ``endpoint_override`` names it."""
        return cls(ks_adapter.Adapter(
            session, service_type=SERVICE_TYPE, interface=interface,
            region_name=region_name, endpoint_override=endpoint_override,
            connect_retries=0, status_code_retries=0, raise_exc=False),
            microversion=microversion)

    # -- identity, version, counts ---------------------------------------

    @property
    def endpoint(self) -> str:
        """This service's identity for the sync state: the endpoint URL.

        Raises:
            PlacementUnreachable: the catalog could not be read.
        """
        if self._endpoint_id is None:
            try:
                url = self._adapter.get_endpoint()
            except ks_exc.ClientException as exc:
                raise PlacementUnreachable(
                    f"cannot find the placement endpoint in the service "
                    f"catalog: {exc}; check the [placement] auth options or "
                    "pass the endpoint URL") from None
            self._endpoint_id = (url or "").rstrip("/")
        return self._endpoint_id

    @property
    def counts(self) -> RequestCounts:
        """Every request sent so far, by method."""
        return RequestCounts(dict(self._counts))

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
        except _NotAcceptable:
            # The version came from a state file or the service was
            # downgraded: renegotiate once.
            self._version = None
            return self._send(method, path, body=body, params=params,
                              version=self.microversion)

    def _send(self, method: str, path: str, *, body: Any = None,
              params: Mapping[str, str] | None = None,
              version: str | None) -> Any:
        self._counts[method] += 1
        kwargs: dict[str, Any] = {"headers": {"Accept": "application/json"},
                                  "raise_exc": False}
        if version is not None:
            kwargs["microversion"] = version
        if body is not None:
            kwargs["json"] = body
        if params:
            kwargs["params"] = dict(params)
        try:
            response = self._adapter.request(path, method, **kwargs)
        except (ks_exc.ConnectionError, ks_exc.EndpointNotFound,
                ks_exc.DiscoveryFailure) as exc:
            raise PlacementUnreachable(
                f"{method} {path}: Placement at {self._where()} is not "
                f"reachable ({_why(exc)}); start it or fix the URL, then "
                "run again",
                method=method, path=path) from None
        except ks_exc.ClientException as exc:   # keystone refused us
            raise PlacementRequestError(
                f"{method} {path}: keystoneauth could not authenticate or "
                f"find Placement ({type(exc).__name__}: {exc}); check the "
                "[placement] auth options", method=method, path=path) \
                from None
        if response.status_code == 406 and version is not None:
            raise _NotAcceptable()
        if response.status_code >= 400:
            raise _error(method, path, response, self._where())
        if not response.content:
            return None
        try:
            return response.json()
        except ValueError:
            raise PlacementRequestError(
                f"{method} {path}: Placement answered "
                f"{response.status_code} with a body that is not JSON; "
                "check that the URL is Placement's", method=method,
                path=path, status=response.status_code) from None

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


class _NotAcceptable(Exception):
    """406: the microversion sent is not one the service offers."""


def _why(exc: Exception) -> str:
    """``Connection refused`` out of keystoneauth's long message."""
    found = re.search(r"\[Errno -?\d+\] ([^'\")\]]+)", str(exc))
    if found:
        return found[1].strip()
    if isinstance(exc, ks_exc.ConnectTimeout):
        return "timed out"
    return type(exc).__name__


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


#: What Placement's trait handler says when it lost the race above.
_TRAIT_RACE = "concurrently updated the resource provider"


def _error(method: str, path: str, response: Any,
           where: str) -> PlacementError:
    """The exception for one 4xx/5xx answer."""
    status = response.status_code
    code, detail = _describe(response)
    said = f"{method} {path}: Placement answered {status}"
    said += f" {code}" if code and code != "placement.undefined_code" else ""
    said += f": {detail}" if detail else ""
    kwargs = {"method": method, "path": path, "status": status,
              "code": code, "detail": detail}
    if (status == 500 and method == "PUT" and path.endswith("/traits")
            and _TRAIT_RACE in detail):
        # Placement 16's trait handler checks the generation, then bumps
        # it in a second statement; a writer in between makes it fail
        # with a 500 that is a generation conflict (rolled back, nothing
        # changed), as the inventory and aggregate handlers answer 409.
        return GenerationConflict(
            f"{said}; another writer changed the provider between "
            "Placement's generation check and its write — re-read it and "
            "retry", **kwargs)
    if status >= 500:
        return PlacementServerError(
            f"{said}; Placement at {where} has a problem of its own (see "
            "its log) — nothing was changed by this request, the next sync "
            "catches up", **kwargs)
    if status == 409 and code == "placement.concurrent_update":
        return GenerationConflict(
            f"{said}; another writer changed the provider — re-read it and "
            "retry", **kwargs)
    if status == 409 and code == "placement.inventory.inuse":
        match = _IN_USE.search(detail)
        classes = tuple(c.strip() for c in match[1].split(",")) \
            if match else ()
        provider = path.split("/")[2] if path.count("/") >= 2 else ""
        return InventoryInUse(
            f"{said}; allocations use that inventory — move them first "
            "(the reshaper) or keep the inventory", provider=provider,
            resource_classes=classes, **kwargs)
    if status == 409 and code in ("placement.resource_provider.inuse",
                                  "placement.resource_provider."
                                  "cannot_delete_parent"):
        return ProviderInUse(f"{said}; remove its allocations or children "
                             "first", **kwargs)
    if status == 409 and code == "placement.duplicate_name":
        return DuplicateProvider(
            f"{said}; another provider already has that name or uuid — "
            "delete or rename it", **kwargs)
    if status == 404 and path.startswith("/resource_providers/"):
        return ProviderNotFound(f"{said}; the provider is gone", **kwargs)
    if status == 400 and ("No such trait" in detail
                          or "No such resource class" in detail):
        return UnknownName(
            f"{said}; create the CUSTOM_ name first, or upgrade Placement "
            "if a standard name is missing (its os-traits / "
            "os-resource-classes is older)", **kwargs)
    return PlacementRequestError(f"{said}; check the request", **kwargs)


def _describe(response: Any) -> tuple[str | None, str]:
    """Placement's error code and detail, boilerplate stripped."""
    try:
        errors = response.json().get("errors") or [{}]
        first = errors[0] if isinstance(errors[0], dict) else {}
    except (ValueError, AttributeError, IndexError, TypeError):
        return None, (response.text or "").strip()[:300]
    detail = str(first.get("detail") or first.get("title") or "")
    # webob's "The server could not comply…\n\n <the reason>" form.
    detail = detail.split("\n\n", 1)[-1]
    return first.get("code"), " ".join(detail.split())[:500]
