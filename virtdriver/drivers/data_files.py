"""Read YAML/JSON data files (host descriptions, node inventories) and
check their fields.

A data file is read defensively, since a path on the command line can name
anything: it must be a regular file of at most :data:`MAX_FILE_BYTES`,
UTF-8 text, one JSON/YAML document without repeated keys, nested at most
:data:`MAX_DEPTH` levels and holding at most :data:`MAX_VALUES` values
once YAML aliases are expanded (so an alias bomb, "billion laughs", is
refused before any code walks it).  Every refusal is the caller's error
type with a one-line message naming the file.
"""

from __future__ import annotations

import errno
import functools
import json
import pathlib
from collections.abc import Iterable, Mapping
from typing import Any

import os_traits

from virtdriver.capabilities.traits.names import invalid_reason
from virtdriver.long_numbers import long_number_reason
from virtdriver.regular_file import NotRegularFile, read_regular

#: Largest data file read, in bytes (16 MiB).
MAX_FILE_BYTES = 16 * 1024 * 1024
#: Deepest nesting of lists and mappings in a data file.
MAX_DEPTH = 64
#: Most values (scalars, lists, mappings, keys) in a data file, counting
#: what each YAML alias stands for as a copy.
MAX_VALUES = 1_000_000

@functools.cache
def _unique_key_loader() -> type:
    # Made on first use: YAML is imported only when a YAML file is read
    # (a `virtdriver report` of a fake preset reads none).
    import yaml

    base = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

    class _Loader(base):  # type: ignore[misc, valid-type]
        """``safe_load`` (no Python objects) that refuses repeated keys."""

        def construct_mapping(self, node, deep=False):
            seen: dict[Any, Any] = {}
            for key_node, _ in node.value:
                if key_node.tag == "tag:yaml.org,2002:merge":
                    continue  # ``<<: *base``: later keys override, as meant
                key = self.construct_object(key_node, deep=False)
                try:
                    earlier = seen.setdefault(key, key_node.start_mark)
                except TypeError:
                    continue  # unhashable: the base class says so
                if earlier is not key_node.start_mark:
                    raise yaml.constructor.ConstructorError(
                        None, None, f"key {key!r} appears twice (first at "
                        f"line {earlier.line + 1}, column "
                        f"{earlier.column + 1})", key_node.start_mark)
            return super().construct_mapping(node, deep)

    _Loader.__name__ = _Loader.__qualname__ = "UniqueKeyLoader"
    return _Loader


def __getattr__(name: str) -> Any:
    # UniqueKeyLoader: the YAML loader data files are read with; subclass
    # it to pass as ``load_data_file(..., yaml_loader=)`` (e.g. one
    # recording line numbers).  Made when first named.
    if name == "UniqueKeyLoader":
        return _unique_key_loader()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def load_data_file(path: str | pathlib.Path, what: str,
                   error: type[Exception], *,
                   yaml_loader: type | None = None) -> Any:
    """The parsed content of ``path``: JSON for ``.json``, else YAML.

    YAML is read with a safe loader (no Python objects).  The limits in
    the module docstring apply.

    Args:
        path: the file.
        what: what the file holds, for messages ("node inventory").
        error: the exception type to raise, with a message naming the file.
        yaml_loader: a :data:`UniqueKeyLoader` subclass to read YAML with
            (its constructors may return ``dict``/``list`` subclasses).

    Raises:
        error: the file cannot be read, is not a regular file, too big,
            not UTF-8, not valid JSON/YAML, or beyond the limits.
    """
    path = pathlib.Path(path)
    raw = _read(path, what, error)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        raise error(f"{path}: not UTF-8 text: byte 0x{raw[exc.start]:02x} "
                    f"at offset {exc.start} (line {line}): {exc.reason}; "
                    f"save the {what} as UTF-8") from None
    text = text.removeprefix("\ufeff")  # a byte order mark is no content
    is_json = path.suffix == ".json"
    kind = "JSON" if is_json else "YAML"
    import yaml  # here, not at the top: see _unique_key_loader

    try:
        data = (json.loads(text, object_pairs_hook=_unique_pairs) if is_json
                else yaml.load(text, Loader=yaml_loader  # noqa: S506
                               or _unique_key_loader()))
    except (ValueError, yaml.YAMLError) as exc:
        raise error(f"{path}: not valid {kind}: {_one_line(exc)}; fix the "
                    f"{what} there") from None
    except RecursionError:
        raise error(f"{path}: not valid {kind}: nested more than "
                    f"{MAX_DEPTH} levels deep; flatten the {what}") from None
    if is_json:  # no aliases: every value is its own, counted once
        _measure_tree(data, path, what, error)
    else:
        _measure(data, 1, {}, set(), path, what, error)
    return data


