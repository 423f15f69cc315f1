"""What the provider config step says: an entry matching no provider is a
warning (once), a missing directory is a warning naming it (except the
default one, unused), a refused file is said once (issue 19)."""

from __future__ import annotations

import logging
import pathlib

import pytest

from virtdriver.drivers.fake import FakeDriver
from virtdriver.provider_config import DEFAULT_LOCATION
from virtdriver.resource_tracker.tracker import ResourceTracker

HEAD = "meta: {schema_version: '1.0'}\nproviders:\n"
NOBODY = """\
  - identification: {name: no-such-provider}
    traits: {additional: [CUSTOM_X]}
"""


def tracker(state, config) -> ResourceTracker:
    driver = FakeDriver("small")
    driver.init_host("compute-1")
    return ResourceTracker(driver, state_dir=state, provider_config=config)


def said(caplog, level: str) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelname == level]


def test_an_entry_matching_no_provider_is_a_warning_said_once(tmp_path,
                                                              caplog):
    config = tmp_path / "provider_config"
    config.mkdir()
    (config / "site.yaml").write_text(HEAD + NOBODY)
    found = tracker(tmp_path / "state", config)
    caplog.set_level(logging.INFO)

    found.update_all()
    found.update_all()

    assert said(caplog, "WARNING") == [
        f"provider config: {config / 'site.yaml'}:3 (providers[0]): name "
        "'no-such-provider' matches no provider in the tree; ignored until "
        "one appears"]


def test_a_missing_directory_is_a_warning_naming_it(tmp_path, caplog):
    typo = tmp_path / "provider_confg"

    tracker(tmp_path / "state", typo).update_all()

    assert said(caplog, "WARNING") == [
        f"provider config: {typo}: no such directory; no provider config "
        "file is read, and what the files applied before stays until it "
        "exists (an empty directory removes it)"]


def test_the_default_directory_missing_and_unused_is_quiet(tmp_path, caplog):
    if pathlib.Path(DEFAULT_LOCATION).exists():
        pytest.skip(f"{DEFAULT_LOCATION} exists on this machine")

    tracker(tmp_path / "state", DEFAULT_LOCATION).update_all()

    assert said(caplog, "WARNING") == []


def test_a_refused_file_is_said_once_per_change(tmp_path, caplog):
    config = tmp_path / "provider_config"
    config.mkdir()
    (config / "bad.yaml").write_text("providers: [\n")
    found = tracker(tmp_path / "state", config)

    found.update_all()
    found.update_all()

    [message] = said(caplog, "ERROR")
    assert message.startswith("provider config files not applied, nothing "
                              f"they set was changed: {config / 'bad.yaml'}")
