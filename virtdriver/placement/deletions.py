"""Deleting the providers gone from the tree: children first, and only
those the caller vouches for.

Candidates are providers listed in the managed trees that the tree no
longer has, providers the sync state recorded (a gone node's whole tree),
and uuids the caller names.  Each is deleted only if ``owned_for`` vouches
for it — a state file can name candidates, never prove them — or, for one
Placement itself lists, if the caller's ``vouches_for_gone(uuid, name,
parent_uuid)`` recognises its identity (a cell whose uuid is derived from
its parent's and its name, under a parent that is ours; a root whose uuid
the driver derives for its name): a new process then still deletes the
cells a switch to flat mode left, with names and parents from Placement,
never from the state file.  A provider
Placement refuses to delete (allocations, someone else's children) is kept
with the reason, and so is its parent.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from virtdriver.placement.errors import (
    PlacementRequestError, ProviderInUse, ProviderNotFound)
from virtdriver.placement.plan import deletion_order
from virtdriver.placement.result import OutcomeBuilder
from virtdriver.placement.state import Listed, SyncState

if TYPE_CHECKING:
    from virtdriver.placement.client import PlacementClient


class Deletions:
    """One sync's deletions.

    Attributes:
        outcomes: uuid → outcome of each candidate with news, in order.
        foreign: someone else's providers found in the managed trees.
    """

    def __init__(self, client: PlacementClient, state: SyncState,
                 owned_for, *, dry_run: bool = False) -> None:
        self.client = client
        self.state = state
        self.owned_for = owned_for
        self.dry_run = dry_run
        self.outcomes: dict[str, OutcomeBuilder] = {}
        self.foreign: list[str] = []

    def _outcome(self, uuid: str, name: str) -> OutcomeBuilder:
        if uuid not in self.outcomes:
            self.outcomes[uuid] = OutcomeBuilder(uuid, name)
        return self.outcomes[uuid]

    def run(self, listed: dict[str, Listed], ours: set[str],
            roots: set[str], remove: Iterable[str] = (), *,
            complete: set[str] | None = None) -> None:
        """Delete providers gone from the tree that the caller vouches
        for, children first.

        Args:
            listed: Placement's providers in the managed trees.
            ours: every uuid in the tree (not candidates).
            roots: the managed trees' roots.
            remove: more candidates (uuids the caller knows are gone).
            complete: the trees ``listed`` holds whole (``in_tree``
                reads); ``None``: all of ``roots``.  A recorded provider
                absent from a whole tree is gone; absent elsewhere (only
                our marked providers were listed) it is a candidate.
        """
        trees = {item.root_uuid for uuid, item in listed.items()
                 if uuid in ours} | roots
        candidates, names, parent_of = [], {}, {}
        root_of: dict[str, str] = {}
        in_our_trees = set()
        for uuid, item in listed.items():
            if uuid in ours or item.root_uuid not in trees:
                continue
            candidates.append(uuid)
            in_our_trees.add(uuid)
            names[uuid], parent_of[uuid] = item.name, item.parent_uuid
            root_of[uuid] = item.root_uuid
        whole = trees if complete is None else complete
        for uuid, known in list(self.state.providers.items()):
            if uuid in ours or uuid in names:
                continue
            if known.root_uuid in whole:
                # Its tree was listed without it: already gone.
                del self.state.providers[uuid]
                continue
            candidates.append(uuid)
            names[uuid], parent_of[uuid] = known.name, known.parent_uuid
            root_of[uuid] = known.root_uuid
        for uuid in remove:
            if uuid not in ours and uuid not in names:
                candidates.append(uuid)
                names[uuid], parent_of[uuid] = uuid, None
        blocked: dict[str, str] = {}
        order = deletion_order(candidates, parent_of)
        proven = self._proven(reversed(order), in_our_trees, names,
                              parent_of, root_of)
        for uuid in order:
            if self.owned_for(uuid) is None and uuid not in proven:
                self._not_ours(uuid, names[uuid], uuid in in_our_trees)
                continue
            if uuid in blocked:
                self._outcome(uuid, names[uuid]).fields["kept"] = (
                    f"its child {blocked[uuid]} was not deleted")
                self._block(uuid, names, parent_of, blocked)
                continue
            self._delete(uuid, names, parent_of, blocked)

    def _proven(self, parents_first: Iterable[str], listed: set[str],
                names: dict, parent_of: dict, root_of: dict) -> set[str]:
        """The listed candidates whose identity the caller recognises,
        each under a parent that is ours (in the tree or proven too);
        ``root_of``: each candidate's root, as listed."""
        vouch = getattr(self.owned_for, "vouches_for_gone", None)
        proven: set[str] = set()
        if vouch is None:
            return proven
        for uuid in parents_first:
            if uuid not in listed:
                continue
            parent = parent_of[uuid]
            parent_ours = (parent is None or parent in proven
                           or self.owned_for(parent) is not None)
            if parent_ours and vouch(uuid, names[uuid], parent,
                                     root_of.get(uuid)):
                proven.add(uuid)
        return proven

    def _not_ours(self, uuid: str, name: str, in_our_tree: bool) -> None:
        self.state.providers.pop(uuid, None)
        if in_our_tree:
            # Someone else's provider in our tree (another agent's device
            # provider): not ours to remove, not news.
            self.foreign.append(uuid)
            return
        self._outcome(uuid, name).fields["kept"] = (
            "gone from the tree, but the caller does not vouch that it is "
            "its own (only the sync state lists it); left in Placement — "
            "delete it by hand if it is stale")

    def _block(self, uuid: str, names: dict, parent_of: dict,
               blocked: dict) -> None:
        parent = parent_of.get(uuid)
        if parent is not None:
            blocked.setdefault(parent, f"{names[uuid]!r} ({uuid})")

    def _delete(self, uuid: str, names: dict, parent_of: dict,
                blocked: dict) -> None:
        outcome = self._outcome(uuid, names[uuid])
        if self.dry_run:
            outcome.fields["deleted"] = True
            return
        try:
            self.client.delete_provider(uuid)
        except ProviderNotFound:
            del self.outcomes[uuid]   # already gone: nothing to say
            self.state.providers.pop(uuid, None)
            return
        except ProviderInUse as exc:
            outcome.fields["kept"] = (
                "it still has allocations; delete or move them (the "
                "reshaper), the next sync deletes it"
                if exc.code == "placement.resource_provider.inuse" else
                "it has child providers that are not ours; remove them "
                "first")
            self._block(uuid, names, parent_of, blocked)
            return
        except PlacementRequestError as exc:
            outcome.fields["kept"] = str(exc)
            self._block(uuid, names, parent_of, blocked)
            return
        outcome.fields["deleted"] = True
        self.state.providers.pop(uuid, None)
        self.state.wrote_aggregates.pop(uuid, None)

