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


def _separate_run(config, state, client, host="small"):
    """One `virtdriver sync` run: a new tracker with a tree built afresh."""
    driver = FakeDriver(host)
    driver.init_host("compute-1")
    tracker = ResourceTracker(driver, state_dir=state,
                              provider_config=config)
    owned = TrackerOwnership(tracker)
    owned.note(tracker.update_all())
    result = Syncer(client, state).sync(tracker.tree, owned_for=owned,
                                        remove=owned.gone)
    owned.synced(result)
    assert result.ok, result.describe()
    return tracker


INVENTORY = """\
    inventories:
      additional:
        - CUSTOM_FPGA: {total: 2}
"""


def test_a_missing_directory_removes_nothing_until_it_exists_again(
        tmp_path, client, api, caplog):
    """A typo in provider_config_location (or an unmounted disk) must not
    take the operator's traits off Placement; an empty directory does."""
    config = tmp_path / "provider_config"
    config.mkdir()
    (config / "site.yaml").write_text(HEAD + RACK + INVENTORY)
    state = tmp_path / "state"
    root = _separate_run(config, state, client).tree.roots[0].uuid
    assert "CUSTOM_RACK_7" in api.traits(root)
    record = (state / "provider-config-fake.json").read_text()

    typo = tmp_path / "provider_confg"
    for _ in range(2):
        caplog.clear()
        _separate_run(typo, state, client)
        assert "CUSTOM_RACK_7" in api.traits(root)
        assert "CUSTOM_FPGA" in api.inventories(root)
        assert (state / "provider-config-fake.json").read_text() == record
        warned = [r.getMessage() for r in caplog.records
                  if r.levelname == "WARNING"]
        assert any(f"{typo}: no such directory" in m
                   and "CUSTOM_RACK_7" in m for m in warned), warned

    typo.mkdir()                 # said: no files on purpose
    _separate_run(typo, state, client)
    assert "CUSTOM_RACK_7" not in api.traits(root)
    assert "CUSTOM_FPGA" not in api.inventories(root)


def test_a_refused_file_removes_nothing_in_a_separate_run(tmp_path, client,
                                                          api, caplog):
    config = tmp_path / "provider_config"
    config.mkdir()
    (config / "site.yaml").write_text(HEAD + RACK)
    state = tmp_path / "state"
    root = _separate_run(config, state, client).tree.roots[0].uuid
    (config / "bad.yaml").write_text("providers: [\n")

    caplog.clear()
    _separate_run(config, state, client)

    assert "CUSTOM_RACK_7" in api.traits(root)
    refused = [r for r in caplog.records if r.levelname == "ERROR"
               and "bad.yaml" in r.getMessage()]
    assert len(refused) == 1, [r.getMessage() for r in refused]


def test_an_entry_refused_when_planned_removes_nothing_in_a_separate_run(
        tmp_path, client, api, caplog):
    """Refused when planned (a resource class the driver reports on the
    cell), not when read: the traits the files applied before stay too."""
    config = tmp_path / "provider_config"
    config.mkdir()
    (config / "site.yaml").write_text(HEAD + RACK)
    state = tmp_path / "state"
    root = _separate_run(config, state, client, "numa2-ht").tree.roots[0].uuid
    (config / "site.yaml").write_text(HEAD + RACK + """\
  - identification: {name: fake-numa2-ht_NUMA0}
    inventories:
      additional:
        - CUSTOM_MEM_PAGE_SIZE_2048: {total: 1}
""")

    _separate_run(config, state, client, "numa2-ht")

    assert "CUSTOM_RACK_7" in api.traits(root)
    assert any("the driver reports" in r.getMessage()
               for r in caplog.records if r.levelname == "ERROR")
