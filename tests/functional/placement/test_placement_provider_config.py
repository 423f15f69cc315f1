"""Operators' provider config traits reach Placement, and leave it when
their entry is deleted; foreign traits stay (real Placement)."""

from __future__ import annotations

from virtdriver.drivers.fake import FakeDriver
from virtdriver.placement.ownership import TrackerOwnership
from virtdriver.placement.sync import Syncer
from virtdriver.resource_tracker.tracker import ResourceTracker

HEAD = "meta: {schema_version: '1.0'}\nproviders:\n"
RACK = """\
  - identification: {uuid: $COMPUTE_NODE}
    traits: {additional: [CUSTOM_RACK_7]}
"""


def test_config_traits_are_synced_and_removed_with_their_entry(
        tmp_path, client, api):
    config = tmp_path / "provider_config"
    config.mkdir()
    (config / "site.yaml").write_text(HEAD + RACK)
    driver = FakeDriver("numa2-ht")
    driver.init_host("compute-1")
    tracker = ResourceTracker(driver, state_dir=tmp_path / "state",
                              provider_config=config)
    owned = TrackerOwnership(tracker)
    syncer = Syncer(client, tmp_path / "state")

    def cycle():
        owned.note(tracker.update_all())
        result = syncer.sync(tracker.tree, owned_for=owned,
                             remove=owned.gone)
        owned.synced(result)
        assert result.ok, result.describe()

    cycle()
    root = tracker.tree.roots[0].uuid
    assert "CUSTOM_RACK_7" in api.traits(root)
    api.add_traits(root, "CUSTOM_SOMEONE_ELSES")
    (config / "site.yaml").write_text(HEAD)
    cycle()
    assert "CUSTOM_RACK_7" not in api.traits(root)
    assert "CUSTOM_SOMEONE_ELSES" in api.traits(root)


def test_a_deleted_entry_leaves_placement_across_separate_runs(
        tmp_path, client, api):
    """Each run a new tracker (as two `virtdriver sync` runs): the second
    builds its tree afresh, so no diff says the trait went — the record
    does."""
    config = tmp_path / "provider_config"
    config.mkdir()
    (config / "site.yaml").write_text(HEAD + RACK)

    def run():
        driver = FakeDriver("small")
        driver.init_host("compute-1")
        tracker = ResourceTracker(driver, state_dir=tmp_path / "state",
                                  provider_config=config)
        owned = TrackerOwnership(tracker)
        owned.note(tracker.update_all())
        result = Syncer(client, tmp_path / "state").sync(
            tracker.tree, owned_for=owned, remove=owned.gone)
        owned.synced(result)
        assert result.ok, result.describe()
        return tracker.tree.roots[0].uuid

    root = run()
    assert "CUSTOM_RACK_7" in api.traits(root)
    (config / "site.yaml").unlink()
    run()
    assert "CUSTOM_RACK_7" not in api.traits(root)
