"""Read a YAML or JSON data file (host descriptions, node inventories)."""

from __future__ import annotations

import json
import pathlib
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