def check_fields(data: Any, known: Iterable[str], where: str, what: str,
                 error: type[Exception]) -> Mapping[str, Any]:
    """``data`` as a mapping whose keys are all ``known``.

    Raises:
        error: ``data`` is not a mapping (the message calls it ``what``), or
            has keys outside ``known`` (all of them named, and the known).
    """
    if not isinstance(data, Mapping):
        found = ("nothing (an empty document)" if data is None
                 else type(data).__name__)
        raise error(f"{where}: {what} is a mapping of fields, not {found}; "
                    "write it as field: value pairs")
    known = frozenset(known)
    unknown = sorted(map(str, set(data) - known))
    if unknown:
        # Quote little of what is not ours: the file may be anything
        # (a wrong path can point at a secret).
        shown = [_clip(key) for key in unknown[:_KEYS_SHOWN]]
        if len(unknown) > _KEYS_SHOWN:
            shown.append(f"… ({len(unknown)} in all)")
        raise error(f"{where}: unknown field(s) {', '.join(shown)}"
                    f"; known: {', '.join(sorted(known))}")
    return data


_KEYS_SHOWN = 5
_KEY_CHARS = 24


def _clip(key: str) -> str:
    """``key`` if short and plain, else its start and a count."""
    printable = key.isprintable() and len(key) <= _KEY_CHARS
    return key if printable else (
        f"{key[:8]!r}… ({len(key)} characters)")


def check_trait_list(value: Any, where: str, error: type[Exception],
                     hint: str = "") -> frozenset[str]:
    """``value`` as a set of valid trait names (os-traits or ``CUSTOM_``).

    Raises:
        error: ``value`` is not a list of strings (``hint`` appended), or
            holds a name that is not a valid trait (naming it, why, and a
            ``CUSTOM_`` spelling where one exists).
    """
    if not isinstance(value, (list, tuple)):
        raise error(f"{where} must be a list of trait names, not "
                    f"{kind_of(value)}{hint or '; write it as [A, B]'}")
    for index, name in enumerate(value):
        if not isinstance(name, str):
            raise error(f"{where}[{index}] must be a trait name (a string), "
                        f"not {kind_of(name)}; write the name itself")
        reason = invalid_reason(name)
        if reason:
            custom = os_traits.normalize_name(name)
            raise error(f"{where}: {name!r} is not a valid trait name "
                        f"({reason}); use an os-traits name or a custom one"
                        + (f" such as {custom}" if custom != "CUSTOM_"
                           else " (CUSTOM_ and capitals)"))
    return frozenset(value)


def kind_of(value: Any) -> str:
    """``value`` and its type for messages: ``'false' (str)``, ``[1] (list)``."""
    shown = repr(value)
    if len(shown) > 60:
        shown = shown[:57] + "..."
    return f"{shown} ({type(value).__name__})"


