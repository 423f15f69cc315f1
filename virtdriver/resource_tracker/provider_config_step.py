"""The tracker's provider-config step: operators' files applied per node.

:class:`ProviderConfigStep` runs inside each node's update transaction,
after the driver's update and the ownership settlement: it plans, for the
node's providers, what the files in ``[compute] provider_config_location``
add and what deleted entries remove (:mod:`virtdriver.provider_config`),
applies it to the tree and carries the new applied record, which the
tracker saves with the ledger.  A bad file, or an entry naming what the
driver owns, applies nothing and removes nothing that cycle (logged at
``ERROR`` once, and kept in :attr:`ProviderConfigStep.problem`); nor does
a directory that does not exist (a ``WARNING`` naming it, once per
provider whose record it holds).  Either way the providers keep what the
record says the files applied (:func:`~virtdriver.provider_config.hold`),
also in a tree built afresh; the driver's update goes ahead.  After
every node, :meth:`ProviderConfigStep.warn_unmatched` warns once about
each entry that matches no provider.
"""

from __future__ import annotations

import logging
import pathlib

from virtdriver.capabilities.traits.ownership import Ownership
from virtdriver.provider_config import (
    DEFAULT_LOCATION, AppliedRecord, ProviderConfig, ProviderConfigError,
    RecordFile, apply_plan, directory_signature, hold, load_directory, plan,
    reported_classes, unmatched)
from virtdriver.resource_tracker.provider_tree import ProviderTree

LOG = logging.getLogger("virtdriver.resource_tracker.tracker")
#: :meth:`ProviderConfigStep.token` when no directory is configured.
NO_FILES = object()


