"""What changed between two provider trees, provider by provider.

``diff(old, new)`` compares two snapshots (or trees, which are snapshotted
first) by uuid.  Records are replaced on write, so a provider untouched
between the two is the same object in both and costs one identity check.

What counts as a change is what sync must send to Placement: creation,
deletion, name, inventory records, traits and aggregates.  Generations are
Placement's bookkeeping, not content, and are ignored.  A provider whose
parent differs (possible only by replacing it through
``populate_from_iterable`` or ``from_json``) shows as deleted and created.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from virtdriver.providers.inventory import Inventory
from virtdriver.providers.record import ProviderData

_EMPTY: frozenset[str] = frozenset()
_NO_CHANGES: Mapping = MappingProxyType({})


@dataclass(frozen=True, slots=True)
class ProviderDiff:
    """The changes to one provider.

    ``inventory`` maps each resource class whose record differs to
    ``(old, new)``, ``None`` standing for "no record".  A created provider
    lists all its content as added, a deleted one all of it as removed.
    ``parent_uuid`` is the parent in the new tree (in the old one for a
    deleted provider); ``renamed_from`` is the old name when it changed.
    """

    uuid: str
    name: str
    parent_uuid: str | None = None
    created: bool = False
    deleted: bool = False
    renamed_from: str | None = None
    inventory: Mapping[str, tuple[Inventory | None, Inventory | None]] = (
        field(default_factory=lambda: _NO_CHANGES, hash=False))
    traits_added: frozenset[str] = _EMPTY
    traits_removed: frozenset[str] = _EMPTY
    aggregates_added: frozenset[str] = _EMPTY
    aggregates_removed: frozenset[str] = _EMPTY


@dataclass(frozen=True, slots=True)
class TreeDiff:
    """The changed providers, in an order sync can apply them in.

    Deletions come first, children before parents; then creations and
    updates in the new tree's order, parents before children.  Unchanged
    providers are not listed.
    """

    providers: tuple[ProviderDiff, ...] = ()

    def __iter__(self) -> Iterator[ProviderDiff]:
        return iter(self.providers)

    def __len__(self) -> int:
        return len(self.providers)

    def __bool__(self) -> bool:
        return bool(self.providers)

    @property
    def created(self) -> list[str]:
        """Uuids of created providers, parents first."""
        return [p.uuid for p in self.providers if p.created]

    @property
    def deleted(self) -> list[str]:
        """Uuids of deleted providers, children first."""
        return [p.uuid for p in self.providers if p.deleted]

    def get(self, uuid: str) -> ProviderDiff | None:
        """The (last) entry for ``uuid``, or ``None`` if it did not change."""
        found = None
        for entry in self.providers:
            if entry.uuid == uuid:
                found = entry
        return found


def diff(old, new) -> TreeDiff:
    """Changes from ``old`` to ``new`` (trees or snapshots).

    Applying them to ``old`` gives ``new``, generations aside.
    """
    old_list = old.snapshot().providers()
    new_list = new.snapshot().providers()
    old_by_uuid = {p.uuid: p for p in old_list}
    new_by_uuid = {p.uuid: p for p in new_list}
    entries = []
    for before in reversed(old_list):
        after = new_by_uuid.get(before.uuid)
        if after is None or after.parent_uuid != before.parent_uuid:
            entries.append(_compare(before, None))
    for after in new_list:
        before = old_by_uuid.get(after.uuid)
        if before is after:
            continue
        if before is not None:
            if before.parent_uuid != after.parent_uuid:
                before = None
            elif _same_content(before, after):
                continue  # e.g. only the generation differs
        entry = _compare(before, after)
        if entry is not None:
            entries.append(entry)
    return TreeDiff(tuple(entries))


def _same_content(before: ProviderData, after: ProviderData) -> bool:
    """Whether nothing sync sends differs (cheaper than building the
    entry :func:`_compare` would throw away)."""
    return (before.name == after.name and before.traits == after.traits
            and before.aggregates == after.aggregates
            and before.inventory == after.inventory)


def _compare(before: ProviderData | None,
             after: ProviderData | None) -> ProviderDiff | None:
    either = after or before
    old_inv = before.inventory if before else {}
    new_inv = after.inventory if after else {}
    inventory = {rc: (old_inv.get(rc), new_inv.get(rc))
                 for rc in sorted(old_inv.keys() | new_inv.keys())
                 if old_inv.get(rc) != new_inv.get(rc)}
    old_traits = before.traits if before else _EMPTY
    new_traits = after.traits if after else _EMPTY
    old_aggs = before.aggregates if before else _EMPTY
    new_aggs = after.aggregates if after else _EMPTY
    renamed = (before.name if before and after and before.name != after.name
               else None)
    entry = ProviderDiff(
        either.uuid, either.name, either.parent_uuid, created=before is None,
        deleted=after is None, renamed_from=renamed,
        inventory=MappingProxyType(inventory),
        traits_added=new_traits - old_traits,
        traits_removed=old_traits - new_traits,
        aggregates_added=new_aggs - old_aggs,
        aggregates_removed=old_aggs - new_aggs)
    if (entry.created or entry.deleted or renamed or inventory
            or old_traits != new_traits or old_aggs != new_aggs):
        return entry
    return None
