"""What is allocated on one provider, read from Placement.

The libvirt driver asks this only for a device provider whose device is
gone, unlisted or re-typed (``device_usage``,
:mod:`virtdriver.drivers.libvirt.device_providers`): a steady cycle reads
nothing, and the cost grows with the devices that change, never with
the cloud.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from virtdriver.placement.errors import PlacementError, ProviderNotFound

if TYPE_CHECKING:
    from virtdriver.placement.client import PlacementClient


def provider_usage(client: PlacementClient
                   ) -> Callable[[str], Mapping[str, int] | None]:
    """``usage(uuid)``: ``GET /resource_providers/{uuid}/usages`` as
    class → amount (empty for a provider Placement does not have), or
    ``None`` when Placement cannot say (unreachable, refused)."""

    def usage(uuid: str) -> Mapping[str, int] | None:
        try:
            body = client.request("GET", f"/resource_providers/{uuid}/usages")
        except ProviderNotFound:
            return {}
        except PlacementError:
            return None
        usages = body.get("usages") if isinstance(body, dict) else None
        if not isinstance(usages, dict):
            return None
        return {rc: int(n) for rc, n in usages.items()
                if isinstance(n, int) and n > 0}

    return usage
