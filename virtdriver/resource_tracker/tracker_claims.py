"""The resource tracker's instance claims (a mixin of
:class:`~.tracker.ResourceTracker`): claims, releases and the no-op
rebuild claim, serialised with every update on the state directory."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from virtdriver.claims.model import Instance
from virtdriver.claims.rebuild import ProviderInfo
from virtdriver.claims.usage import HostUsage, InstanceFit
from virtdriver.resource_tracker.instance_claims import (
    all_claims, check_rebuild_claim, claim_instance, provider_usages,
    release_instance)


class TrackerClaims:
    """Instance claims over a tracker's driver, tree and claims file
    (``self.driver``, ``self.tree``, ``self._claims_file``,
    ``self._state_lock()``)."""

    def instance_claim(self, instance: Instance, nodename: str, *,
                       allocations: Mapping[str, Mapping[str, int]]
                       | None = None,
                       aliases: Mapping[str, Any] | None = None
                       ) -> InstanceFit:
        """Fit ``instance`` onto ``nodename``'s NUMA cells and record it.

        With ``allocations`` (the scheduler's, ``{provider uuid: {resource
        class: amount}}``) it is pinned within exactly the cells they name,
        or refused (:class:`~virtdriver.claims.allocation.
        AllocationRefused`) changing nothing.  ``aliases`` (``[pci]
        alias``, :func:`~virtdriver.conf.pci_alias.pci_aliases`) name the
        devices a flavor's ``pci_passthrough:alias`` asks for.

        Serialised with every other claim, release and update on the state
        directory (threads and processes alike), so claims never
        overcommit; persisted before it returns.  See ``docs/claims.md``.

        Raises:
            InvalidRequest: the flavor and image make no valid request.
            DoesNotFit: nothing fits; which cell lacked what.
            ClaimError: already claimed, no NUMA host, bad claims file.
            LockTimeout: another process held the state directory.
        """
        with self._state_lock(), self.tree.lock:
            return claim_instance(self.driver, self._claims_file, instance,
                                  nodename, allocations=allocations,
                                  tree=self.tree, aliases=aliases)

    def release(self, instance_uuid: str) -> str:
        """Free exactly what ``instance_uuid`` claimed; return its node.

        Raises:
            UnknownClaim: it holds no claim here.
        """
        with self._state_lock(), self.tree.lock:
            return release_instance(self.driver, self._claims_file,
                                    instance_uuid)

    def claims(self) -> dict[str, HostUsage]:
        """nodename → the claims held on it (as persisted)."""
        with self._state_lock():
            return all_claims(self.driver, self._claims_file)

    def usages(self) -> dict[str, Mapping[str, int]]:
        """Provider uuid → resource class → amount claims use."""
        with self._state_lock(), self.tree.lock:
            return provider_usages(self.driver, self._claims_file,
                                   self.tree)

    def rebuild_claim(self, instance: Instance,
                      new_image_properties: Mapping[str, object], *,
                      sharing: Mapping[str, ProviderInfo] | None = None,
                      disk_format: str | None = None) -> None:
        """The no-op rebuild claim: consumes and changes nothing.

        Returns when ``instance`` may be rebuilt with the new image; else
        raises :class:`~virtdriver.claims.rebuild.RebuildRefused` carrying
        every reason (NUMA constraints or consumption that would change,
        image traits its allocated providers lack or forbid — explicit
        ``trait:`` properties and those its properties and ``disk_format``
        imply, docs/claims.md).  Traits come from this tree for allocated
        providers in it, from ``sharing`` for providers outside it.
        """
        check_rebuild_claim(instance, new_image_properties,
                            self.tree.snapshot(), sharing,
                            disk_format=disk_format)
