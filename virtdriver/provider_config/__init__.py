"""Operators' provider config files: their own traits and inventories.

YAML files in ``[compute] provider_config_location`` (Nova's schema 1.0)
add ``CUSTOM_`` traits and inventories to providers; deleting an entry
removes what it applied on the next update.  ``docs/provider-config.md``
has the rules and a worked example.

| module | one job |
| --- | --- |
| :mod:`.model` | the checked content: entries, sources (file, line) |
| :mod:`.marks` | read YAML safely, keeping each key's and item's line |
| :mod:`.schema` | check one file against schema 1.0 |
| :mod:`.directory` | read a directory, refuse duplicates, change signature |
| :mod:`.apply` | pure planning: what to add and remove, per provider |
| :mod:`.record` | the applied record file (what the files applied, where) |
"""

from virtdriver.provider_config.apply import (
    Plan, ProviderChanges, apply_plan, hold, plan, reported_classes,
    unmatched)
from virtdriver.provider_config.directory import (
    DEFAULT_LOCATION, check_ownership, check_unique, config_files,
    directory_signature, load_directory)
from virtdriver.provider_config.model import (
    EVERY_COMPUTE_NODE, Identification, ProviderConfig, ProviderConfigError,
    ProviderEntry, Source)
from virtdriver.provider_config.record import (
    Applied, AppliedRecord, ProviderRecord, RecordError, RecordFile,
    record_path)

__all__ = [
    "DEFAULT_LOCATION", "EVERY_COMPUTE_NODE", "SCHEMA_VERSION", "Applied",
    "AppliedRecord", "Identification", "Plan", "ProviderChanges",
    "ProviderConfig", "ProviderConfigError", "ProviderEntry",
    "ProviderRecord", "RecordError", "RecordFile", "Source", "apply_plan",
    "check_ownership", "check_unique", "config_files", "directory_signature",
    "hold", "load_directory", "parse_file", "plan", "record_path",
    "reported_classes", "unmatched"]


def __getattr__(name: str):
    # The schema (and YAML with it) is imported when a file is read.
    if name in ("SCHEMA_VERSION", "parse_file"):
        from virtdriver.provider_config import schema
        return getattr(schema, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
