"""One request to Placement: keystoneauth1 adapter, retries, typed errors.

:class:`Transport` sends a request through a keystoneauth1 ``Adapter``
(which never retries by itself), counts every attempt
(:class:`RequestCounts`), turns a failure into one of
:mod:`virtdriver.placement.errors`, and retries a *transient* one —
5xx, a connection reset or closed without an answer, keystone answering
5xx while it fetches a token — up to :attr:`RetryPolicy.attempts` times
in all with jittered exponential backoff, before the error reaches the
caller (and the sync is declared pending).

Not transient, so never retried: a refused connection or a timeout
(Placement is down or hung: a retry would only wait longer), a
certificate that cannot be verified, any 4xx, and the 500 Placement's
trait handler answers for a generation race (a :class:`GenerationConflict`
the sync re-reads and replans).

Retrying is safe for every request virtdriver sends, ``POST`` included
(``docs/placement.md``, "Transient failures"): writes to a provider's
parts carry its generation and ``POST /reshaper`` every generation it
depends on, so a retry after a write that did land is a 409 the sync
re-reads; ``PUT /traits/…``, ``PUT /resource_classes/…`` and a provider's
``PUT`` are idempotent; a ``POST /resource_providers`` that did land makes
the retry a 409 the client resolves by reading the provider
(:meth:`~.client.PlacementClient.create_provider`); a ``DELETE`` that did
land makes the retry a 404, "already gone".
"""

from __future__ import annotations

import logging
import random
import re
import time
import warnings
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from keystoneauth1 import adapter as ks_adapter
from keystoneauth1 import exceptions as ks_exc
from urllib3.exceptions import InsecureRequestWarning

from virtdriver.placement.counts import RequestCounts  # noqa: F401 (re-exported)
from virtdriver.placement.errors import (
    DuplicateProvider, GenerationConflict, InventoryInUse,
    KeystoneUnavailable, PlacementError, PlacementRequestError,
    PlacementServerError, PlacementTLSError, PlacementUnreachable,
    ProviderInUse, ProviderNotFound, UnknownName)

LOG = logging.getLogger(__name__)
#: Statuses retried: a Placement (or a proxy before it) failing for now.
TRANSIENT_STATUSES = frozenset({500, 502, 503, 504})
#: A connection that was cut or closed without an answer (not refused).
_RESET = re.compile(r"Connection aborted|RemoteDisconnected|Connection "
                    r"reset|Connection broken|BrokenPipe|ECONNRESET", re.I)
_IN_USE = re.compile(r"Inventory for '([^']*)' on resource provider")
#: What Placement's trait handler says when it lost the race above.
_TRAIT_RACE = "concurrently updated the resource provider"
_CERT_FAILURE = re.compile(r"certificate verify failed: ([^(\"')]+)")
_SSL_REASON = re.compile(r"\[SSL: [A-Z_0-9]+\] ([^(\"')]+)")
_SSL_ERROR = re.compile(r"SSL\w*Error\(\d+, '([^'(]+)")


@dataclass(frozen=True)
class RetryPolicy:
    """How often and how patiently a transient failure is retried.

    Attributes:
        attempts: tries per request, the first included (1: no retry).
        backoff: mean delay before the first retry, in seconds; doubled
            for each further one, times a random factor in [0.5, 1.5).
        max_delay: the longest delay.
        sleep: how to wait (tests pass a recorder, so they do not wait).
    """

    attempts: int = 4
    backoff: float = 0.1
    max_delay: float = 2.0
    sleep: Callable[[float], None] = time.sleep

    def delay(self, retry: int) -> float:
        """The wait before retry number ``retry`` (1 for the first)."""
        return min(self.max_delay, self.backoff * 2 ** (retry - 1)
                   * (0.5 + random.random()))


#: One try per request.
NO_RETRY = RetryPolicy(attempts=1)
#: The policy of a client not given one (looked up when the client is
#: made, so a test may replace it).
DEFAULT_RETRY = RetryPolicy()


class NotAcceptable(Exception):
    """406: the microversion sent is not one the service offers."""


