"""What provider config files say, once read and checked.

Frozen records only: :class:`ProviderConfig` (a whole directory), one
:class:`ProviderEntry` per ``providers:`` item, and a :class:`Source` — file,
line and entry — for the entry and for every trait and inventory it names,
so an error or ``explain`` can point at the line that said it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from virtdriver.providers.inventory import Inventory

#: The ``identification: {uuid: ...}`` value meaning "every compute node
#: root this service manages".
EVERY_COMPUTE_NODE = "$COMPUTE_NODE"

_EMPTY: Mapping = MappingProxyType({})


class ProviderConfigError(ValueError):
    """A provider config file (or the directory of them) is refused.

    The message is one line: where (``file:line: providers[i]...``), what
    is wrong, and after ``"; "`` what to do — or, for several problems
    (:meth:`every`), a heading and one such line each.

    Attributes:
        path: the file, when one is to blame (else ``None``).
        line: the 1-based line in it, when known (else ``None``).
        where: the place in the document (``providers[1].traits``), or "".
    """

    def __init__(self, message: str, *, path: str | None = None,
                 line: int | None = None, where: str = "",
                 errors: tuple[ProviderConfigError, ...] = ()) -> None:
        self.path = path
        self.line = line
        self.where = where
        #: Every problem found, one error each (just this one, alone).
        self.errors = errors or (self,)
        super().__init__(message)

    @classmethod
    def every(cls, errors: list[ProviderConfigError]
              ) -> ProviderConfigError:
        """One error for all of ``errors`` (at least one): the error
        itself when alone, else a heading line and one line per problem,
        by file (in the order found) and line."""
        flat = [one for error in errors for one in error.errors]
        if len(flat) == 1:
            return flat[0]
        files = list(dict.fromkeys(e.path for e in flat if e.path))
        flat.sort(key=lambda e: (files.index(e.path) if e.path else -1,
                                 e.line or 0))
        where = (files[0] if len(files) == 1
                 else f"{len(files)} provider config files")
        lines = [f"{where}: {len(flat)} problems; every one must be fixed "
                 "before any file is used:"]
        lines += [f"  {error}" for error in flat]
        first = flat[0]
        return cls("\n".join(lines), path=first.path, line=first.line,
                   where=first.where, errors=tuple(flat))

    @classmethod
    def at(cls, path: str, line: int | None, where: str, problem: str,
           remedy: str) -> ProviderConfigError:
        """``<path>:<line>: <where>: <problem>; <remedy>``."""
        place = f"{path}:{line}" if line else path
        inside = f" {where}:" if where else ""
        return cls(f"{place}:{inside} {problem}; {remedy}", path=path,
                   line=line, where=where)


@dataclass(frozen=True, slots=True)
class Source:
    """Where a provider config file said something.

    Attributes:
        path: the file, as found in the configured directory.
        line: 1-based line of the entry, trait or resource class.
        entry: index of the entry in the file's ``providers`` list.
    """

    path: str
    line: int
    entry: int

    def __str__(self) -> str:
        return f"{self.path}:{self.line} (providers[{self.entry}])"


@dataclass(frozen=True, slots=True)
class Identification:
    """Which provider an entry is for: by ``uuid`` or by ``name``.

    ``uuid`` is lower case, or :data:`EVERY_COMPUTE_NODE`.
    """

    uuid: str | None = None
    name: str | None = None

    @property
    def compute_node(self) -> bool:
        """Whether this is ``uuid: $COMPUTE_NODE`` (every compute node)."""
        return self.uuid == EVERY_COMPUTE_NODE

    @property
    def key(self) -> tuple[str, str]:
        """``("uuid", value)`` or ``("name", value)``: equal keys identify
        a provider twice."""
        if self.uuid is not None:
            return ("uuid", self.uuid)
        return ("name", self.name or "")

    def __str__(self) -> str:
        if self.compute_node:
            return EVERY_COMPUTE_NODE
        kind, value = self.key
        return f"{kind} {value!r}"


@dataclass(frozen=True, slots=True)
class ProviderEntry:
    """One item of a file's ``providers`` list, checked.

    Attributes:
        identification: which provider(s) it is for.
        source: the line of the item (``- identification: ...``).
        traits: each ``traits.additional`` name → its line.
        inventories: each ``inventories.additional`` resource class → the
            record (validated, Placement's defaults filled in).
        inventory_sources: each resource class → the line of its name.
    """

    identification: Identification
    source: Source
    traits: Mapping[str, Source] = field(default_factory=lambda: _EMPTY)
    inventories: Mapping[str, Inventory] = field(
        default_factory=lambda: _EMPTY)
    inventory_sources: Mapping[str, Source] = field(
        default_factory=lambda: _EMPTY)

    def __post_init__(self) -> None:
        for name in ("traits", "inventories", "inventory_sources"):
            object.__setattr__(self, name,
                               MappingProxyType(dict(getattr(self, name))))

    @property
    def empty(self) -> bool:
        """Whether it names no trait and no inventory (Nova ignores such
        an entry; so does virtdriver, with a warning)."""
        return not self.traits and not self.inventories


@dataclass(frozen=True, slots=True)
class ProviderConfig:
    """Every provider config file of a directory, checked together.

    Attributes:
        directory: the directory read (``None`` if built in code).
        files: the files read, in the order read (by name).
        entries: every non-empty entry of every file, in file order; no
            two identify the same provider the same way.
        warnings: one line each: entries ignored, newer minor schema
            versions, a missing directory.
        missing: the directory does not exist — not "no configuration"
            (an empty directory is that): what the files applied before
            is kept until it exists again (``docs/provider-config.md``).
    """

    directory: str | None = None
    files: tuple[str, ...] = ()
    entries: tuple[ProviderEntry, ...] = ()
    warnings: tuple[str, ...] = ()
    missing: bool = False
    #: The entries by ``uuid`` and by ``name`` (the first of each), and
    #: the ``$COMPUTE_NODE`` one: O(1) lookups for each provider planned.
    by_uuid: Mapping[str, ProviderEntry] = field(
        init=False, repr=False, compare=False, default_factory=lambda: _EMPTY)
    by_name: Mapping[str, ProviderEntry] = field(
        init=False, repr=False, compare=False, default_factory=lambda: _EMPTY)
    compute_node: ProviderEntry | None = field(
        init=False, repr=False, compare=False, default=None)

    def __post_init__(self) -> None:
        by_uuid: dict[str, ProviderEntry] = {}
        by_name: dict[str, ProviderEntry] = {}
        default = None
        for entry in self.entries:
            ident = entry.identification
            if ident.compute_node:
                default = default or entry
            elif ident.uuid is not None:
                by_uuid.setdefault(ident.uuid, entry)
            elif ident.name is not None:
                by_name.setdefault(ident.name, entry)
        object.__setattr__(self, "by_uuid", MappingProxyType(by_uuid))
        object.__setattr__(self, "by_name", MappingProxyType(by_name))
        object.__setattr__(self, "compute_node", default)