def _read(path: pathlib.Path, what: str, error: type[Exception]) -> bytes:
    try:
        # One byte more than allowed tells a file that grew past the cap.
        raw = read_regular(path, MAX_FILE_BYTES + 1)
    except NotRegularFile as exc:
        if exc.errno == errno.EISDIR:
            raise error(f"{path}: is a directory, not a {what} file; give "
                        "the path of the file itself") from None
        raise error(f"{path}: is not a regular file (a device, pipe or "
                    f"socket); give the path of a {what} file") from None
    except OSError as exc:
        raise error(f"{path}: cannot read the {what}: "
                    f"{exc.strerror or exc}; check the path and its "
                    "permissions") from None
    if len(raw) > MAX_FILE_BYTES:
        raise error(f"{path}: the {what} is larger than {MAX_FILE_BYTES} "
                    f"bytes ({MAX_FILE_BYTES // 2**20} MiB), the most a data "
                    "file may hold; trim it")
    return raw


def _unique_pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result = dict(pairs)
    if len(result) != len(pairs):  # rare: find the first repeated key
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise ValueError(f"key {key!r} appears twice in one object")
            seen.add(key)
    return result


def _one_line(exc: Exception) -> str:
    import yaml

    if isinstance(exc, yaml.MarkedYAMLError) and exc.problem_mark:
        mark = exc.problem_mark
        text = (f"line {mark.line + 1}, column {mark.column + 1}: "
                f"{exc.problem}")
        if exc.context:
            where = exc.context_mark
            text += f" ({exc.context}" + (
                f" at line {where.line + 1}, column {where.column + 1})"
                if where else ")")
        return " ".join(text.split())
    long_number = long_number_reason(exc)
    if long_number is not None:
        return f"{long_number}, longer than any value a data file holds"
    return " ".join(str(exc).split())


def _measure_tree(value: Any, path: pathlib.Path, what: str,
                  error: type[Exception]) -> None:
    """:func:`_measure`'s limits for a document without aliases (JSON:
    every value its own), level by level instead of per container with
    its bookkeeping — a fraction of the cost on a 10,000-node inventory.
    The root is at depth 1; every value must be at depth ``MAX_DEPTH`` or
    above, as :func:`_measure` requires."""
    count, depth, level = 0, 1, [value]
    while True:
        count += len(level)
        if count > MAX_VALUES:
            raise error(f"{path}: holds more than {MAX_VALUES} values "
                        f"(each YAML alias counted as the copy it stands "
                        f"for); a {what} is far smaller: trim it")
        below: list = []
        for item in level:
            if type(item) is dict:
                below.extend(item)  # the keys count as values too
                below.extend(item.values())
            elif type(item) is list:
                below.extend(item)
        if not below:
            return
        if depth == MAX_DEPTH:
            raise error(f"{path}: nested more than {MAX_DEPTH} levels deep; "
                        f"flatten the {what}")
        level, depth = below, depth + 1


def _measure(value: Any, depth: int, sizes: dict[int, tuple[int, int]],
             open_: set[int], path: pathlib.Path, what: str,
             error: type[Exception]) -> tuple[int, int]:
    """(values, height) of ``value`` with aliases expanded; raises past the
    limits.  A container YAML shares between aliases is measured once."""
    if not isinstance(value, (list, dict)):
        return 1, 0
    key = id(value)
    if key in open_:
        raise error(f"{path}: a YAML alias refers to the value that holds "
                    f"it (a structure without end); write the {what} out "
                    "without that alias")
    if key not in sizes:
        if depth > MAX_DEPTH:
            raise error(f"{path}: nested more than {MAX_DEPTH} levels deep; "
                        f"flatten the {what}")
        open_.add(key)
        count, height = 1, 0
        children = (value if isinstance(value, list)
                    else [item for pair in value.items() for item in pair])
        for child in children:
            size, child_height = _measure(child, depth + 1, sizes, open_,
                                          path, what, error)
            count += size
            height = max(height, child_height + 1)
            if count > MAX_VALUES:
                raise error(f"{path}: holds more than {MAX_VALUES} values "
                            "(each YAML alias counted as the copy it stands "
                            f"for); a {what} is far smaller: trim it")
        open_.discard(key)
        sizes[key] = (count, height)
    count, height = sizes[key]
    if depth + height > MAX_DEPTH:
        raise error(f"{path}: nested more than {MAX_DEPTH} levels deep; "
                    f"flatten the {what}")
    return count, height
