"""The directory of provider config files: read them all, check them
together, and tell cheaply whether any changed.

``[compute] provider_config_location`` names the directory.  Its files
ending in ``.yaml`` or ``.yml`` (not hidden ones, not in subdirectories)
are read in name order; one bad file refuses the whole directory, so a
half-read configuration is never applied — and never removes anything;
nor does a directory that does not exist.  Every file is still checked,
so the refusal lists every problem of every file at once.
"""

from __future__ import annotations

import os
import pathlib
from collections.abc import Iterable

from virtdriver.conf.defaults import PROVIDER_CONFIG_LOCATION
from virtdriver.capabilities.traits.ownership import Ownership
from virtdriver.provider_config.model import (
    ProviderConfig, ProviderConfigError, ProviderEntry)
from virtdriver.state_file import Signature, signature

#: File name endings read from the directory.
SUFFIXES = (".yaml", ".yml")
#: Where ``[compute] provider_config_location`` points by default.
DEFAULT_LOCATION = PROVIDER_CONFIG_LOCATION


def config_files(directory: pathlib.Path | str) -> list[pathlib.Path]:
    """The provider config files in ``directory``, by name; none if it
    does not exist.

    Raises:
        ProviderConfigError: ``directory`` is not a directory, or cannot
            be listed.
    """
    directory = pathlib.Path(directory)
    try:
        names = sorted(entry.name for entry in os.scandir(directory))
    except FileNotFoundError:
        return []
    except NotADirectoryError:
        raise ProviderConfigError(
            f"{directory}: is not a directory; point [compute] "
            "provider_config_location at the directory holding the "
            "provider config files", path=str(directory)) from None
    except OSError as exc:
        raise ProviderConfigError(
            f"{directory}: cannot list the provider config files: "
            f"{exc.strerror or exc}; make the directory readable by this "
            "service", path=str(directory)) from None
    return [directory / name for name in names
            if name.endswith(SUFFIXES) and not name.startswith(".")]


def load_directory(directory: pathlib.Path | str) -> ProviderConfig:
    """Read and check every provider config file in ``directory``.

    A missing directory gives a configuration with ``missing`` set (a
    typo in the option, an unmounted disk): it applies nothing and, unlike
    an empty directory, removes nothing (the tracker keeps what the files
    applied before until the directory exists again).

    Raises:
        ProviderConfigError: a file is refused (:func:`.schema.parse_file`),
            or two entries identify one provider the same way (within a
            file or across files); nothing of the directory is used.  It
            carries every problem found (``errors``).
    """
    directory = pathlib.Path(directory)
    files = config_files(directory)
    warnings: list[str] = []
    if not files and not directory.exists():
        return ProviderConfig(str(directory), warnings=(
            f"{directory}: no such directory; no provider config file is "
            "read, and what the files applied before stays until it "
            "exists (an empty directory removes it)",), missing=True)
    entries: list[ProviderEntry] = []
    if files:  # the schema, and YAML with it, only for files to read
        from virtdriver.provider_config.schema import parse_file
    errors: list[ProviderConfigError] = []
    for path in files:
        try:
            found, notes = parse_file(path)
        except ProviderConfigError as exc:
            errors.append(exc)
            continue
        entries.extend(found)
        warnings.extend(notes)
    try:
        check_unique(entries)
    except ProviderConfigError as exc:
        errors.append(exc)
    if errors:
        raise ProviderConfigError.every(errors)
    return ProviderConfig(str(directory), tuple(map(str, files)),
                          tuple(entries), tuple(warnings))


def check_unique(entries: Iterable[ProviderEntry]) -> None:
    """Refuse two entries with the same ``uuid`` (or ``$COMPUTE_NODE``) or
    the same ``name``, in one file or in two.

    Raises:
        ProviderConfigError: at each second one, naming the first.
    """
    first: dict[tuple[str, str], ProviderEntry] = {}
    errors = []
    for entry in entries:
        earlier = first.setdefault(entry.identification.key, entry)
        if earlier is not entry:
            errors.append(ProviderConfigError.at(
                entry.source.path, entry.source.line,
                f"providers[{entry.source.entry}]",
                f"{entry.identification} is identified again (first at "
                f"{earlier.source})", "merge the two entries into one"))
    if errors:
        raise ProviderConfigError.every(errors)


def check_ownership(config: ProviderConfig, ownership: Ownership,
                    owned_classes: Iterable[str] = ()) -> None:
    """Refuse a trait the driver owns, or a resource class it reports.

    The driver sets and removes what it owns on its own; a file setting
    the same name would fight it (or make its removal look like drift).

    Raises:
        ProviderConfigError: naming every such trait and resource class.
    """
    owned_classes = frozenset(owned_classes)
    errors = []
    for entry in config.entries:
        for trait, source in entry.traits.items():
            if ownership.owns(trait):
                errors.append(ProviderConfigError.at(
                    source.path, source.line, f"providers[{source.entry}]"
                    ".traits", f"{trait} is owned by the driver (it sets "
                    "and removes it itself)", "remove it from the file"))
        for rc, source in entry.inventory_sources.items():
            if rc in owned_classes:
                errors.append(ProviderConfigError.at(
                    source.path, source.line, f"providers[{source.entry}]"
                    ".inventories", f"{rc} is a resource class the driver "
                    "reports itself", "remove it from the file"))
    if errors:
        raise ProviderConfigError.every(errors)


DirectorySignature = tuple[Signature | None, tuple[tuple[str, Signature |
                                                          None], ...]]


def directory_signature(directory: pathlib.Path | str
                        ) -> DirectorySignature | None:
    """A cheap identity of the directory's configuration (a ``stat`` per
    file): re-read it with :func:`load_directory` only when this changed.

    ``None`` when the directory cannot be listed (read it to get the
    error).  An edit in place within one clock tick of the last read may
    go unseen until the next change; saving a file by rename (as editors
    do) always changes it.
    """
    directory = pathlib.Path(directory)
    try:
        files = config_files(directory)
    except ProviderConfigError:
        return None
    return signature(directory), tuple((str(path), signature(path)) for path in files)
