"""What the transport retries and what it does not (keystoneauth's own
exceptions, raised by a stand-in adapter; the real services are in
tests/functional/placement/test_placement_faults.py)."""

from __future__ import annotations

import pytest
from keystoneauth1 import exceptions as ks_exc

from virtdriver.placement import transport
from virtdriver.placement.errors import (
    KeystoneUnavailable, PlacementRequestError, PlacementTLSError,
    PlacementUnreachable)

CERT = ("SSL exception connecting to https://p:8778/: HTTPSConnectionPool("
        "host='p', port=8778): Max retries exceeded with url: / (Caused by "
        "SSLError(SSLCertVerificationError(1, '[SSL: CERTIFICATE_VERIFY_"
        "FAILED] certificate verify failed: self-signed certificate in "
        "certificate chain (_ssl.c:1006)')))")
RESET = ("Unable to establish connection to http://p/: ('Connection "
         "aborted.', RemoteDisconnected('Remote end closed connection "
         "without response'))")
REFUSED = ("Unable to establish connection to http://p/: HTTPConnectionPool"
           "(host='p', port=1): Max retries exceeded (Caused by "
           "NewConnectionError('<…>: Failed to establish a new connection: "
           "[Errno 111] Connection refused'))")


class Raising:
    """An adapter whose every request raises ``exc``."""

    def __init__(self, exc: Exception) -> None:
        self.exc = exc
        self.calls = 0

    def request(self, *args, **kwargs):
        self.calls += 1
        raise self.exc


@pytest.mark.parametrize("exc, kind, tries", [
    (ks_exc.ConnectFailure(RESET), PlacementUnreachable, 4),
    (ks_exc.ServiceUnavailable(), KeystoneUnavailable, 4),
    (ks_exc.ConnectFailure(REFUSED), PlacementUnreachable, 1),
    (ks_exc.ConnectTimeout("Request to http://p/ timed out"),
     PlacementUnreachable, 1),
    (ks_exc.SSLError(CERT), PlacementTLSError, 1),
    (ks_exc.Unauthorized(), PlacementRequestError, 1),   # credentials
])
def test_only_transient_failures_are_retried(exc, kind, tries):
    adapter, sleeps = Raising(exc), []
    sender = transport.Transport(
        adapter, where=lambda: "http://p",
        retry=transport.RetryPolicy(sleep=sleeps.append))

    with pytest.raises(kind) as raised:
        sender.send("GET", "/", version=None)

    assert adapter.calls == tries == sender.counts["GET"]
    assert len(sleeps) == sender.retried == tries - 1
    assert all(0 < s <= 2.0 for s in sleeps)
    assert "\n" not in str(raised.value)


def test_a_certificate_failure_names_the_failure_and_what_to_set():
    error = transport.from_keystoneauth(ks_exc.SSLError(CERT), "GET", "/",
                                        "https://p:8778")
    assert str(error) == (
        "GET /: the TLS connection to Placement at https://p:8778 failed "
        "(certificate verify failed: self-signed certificate in "
        "certificate chain); set [placement] cafile to the CA that signed "
        "its certificate (certfile and keyfile if it wants a client "
        "certificate), or insecure = true to skip verification (tests "
        "only)")
