"""Our providers where Placement has them elsewhere: renamed, re-parented,
or moved under another tree by someone.

A provider's uuid is ours when the sync's ``owned_for`` vouched for it,
so a provider Placement has with that uuid is ours wherever it is.
:class:`Moves` puts it back where the tree says — ``PUT
/resource_providers/{uuid}`` with the tree's name and parent
(re-parenting needs microversion 1.37) — or, when Placement cannot,
raises :class:`~.errors.ProviderMoved` saying exactly where it is and
what to do.  ``docs/placement.md``, "Our provider under another tree".
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import TYPE_CHECKING

from virtdriver.placement.errors import (
    DuplicateProvider, PlacementError, PlacementTLSError,
    PlacementUnavailable, ProviderMoved)
from virtdriver.placement.result import OutcomeBuilder
from virtdriver.placement.state import Known, Listed
from virtdriver.providers.record import ProviderData

if TYPE_CHECKING:
    from virtdriver.placement.client import PlacementClient


class Moves:
    """Moves one sync's providers back (a helper of ``sync._Run``).

    Args:
        client: the Placement client.
        dry_run: say what would move; write nothing.
        notes: the sync's notes, appended to when a provider is moved back
            from another tree.
    """

    def __init__(self, client: PlacementClient, *, dry_run: bool,
                 notes: list[str]) -> None:
        self.client = client
        self.dry_run = dry_run
        self.notes = notes

    def restore_roots(self, roots: list[str], managed: list[ProviderData],
                      listed: dict[str, Listed],
                      outcome_for: Callable[[str, str], OutcomeBuilder],
                      relist: Callable[[list[str]], dict[str, Listed]]
                      ) -> tuple[dict[str, Listed], set[str]]:
        """Make our roots that Placement has under another provider roots
        again, before anything else, so the reshaper, the deletions and
        the writes see our trees as they are; then ``relist`` them.

        Returns:
            The listing (new if a root moved) and the roots that could not
            be moved back (a dry run, Placement before 1.37): their trees
            are held this sync, each root's outcome says why.
        """
        by_uuid = {p.uuid: p for p in managed}
        moved, stuck = False, set()
        for root in roots:
            item = listed.get(root)
            if item is None or item.parent_uuid is None:
                continue
            desired = by_uuid[root]
            outcome = outcome_for(root, desired.name)
            try:
                self.move(desired, Known(item.uuid, item.name,
                                         item.parent_uuid, item.root_uuid,
                                         item.generation), outcome)
            except (PlacementUnavailable, PlacementTLSError):
                raise
            except PlacementError as exc:
                outcome.error(str(exc))
                stuck.add(root)
                continue
            if self.dry_run:
                stuck.add(root)
            moved = True
        return (relist(roots) if moved and not self.dry_run
                else listed), stuck

    def out_of_gone_parents(
            self, managed: list[ProviderData], listed: dict[str, Listed],
            keep: set[str], wanted: set[str],
            outcome_for: Callable[[str, str], OutcomeBuilder]) -> None:
        """Move our providers whose parent in Placement is leaving (not
        in the tree any more) to their new parent, before the deletions:
        a device provider under a NUMA cell the tree no longer has (a
        switch to flat) would otherwise keep that cell from being deleted
        until the next sync.  ``keep``: providers held this sync;
        ``wanted``: every provider of the tree.  ``listed`` is updated
        with where each moved provider is now.
        """
        for desired in managed:
            item = listed.get(desired.uuid)
            if (item is None or desired.uuid in keep
                    or item.parent_uuid == desired.parent_uuid
                    or item.parent_uuid is None
                    or item.parent_uuid in wanted
                    or desired.parent_uuid not in listed):
                continue
            outcome = outcome_for(desired.uuid, desired.name)
            try:
                moved = self.move(desired, Known(
                    item.uuid, item.name, item.parent_uuid, item.root_uuid,
                    item.generation), outcome)
            except (PlacementUnavailable, PlacementTLSError):
                raise
            except PlacementError as exc:
                outcome.error(str(exc))
                continue
            listed[desired.uuid] = item._replace(
                name=moved.name, parent_uuid=moved.parent_uuid,
                root_uuid=moved.root_uuid, generation=moved.generation)

    def elsewhere(self, desired: ProviderData) -> Listed:
        """Placement refused to create ``desired`` as a duplicate: find
        why.  If Placement has a provider with its uuid, that is our
        provider — moved under another tree by someone, or created by an
        earlier attempt whose answer was lost — returned as listed, to be
        synced (and moved back) like any listed one.

        Raises:
            DuplicateProvider: a provider with another uuid has the name
                (named in the message; it is not ours, so left alone).
        """
        body = self.client.get_provider(desired.uuid)
        if body is not None:
            return Listed.from_body(body)
        holder = self.client.name_holder(desired.name) or {}
        raise DuplicateProvider(
            f"provider {desired.name!r} ({desired.uuid}) cannot be created: "
            f"Placement has another provider of that name "
            f"({holder.get('uuid', 'uuid unknown')}, in the tree of "
            f"{holder.get('root_provider_uuid', '?')}) — not ours, so it "
            "is left alone; rename or delete that provider, or give this "
            "node another name", method="POST", path="/resource_providers",
            status=409, code="placement.duplicate_name")

    def move(self, desired: ProviderData, current: Known,
             outcome: OutcomeBuilder) -> Known:
        """Rename or re-parent the provider if Placement has it otherwise;
        what Placement then holds.

        Raises:
            ProviderMoved: its parent differs and Placement cannot
                re-parent (before 1.37).
        """
        if (current.name == desired.name
                and current.parent_uuid == desired.parent_uuid):
            return current
        elsewhere = (f"our provider {desired.name!r} ({desired.uuid}) is "
                     f"in Placement under parent {current.parent_uuid} in "
                     f"the tree of {current.root_uuid}, not under "
                     f"{desired.parent_uuid or 'no parent'}")
        if (current.parent_uuid != desired.parent_uuid
                and not self.client.has("reparent")):
            raise ProviderMoved(
                f"{elsewhere}, and Placement {self.client.microversion} "
                "cannot re-parent (needs 1.37); delete it in Placement "
                f"(`openstack resource provider delete {desired.uuid}`, "
                "after moving its allocations) and sync again",
                provider=desired.uuid, parent_uuid=current.parent_uuid,
                root_uuid=current.root_uuid)
        if current.name != desired.name:
            outcome.fields["renamed_from"] = current.name
        if current.parent_uuid != desired.parent_uuid:
            outcome.fields["reparented_from"] = current.parent_uuid or ""
        if self.dry_run:
            return current
        body = self.client.update_provider(desired.uuid, desired.name,
                                           desired.parent_uuid)
        if current.root_uuid != desired.root_uuid:
            self.notes.append(f"{elsewhere}: moved back")
        return dataclasses.replace(
            current, name=desired.name, parent_uuid=desired.parent_uuid,
            root_uuid=body.get("root_provider_uuid") or current.root_uuid,
            generation=body["generation"])
