"""Read a YAML file keeping the line of every key and list item.

:func:`read_marked` is :func:`virtdriver.drivers.data_files.load_data_file`
— the same size, UTF-8, repeated-key, depth and alias limits, the same
messages — with a loader whose mappings and lists remember where their
keys and items are.  Scalars carry no line of their own: a trait name's
line is its list item's, a resource class's is its key's.
"""

from __future__ import annotations

import pathlib
from typing import Any

from virtdriver.drivers.data_files import UniqueKeyLoader, load_data_file

_MAP_TAG = "tag:yaml.org,2002:map"
_SEQ_TAG = "tag:yaml.org,2002:seq"


class MarkedMap(dict):
    """A YAML mapping that knows its own line and each key's (1-based)."""

    line: int = 0
    key_lines: dict

    def line_of(self, key: Any) -> int:
        """The line of ``key`` (the mapping's own if unknown)."""
        return self.key_lines.get(key, self.line)


class MarkedList(list):
    """A YAML sequence that knows its own line and each item's (1-based)."""

    line: int = 0
    item_lines: list

    def line_of(self, index: int) -> int:
        """The line of item ``index``."""
        return self.item_lines[index]


class _MarkedLoader(UniqueKeyLoader):
    """The data-file loader, building :class:`MarkedMap`/:class:`MarkedList`."""


def _construct_map(loader: _MarkedLoader, node: Any):
    data = MarkedMap()
    data.line = node.start_mark.line + 1
    data.key_lines = {}
    yield data
    # Construct first: the repeated-key check must see the node before
    # merge keys (``<<: *base``) are flattened into it.
    value = loader.construct_mapping(node)
    for key_node, _ in node.value:  # flattened now; later keys win
        data.key_lines[loader.construct_object(key_node)] = (
            key_node.start_mark.line + 1)
    data.update(value)


def _construct_seq(loader: _MarkedLoader, node: Any):
    data = MarkedList()
    data.line = node.start_mark.line + 1
    data.item_lines = [item.start_mark.line + 1 for item in node.value]
    yield data
    data.extend(loader.construct_sequence(node))


_MarkedLoader.add_constructor(_MAP_TAG, _construct_map)
_MarkedLoader.add_constructor(_SEQ_TAG, _construct_seq)


def read_marked(path: pathlib.Path, what: str,
                error: type[Exception]) -> Any:
    """The YAML document in ``path``, its mappings and lists marked.

    Raises:
        error: as :func:`~virtdriver.drivers.data_files.load_data_file`
            does (unreadable, too big, not UTF-8, not YAML, repeated key,
            too deep, an alias bomb), one line naming the file.
    """
    return load_data_file(path, what, error, yaml_loader=_MarkedLoader)
