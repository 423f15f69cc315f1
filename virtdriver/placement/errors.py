"""What can go wrong talking to Placement, one exception per case.

Every message is one line: what failed (method, path, provider, resource
class), Placement's own words, then what to do.  The sync tells the
classes apart to decide: :class:`GenerationConflict` is retried,
:class:`PlacementUnavailable` (unreachable, 5xx — Placement's or
keystone's) makes the sync *pending*, :class:`PlacementTLSError` stops it
as failed (a setting to fix), the others fail one provider and are
reported.  Transient failures were already retried by the transport
(:mod:`~.transport`) before any of these reaches the sync.
"""

from __future__ import annotations


class PlacementError(Exception):
    """Base class of every error from :mod:`virtdriver.placement`.

    Attributes:
        method, path: the request (``None`` when not about one request).
        status: the HTTP status (``None`` when there was no answer).
        code: Placement's error code (``placement.concurrent_update``…),
            or ``None``.
        detail: Placement's own description of the problem.
    """

    def __init__(self, message: str, *, method: str | None = None,
                 path: str | None = None, status: int | None = None,
                 code: str | None = None, detail: str = "") -> None:
        super().__init__(message)
        self.method = method
        self.path = path
        self.status = status
        self.code = code
        self.detail = detail


class PlacementUnavailable(PlacementError):
    """Placement cannot serve the request now: nothing changed for it.

    The sync stops, reports itself *pending* and catches up next cycle.
    """


class PlacementUnreachable(PlacementUnavailable):
    """No HTTP answer: connection refused, timed out, or cut."""


class PlacementServerError(PlacementUnavailable):
    """Placement answered 5xx."""


class KeystoneUnavailable(PlacementUnavailable):
    """Keystone answered 5xx while the session fetched a token: the
    environment is failing, the credentials were not judged."""


class PlacementTLSError(PlacementError):
    """The TLS handshake failed (a certificate that cannot be verified,
    a client certificate wanted): a configuration problem, not an outage,
    so the sync stops and reports it rather than waiting for it."""


class PlacementRequestError(PlacementError):
    """Placement refused the request (4xx) for a reason below or another."""


class MicroversionUnsupported(PlacementRequestError):
    """Placement's newest microversion is older than virtdriver needs."""


class GenerationConflict(PlacementRequestError):
    """409 ``placement.concurrent_update``: the provider changed since we
    read its generation.  Re-read it, recompute, retry."""


class InventoryInUse(PlacementRequestError):
    """409 ``placement.inventory.inuse``: an inventory change would drop
    capacity that allocations use.

    Attributes:
        provider: the provider's uuid.
        resource_classes: the classes in use, as Placement names them.
    """

    def __init__(self, message: str, *, provider: str,
                 resource_classes: tuple[str, ...], **kwargs) -> None:
        super().__init__(message, **kwargs)
        self.provider = provider
        self.resource_classes = resource_classes


class ProviderInUse(PlacementRequestError):
    """409 on delete: the provider has allocations (or, with
    ``code == placement.resource_provider.cannot_delete_parent``,
    children)."""


class DuplicateProvider(PlacementRequestError):
    """409 ``placement.duplicate_name``: another provider has that name
    (or uuid)."""


class ProviderMoved(PlacementRequestError):
    """Our provider (its uuid is ours) is in Placement under another
    tree, and this Placement cannot move it back (re-parenting needs
    microversion 1.37).

    Attributes:
        provider: the provider's uuid.
        parent_uuid, root_uuid: where Placement has it.
    """

    def __init__(self, message: str, *, provider: str,
                 parent_uuid: str | None, root_uuid: str | None,
                 **kwargs) -> None:
        super().__init__(message, **kwargs)
        self.provider = provider
        self.parent_uuid = parent_uuid
        self.root_uuid = root_uuid


class ProviderNotFound(PlacementRequestError):
    """404 for a provider's resource: the provider is gone."""


class UnknownName(PlacementRequestError):
    """400: a trait or resource class Placement does not know.

    For a ``CUSTOM_`` name the sync creates it and retries; a standard
    name means Placement's ``os-traits`` / ``os-resource-classes`` is older
    than virtdriver's.
    """
