"""Which of Placement's providers a sync reads: only ours, whatever the
cloud's size.

An agent marks every provider it syncs (roots and children) with an
aggregate of its own, its *marking aggregate* (:mod:`~.marker`), and
lists them all with one ``GET /resource_providers?member_of=<it>``
(microversion 1.3; ``member_of`` matches a provider's own aggregates, so
children need the mark too).  The answer is proportional to the agent's
own providers: no other agent's provider is ever read.

The mark is a hint, never a proof of ownership (``owned_for`` decides),
and someone may take it away (an operator replacing a provider's
aggregates) or delete the provider.  So a provider that should be there
and is not is looked for in its tree, one ``GET
/resource_providers?in_tree=<root>`` per tree concerned:

* a root missing (a new node; or one made before the mark, by another
  state directory, or unmarked by someone): its tree's listing has the
  providers it holds, gone cells too, so a lost state directory still
  converges as it did before marks;
* a provider the state recorded (it existed when we last looked):
  unmarked or deleted since — its tree's listing tells which;
* in a dry run, any provider missing (a dry run may read, never write,
  and must say the truth about what a sync would do).

A child the state does not know under a listed root (a new device) is
simply created; a 409 duplicate then reads it by its uuid (``Moves``).
The sync then puts the mark back where it is missing, keeping every
other aggregate.  So a steady cycle is one read; a first sync one more
per root.

Without a marking aggregate (``marker=None``) each managed tree is listed
with ``in_tree``: one read per root, still never the whole cloud.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from virtdriver.placement.state import Listed, SyncState
from virtdriver.providers.record import ProviderData

if TYPE_CHECKING:  # keystoneauth1 only when a request is really sent
    from virtdriver.placement.client import PlacementClient


class Listing:
    """One sync's reads of Placement's providers.

    Args:
        client: the Placement client.
        state: the sync state (which providers existed at the last sync).
        marker: the agent's marking aggregate, or ``None`` (one
            ``in_tree`` read per root).
        dry_run: read every tree with a provider missing.

    Attributes:
        complete: the roots whose whole tree the last :meth:`trees` read
            (``in_tree``): a provider recorded there and absent is gone.
    """

    def __init__(self, client: PlacementClient, state: SyncState,
                 marker: str | None, *, dry_run: bool = False) -> None:
        self.client = client
        self.state = state
        self.marker = marker
        self.dry_run = dry_run
        self.complete: set[str] = set()

    def trees(self, roots: list[str], managed: Iterable[ProviderData]
              ) -> dict[str, Listed]:
        """Placement's providers of ``roots``' trees that matter to this
        sync (module doc), by uuid."""
        self.complete = set()
        if not roots:
            return {}
        if self.marker is None:
            return self._in_trees(roots, {})
        listed = _by_uuid(self.client.list_providers(member_of=self.marker))
        suspect = [p.root_uuid for p in managed if p.uuid not in listed
                   and (self.dry_run or p.parent_uuid is None
                        or p.uuid in self.state.providers)]
        wanted = set(roots)
        suspect += [known.root_uuid for uuid, known
                    in self.state.providers.items()
                    if uuid not in listed and known.root_uuid in wanted]
        return self._in_trees(list(dict.fromkeys(suspect)), listed)

    def _in_trees(self, roots: list[str], listed: dict[str, Listed]
                  ) -> dict[str, Listed]:
        for root in roots:
            listed.update(_by_uuid(self.client.list_providers(in_tree=root)))
            self.complete.add(root)
        return listed


def _by_uuid(bodies: list[dict]) -> dict[str, Listed]:
    return {item.uuid: item for item in map(Listed.from_body, bodies)}
