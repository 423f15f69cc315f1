"""Read YAML/JSON data files (host descriptions, node inventories) and
check their fields."""

from __future__ import annotations

import json
import pathlib
from collections.abc import Iterable, Mapping
from typing import Any

import yaml


def load_data_file(path: str | pathlib.Path, what: str,
                   error: type[Exception]) -> Any:
    """The parsed content of ``path``: JSON for ``.json``, else YAML.

    YAML is read with ``safe_load`` (no Python objects).

    Args:
        path: the file.
        what: what the file holds, for messages ("node inventory").
        error: the exception type to raise, with a message naming the file.

    Raises:
        error: the file cannot be read or is not valid JSON/YAML.
    """
    path = pathlib.Path(path)
    try:
        text = path.read_text()
    except OSError as exc:
        raise error(f"{path}: cannot read the {what}: "
                    f"{exc.strerror or exc}") from None
    try:
        return (json.loads(text) if path.suffix == ".json"
                else yaml.safe_load(text))
    except (ValueError, yaml.YAMLError) as exc:
        kind = "JSON" if path.suffix == ".json" else "YAML"
        raise error(f"{path}: not valid {kind}: {exc}") from None


def check_fields(data: Any, known: Iterable[str], where: str, what: str,
                 error: type[Exception]) -> Mapping[str, Any]:
    """``data`` as a mapping whose keys are all ``known``.

    Raises:
        error: ``data`` is not a mapping (the message calls it ``what``), or
            has keys outside ``known`` (all of them named, and the known).
    """
    if not isinstance(data, Mapping):
        raise error(f"{where}: {what} is a mapping of fields, not "
                    f"{type(data).__name__}")
    known = frozenset(known)
    unknown = sorted(set(data) - known)
    if unknown:
        raise error(f"{where}: unknown field(s) {', '.join(map(str, unknown))}"
                    f"; known: {', '.join(sorted(known))}")
    return data