class Transport:
    """Sends requests through ``adapter``, retrying transient failures.

    Args:
        adapter: a keystoneauth1 adapter (``raise_exc=False``, no retries
            of its own).
        where: names the service in messages (its endpoint, or "the
            catalog endpoint" before it is known).
        retry: the :class:`RetryPolicy` (default :data:`DEFAULT_RETRY`).
    """

    def __init__(self, adapter: ks_adapter.Adapter, *,
                 where: Callable[[], str],
                 retry: RetryPolicy | None = None) -> None:
        self.adapter = adapter
        self.where = where
        self.retry = retry or DEFAULT_RETRY
        if getattr(getattr(adapter, "session", None), "verify", True) is False:
            _unverified()
        self.counts: Counter[str] = Counter()
        #: Transient failures retried so far.
        self.retried = 0

    def send(self, method: str, path: str, *, body: Any = None,
             params: Mapping[str, str] | None = None,
             version: str | None) -> Any:
        """Send one request; the decoded JSON body (``None`` if empty).

        Raises:
            NotAcceptable: a 406 to the given ``version``.
            PlacementError: a subclass naming what failed, after the
                retries a transient failure gets.
        """
        retry = 0
        while True:
            try:
                return self._once(method, path, body=body, params=params,
                                  version=version)
            except _Transient as exc:
                retry += 1
                if retry >= max(1, self.retry.attempts):
                    raise exc.error from None
                self.retried += 1
                self.retry.sleep(self.retry.delay(retry))

    def _once(self, method: str, path: str, *, body: Any,
              params: Mapping[str, str] | None, version: str | None) -> Any:
        self.counts[method] += 1
        kwargs: dict[str, Any] = {"headers": {"Accept": "application/json"},
                                  "raise_exc": False}
        if version is not None:
            kwargs["microversion"] = version
        if body is not None:
            kwargs["json"] = body
        if params:
            # A list of pairs keeps a repeated key (same_subtree).
            kwargs["params"] = (list(params) if isinstance(params, list)
                                else dict(params))
        try:
            response = self.adapter.request(path, method, **kwargs)
        except ks_exc.ClientException as exc:
            error = from_keystoneauth(exc, method, path, self.where())
            if isinstance(error, KeystoneUnavailable) or (
                    isinstance(error, PlacementUnreachable)
                    and _RESET.search(str(exc))):
                raise _Transient(error) from None
            raise error from None
        status = response.status_code
        if status == 406 and version is not None:
            raise NotAcceptable()
        if status >= 400:
            error = from_response(method, path, response, self.where())
            if isinstance(error, PlacementServerError) and \
                    status in TRANSIENT_STATUSES:
                raise _Transient(error)
            raise error
        if not response.content:
            return None
        try:
            return response.json()
        except ValueError:
            raise PlacementRequestError(
                f"{method} {path}: Placement answered {status} with a body "
                "that is not JSON; check that the URL is Placement's",
                method=method, path=path, status=status) from None


def _unverified() -> None:
    """``insecure = true``: one warning, not urllib3's on every request."""
    warnings.filterwarnings("ignore", category=InsecureRequestWarning)
    LOG.warning("[placement] insecure = true: TLS certificates are not "
                "verified; set cafile instead outside tests")


class _Transient(Exception):
    """Carries an error worth retrying."""

    def __init__(self, error: PlacementError) -> None:
        super().__init__(str(error))
        self.error = error


def why(exc: Exception) -> str:
    """``Connection refused`` out of keystoneauth's long message."""
    found = re.search(r"\[Errno -?\d+\] ([^'\")\]]+)", str(exc))
    if found:
        return found[1].strip()
    if isinstance(exc, ks_exc.ConnectTimeout):
        return "timed out"
    if _RESET.search(str(exc)):
        return "connection closed without an answer"
    return type(exc).__name__