class ProviderConfigStep:
    """Provider config files for one tracker.

    Args:
        location: the directory of files; ``None``: no provider config
            (nothing applied, nothing recorded, the record left alone).
        state_dir, driver_name: where the applied record lives
            (``provider-config-<driver>.json``).
    """

    def __init__(self, location: pathlib.Path | str | None,
                 state_dir: pathlib.Path, driver_name: str) -> None:
        self.location = None if location is None else pathlib.Path(location)
        self.file = RecordFile(state_dir, driver_name)
        #: Why the files were not applied in the last update, or ``None``.
        self.problem: str | None = None
        self._config: ProviderConfig | None = None
        self._signature: object = None
        # uuid -> traits the record stopped listing in this process, until
        # a sync confirmed them gone from Placement (a tree built afresh
        # never had them, so no diff says they went).
        self._released: dict[str, set[str]] = {}
        # What was logged already, so each problem is said once.
        self._said_problem: str | None = None
        self._said_held: set[str] = set()
        self._said_unmatched: frozenset[str] = frozenset()

    @property
    def enabled(self) -> bool:
        """Whether a directory is configured."""
        return self.location is not None

    def read_record(self) -> AppliedRecord:
        """The applied record as on disk (call under the state lock)."""
        return self.file.read() if self.enabled else AppliedRecord()

    def applied_traits(self, uuid: str) -> frozenset[str]:
        """The traits the files applied to provider ``uuid`` (as last
        saved): the tracker's to sync to Placement."""
        if not self.enabled:
            return frozenset()
        return frozenset(self.file.record.provider(uuid).traits)

    def released_traits(self, uuid: str) -> frozenset[str]:
        """Traits the files stopped giving ``uuid`` in this process that no
        sync has confirmed gone yet: still the tracker's to remove."""
        return frozenset(self._released.get(uuid, ()))

    def forget_released(self, exclude: set[str] = frozenset()) -> None:
        """A sync settled them (but on the providers ``exclude``)."""
        self._released = {uuid: traits for uuid, traits
                          in self._released.items() if uuid in exclude}

    def save_record(self, record: AppliedRecord) -> None:
        """Save ``record`` if it changed (call under the state lock)."""
        if self.enabled:
            self.file.save(record)

    def token(self) -> object | None:
        """What the files are now, as one value the tracker's fast path
        compares by identity: the loaded configuration (the same object
        until the directory changes), :data:`NO_FILES` when no directory
        is configured, ``None`` — never skip a node — when the files
        cannot be applied."""
        if self.location is None:
            return NO_FILES
        return self._load()

    def last_token(self) -> object | None:
        """:meth:`token` as of the last load, without looking at the
        directory (no I/O): whether an update ran with the files the
        cycle began with."""
        if self.location is None:
            return NO_FILES
        return self._config if self.problem is None else None

    def apply(self, tree: ProviderTree, root_uuid: str, scope: list[str],
              owned: Ownership, record: AppliedRecord
              ) -> tuple[AppliedRecord, bool]:
        """Apply the files to the node ``root_uuid`` (its providers
        ``scope``); return the record after it, and whether the files
        left the node alone: nothing changed or logged, no problem."""
        config = self._load()
        if self.location is None:
            return record, True
        if config is None or config.missing:
            return record, self._hold(tree, scope, owned, record, config)
        try:
            # The live tree, not a snapshot: the caller holds its lock,
            # and a snapshot would make the next write copy the index.
            done = plan(config, tree, record, ownership=owned,
                        owned_classes=reported_classes(tree, scope, record),
                        compute_nodes=[root_uuid], scope=scope)
        except ProviderConfigError as exc:
            self._refuse(str(exc))
            return record, self._hold(tree, scope, owned, record, None)
        apply_plan(tree, done)
        for uuid in scope:
            gone = (set(record.provider(uuid).traits)
                    - set(done.record.provider(uuid).traits))
            if gone:
                self._released.setdefault(uuid, set()).update(gone)
        for line in done.describe():
            LOG.info("provider config: %s", line)
        for line in done.kept:
            LOG.info("provider config: %s", line)
        quiet = done.empty and not done.kept and all(
            done.record.provider(uuid) == record.provider(uuid)
            for uuid in scope)
        return done.record, quiet

    def warn_unmatched(self, tree: ProviderTree) -> None:
        """Warn about each entry of the files that matches no provider in
        ``tree`` (call after every node's update; each is said once)."""
        config = self._config if self.problem is None else None
        if self.location is None or config is None or config.missing:
            return
        lines = frozenset(unmatched(config, tree))
        for line in sorted(lines - self._said_unmatched):
            LOG.warning("provider config: %s", line)
        self._said_unmatched = lines

    def _hold(self, tree: ProviderTree, scope: list[str], owned: Ownership,
              record: AppliedRecord, config: ProviderConfig | None) -> bool:
        """Keep the node's providers as the record says (the files cannot
        be used); whether that changed nothing."""
        kept = hold(tree, record, scope, ownership=owned,
                    owned_classes=reported_classes(tree, scope, record))
        apply_plan(tree, kept)
        if config is not None:     # the directory is missing
            for uuid in scope:
                names = sorted({*record.provider(uuid).traits,
                                *record.provider(uuid).inventories})
                if names and uuid not in self._said_held:
                    self._said_held.add(uuid)
                    LOG.warning(
                        "provider config: %s: no such directory; %r keeps "
                        "%s, which the files applied, until it exists "
                        "again (create it empty to remove them)",
                        self.location, tree.record(uuid).name,
                        ", ".join(names))
        return config is not None and kept.empty

    def _load(self) -> ProviderConfig | None:
        if self.location is None:
            return None
        now = directory_signature(self.location)
        if (now is not None and now == self._signature
                and self._config is not None):
            self.problem = None
            return self._config
        try:
            self._config = load_directory(self.location)
        except ProviderConfigError as exc:
            self._config, self._signature = None, None
            self._refuse(str(exc))
            return None
        self._said_problem = None
        if not self._config.missing:
            self._said_held.clear()
        if not self._config.missing or not _is_default(self.location):
            # The default directory missing is the usual "none used".
            for warning in self._config.warnings:
                LOG.warning("provider config: %s", warning)
        self._signature, self.problem = now, None
        return self._config

    def _refuse(self, problem: str) -> None:
        self.problem = problem
        if problem != self._said_problem:   # once, not at every read
            self._said_problem = problem
            LOG.error("provider config files not applied, nothing they set "
                      "was changed: %s", problem)


def _is_default(location: pathlib.Path) -> bool:
    return location == pathlib.Path(DEFAULT_LOCATION)