def tls_reason(exc: Exception) -> str:
    """``certificate verify failed: self-signed certificate`` (or the
    TLS library's own words) out of keystoneauth's ``SSLError``."""
    text = str(exc)
    found = _CERT_FAILURE.search(text)
    if found:
        return f"certificate verify failed: {found[1].strip()}"
    found = _SSL_REASON.search(text) or _SSL_ERROR.search(text)
    return found[1].strip() if found else type(exc).__name__


def tls_message(service: str, where: str, exc: Exception) -> str:
    """One line for a TLS failure talking to ``service`` at ``where``."""
    return (f"the TLS connection to {service} at {where} failed "
            f"({tls_reason(exc)}); set [placement] cafile to the CA that "
            "signed its certificate (certfile and keyfile if it wants a "
            "client certificate), or insecure = true to skip verification "
            "(tests only)")


def catalog_endpoint(adapter: ks_adapter.Adapter,
                     retry: RetryPolicy | None = None) -> str | None:
    """The placement endpoint ``adapter`` finds in keystone's catalog
    (``None``: the catalog has none), keystone 5xx and resets retried as
    requests are.

    Raises:
        KeystoneUnavailable, PlacementUnreachable: keystone failing or
            not answering (the environment: try later).
        PlacementTLSError: keystone's certificate cannot be verified.
        PlacementRequestError: keystone refused the credentials.
    """
    retry = retry or DEFAULT_RETRY
    attempt = 0
    while True:
        attempt += 1
        try:
            return adapter.get_endpoint()
        except ks_exc.ClientException as exc:
            error = catalog_error(exc)
            transient = isinstance(error, KeystoneUnavailable) or (
                isinstance(error, PlacementUnreachable)
                and _RESET.search(str(exc)))
            if not transient or attempt >= max(1, retry.attempts):
                raise error from None
            retry.sleep(retry.delay(attempt))


def catalog_error(exc: ks_exc.ClientException) -> PlacementError:
    """The error for a catalog lookup keystoneauth could not complete."""
    if isinstance(exc, ks_exc.SSLError):
        return PlacementTLSError(tls_message(
            "keystone", "the [placement] auth_url", exc))
    if isinstance(exc, ks_exc.ConnectionError):
        return PlacementUnreachable(
            f"keystone at the [placement] auth_url is not reachable "
            f"({why(exc)}); start it or fix auth_url")
    if isinstance(exc, ks_exc.HttpError) and exc.http_status >= 500:
        return KeystoneUnavailable(
            f"keystone at the [placement] auth_url answered "
            f"{exc.http_status} ({exc.message}); it has a problem of its "
            "own (see its log) — the credentials were not judged",
            status=exc.http_status)
    return PlacementRequestError(
        f"keystone refused the [placement] credentials or could not find "
        f"Placement ({type(exc).__name__}: {exc}); check the [placement] "
        "auth options")


def from_keystoneauth(exc: ks_exc.ClientException, method: str, path: str,
                      where: str) -> PlacementError:
    """The error for a request keystoneauth could not complete."""
    kwargs = {"method": method, "path": path}
    if isinstance(exc, ks_exc.SSLError):
        return PlacementTLSError(
            f"{method} {path}: {tls_message('Placement', where, exc)}",
            **kwargs)
    if isinstance(exc, (ks_exc.ConnectionError, ks_exc.EndpointNotFound,
                        ks_exc.DiscoveryFailure)):
        return PlacementUnreachable(
            f"{method} {path}: Placement at {where} is not reachable "
            f"({why(exc)}); start it or fix the URL, then run again",
            **kwargs)
    if isinstance(exc, ks_exc.HttpError) and exc.http_status >= 500:
        return KeystoneUnavailable(
            f"{method} {path}: keystone answered {exc.http_status} while "
            f"logging in to Placement ({exc.message}); it has a problem of "
            "its own (see its log) — nothing was sent, the next sync "
            "catches up", status=exc.http_status, **kwargs)
    return PlacementRequestError(
        f"{method} {path}: keystoneauth could not authenticate or find "
        f"Placement ({type(exc).__name__}: {exc}); check the [placement] "
        "auth options", **kwargs)


def from_response(method: str, path: str, response: Any,
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
