"""Check one provider config file against schema 1.0 (Nova's).

The document::

    meta:
      schema_version: '1.0'
    providers:
      - identification: {uuid: <uuid> | $COMPUTE_NODE}   # or {name: <name>}
        inventories:
          additional:
            - CUSTOM_RC: {total: 4, reserved: 0, min_unit: 1, max_unit: 4,
                          step_size: 1, allocation_ratio: 1.0}
        traits:
          additional: [CUSTOM_TRAIT]

Stricter than Nova in one way: a field the schema does not have is
refused, not ignored — a misspelt ``trait:`` would otherwise drop the
entry's traits, and since deleting an entry removes what it applied, it
would take them off the providers.  Every refusal is a
:class:`~.model.ProviderConfigError` naming the file, line and place; a
file is checked to its end, so one error carries every problem the file
has (:meth:`~.model.ProviderConfigError.every`), not just the first.
"""

from __future__ import annotations

import pathlib
import re
from collections.abc import Iterable
from typing import Any

from virtdriver.capabilities.traits.names import CUSTOM_PREFIX, invalid_reason
from virtdriver.drivers.data_files import kind_of
from virtdriver.provider_config.marks import MarkedList, MarkedMap, read_marked
from virtdriver.provider_config.model import (
    EVERY_COMPUTE_NODE, Identification, ProviderConfigError, ProviderEntry,
    Source)
from virtdriver.providers.errors import InvalidProvider
from virtdriver.providers.inventory import (
    invalid_resource_class_reason, validate_inventory)
from virtdriver.providers.record import MAX_NAME_LENGTH

#: The schema version this virtdriver writes and reads all fields of.
SCHEMA_VERSION = "1.0"
WHAT = "provider config file"
_VERSION = re.compile(r"1\.(0|[1-9][0-9]*)")
_UUID = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-"
                   r"[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")


def parse_file(path: pathlib.Path | str
               ) -> tuple[list[ProviderEntry], list[str]]:
    """The entries of one provider config file, and its warnings.

    Entries naming no trait and no inventory are left out (with a
    warning), as Nova does.

    Raises:
        ProviderConfigError: the file cannot be read safely, or does not
            follow the schema: every problem, each naming file, line and
            place.
    """
    path = pathlib.Path(path)
    data = read_marked(path, WHAT, ProviderConfigError)
    checked = _File(str(path))
    try:
        found = checked.document(data)
    except ProviderConfigError as exc:  # the document cannot go on
        checked.errors.append(exc)
    if checked.errors:
        raise ProviderConfigError.every(checked.errors)
    return found


class _File:
    """The checks, each knowing which file it reads for its messages."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.warnings: list[str] = []
        #: Problems found so far; the checks go on past each one they
        #: can (a field, a list item, an entry) to find the others.
        self.errors: list[ProviderConfigError] = []

    def fail(self, line: int | None, where: str, problem: str,
             remedy: str) -> ProviderConfigError:
        return ProviderConfigError.at(self.path, line, where, problem,
                                      remedy)

    # -- structure ------------------------------------------------------------

    def fields(self, value: Any, where: str, line: int,
               known: Iterable[str], required: Iterable[str] = ()
               ) -> MarkedMap:
        """``value`` as a mapping of only ``known`` keys, ``required`` there."""
        known = tuple(known)
        if not isinstance(value, MarkedMap):
            found = ("nothing" if value is None else kind_of(value))
            raise self.fail(line, where, f"must be a mapping of "
                            f"{', '.join(known)}, not {found}",
                            "write it as field: value lines")
        for key in value:
            if key not in known:
                self.errors.append(self.fail(
                    value.line_of(key), where,
                    f"unknown field {_quote(key)}", "schema "
                    f"{SCHEMA_VERSION} has only {', '.join(known)} here "
                    "(check the spelling)"))
        for key in required:
            if key not in value:
                self.errors.append(self.fail(
                    value.line, where, f"{key!r} is missing",
                    f"add {key}: (see docs/provider-config.md)"))
        return value

    def sequence(self, value: Any, where: str, line: int, what: str
                 ) -> MarkedList:
        """``value`` as a list; nothing (``providers:`` with every entry
        deleted) is an empty one."""
        if value is None:
            return MarkedList()
        if not isinstance(value, MarkedList):
            raise self.fail(line, where, f"must be a list of {what}, not "
                            f"{kind_of(value)}", "write each as a '- ' "
                            "line, or []")
        return value

    # -- the document ---------------------------------------------------------

    def document(self, data: Any) -> tuple[list[ProviderEntry], list[str]]:
        if data is None:
            raise self.fail(1, "", "the file is empty", "write at least "
                            f"meta: {{schema_version: '{SCHEMA_VERSION}'}}")
        top = self.fields(data, "the document", 1, ("meta", "providers"),
                          required=("meta",))
        if "meta" in top:
            try:
                self.meta(top["meta"], top.line_of("meta"))
            except ProviderConfigError as exc:
                self.errors.append(exc)
        if "providers" not in top:
            return [], self.warnings
        providers = self.sequence(top["providers"], "providers",
                                  top.line_of("providers"),
                                  "provider entries")
        entries = []
        for index, item in enumerate(providers):
            try:
                entry = self.entry(item, index, providers.line_of(index))
            except ProviderConfigError as exc:
                self.errors.append(exc)
                continue
            if entry is None:
                continue
            if entry.empty:
                self.warnings.append(
                    f"{entry.source}: {entry.identification} names no "
                    "traits and no inventories; ignored")
            else:
                entries.append(entry)
        return entries, self.warnings

    def meta(self, value: Any, line: int) -> None:
        meta = self.fields(value, "meta", line, ("schema_version",),
                           required=("schema_version",))
        if "schema_version" not in meta:
            return
        version = meta["schema_version"]
        line = meta.line_of("schema_version")
        if not isinstance(version, str):
            raise self.fail(line, "meta.schema_version",
                            f"is {kind_of(version)}, not a string",
                            f"quote it: schema_version: '{SCHEMA_VERSION}'")
        match = _VERSION.fullmatch(version)
        if not match:
            raise self.fail(line, "meta.schema_version",
                            f"{version!r} is not a version this virtdriver "
                            f"reads (1.N)", "write schema_version: "
                            f"'{SCHEMA_VERSION}'")
        if match.group(1) != "0":
            self.warnings.append(
                f"{self.path}:{line}: schema version {version}: this "
                f"virtdriver reads the fields of {SCHEMA_VERSION} (any other "
                "field is refused)")

    def entry(self, value: Any, index: int, line: int
              ) -> ProviderEntry | None:
        """The entry, or ``None`` when its identification is refused
        (its traits and inventories are still checked)."""
        where = f"providers[{index}]"
        item = self.fields(value, where, line,
                           ("identification", "inventories", "traits"),
                           required=("identification",))
        source = Source(self.path, line, index)
        ident = None
        if "identification" in item:
            try:
                ident = self.identification(item["identification"],
                                            f"{where}.identification",
                                            item.line_of("identification"))
            except ProviderConfigError as exc:
                self.errors.append(exc)
        traits = {}
        if "traits" in item:
            traits = self.gathered(self.traits, {}, item["traits"],
                                   f"{where}.traits",
                                   item.line_of("traits"), index)
        inventories, sources = {}, {}
        if "inventories" in item:
            inventories, sources = self.gathered(
                self.inventories, ({}, {}), item["inventories"],
                f"{where}.inventories", item.line_of("inventories"), index,
                ident or Identification(name=where))
        if ident is None:
            return None
        return ProviderEntry(ident, source, traits, inventories, sources)

    def gathered(self, check, default, *args):
        """``check(*args)``, or ``default`` with its refusal noted."""
        try:
            return check(*args)
        except ProviderConfigError as exc:
            self.errors.append(exc)
            return default

    def identification(self, value: Any, where: str, line: int
                       ) -> Identification | None:
        """The identification; ``None`` when it has only unknown
        fields (each already refused)."""
        ident = self.fields(value, where, line, ("uuid", "name"))
        present = [key for key in ("uuid", "name") if key in ident]
        if not present and ident:
            return None
        if len(present) != 1:
            raise self.fail(ident.line, where, "has both uuid and name"
                            if present else "is empty", "identify the "
                            "provider by exactly one of uuid or name")
        if "name" in ident:
            name = ident["name"]
            if not (isinstance(name, str)
                    and 0 < len(name) <= MAX_NAME_LENGTH):
                raise self.fail(
                    ident.line_of("name"), f"{where}.name",
                    f"{kind_of(name)} is not a provider name",
                    f"give a string of 1 to {MAX_NAME_LENGTH} characters")
            return Identification(name=name)
        uuid = ident["uuid"]
        if uuid == EVERY_COMPUTE_NODE:
            return Identification(uuid=EVERY_COMPUTE_NODE)
        if not (isinstance(uuid, str) and _UUID.fullmatch(uuid)):
            raise self.fail(
                ident.line_of("uuid"), f"{where}.uuid",
                f"{kind_of(uuid)} is neither a dashed UUID nor "
                f"{EVERY_COMPUTE_NODE}", "give the provider's uuid "
                "(8-4-4-4-12 hex digits), or identify it by name")
        return Identification(uuid=uuid.lower())

    # -- traits and inventories -----------------------------------------------

    def traits(self, value: Any, where: str, line: int, index: int
               ) -> dict[str, Source]:
        if value is None:  # every trait deleted, the heading left
            return {}
        section = self.fields(value, where, line, ("additional",))
        if "additional" not in section:
            return {}
        where += ".additional"
        names = self.sequence(section["additional"], where,
                              section.line_of("additional"), "trait names")
        found: dict[str, Source] = {}
        for position, name in enumerate(names):
            line = names.line_of(position)
            place = f"{where}[{position}]"
            problem = self.trait_problem(name, line, place, found)
            if problem is not None:
                self.errors.append(problem)
                continue
            found[name] = Source(self.path, line, index)
        return found

    def trait_problem(self, name: Any, line: int, place: str,
                      found: dict[str, Source]
                      ) -> ProviderConfigError | None:
        """Why ``name`` cannot be in the list, or ``None``."""
        if not isinstance(name, str):
            return self.fail(line, place, f"{kind_of(name)} is not a "
                             "trait name", "write the name, quoted if "
                             "YAML reads it as something else")
        reason = invalid_reason(name)
        if reason or not name.startswith(CUSTOM_PREFIX):
            return self.fail(
                line, place, f"{_quote(name)} is not a CUSTOM_ trait"
                + (f" ({reason})" if reason else ""),
                "provider config files set only CUSTOM_[A-Z0-9_]+ "
                "traits (standard traits are the driver's)")
        if name in found:
            return self.fail(line, place, f"{name} appears twice "
                             f"(first at line {found[name].line})",
                             "list it once")
        return None

    def inventories(self, value: Any, where: str, line: int, index: int,
                    ident: Identification) -> tuple[dict, dict]:
        if value is None:
            return {}, {}
        section = self.fields(value, where, line, ("additional",))
        if "additional" not in section:
            return {}, {}
        where += ".additional"
        items = self.sequence(section["additional"], where,
                              section.line_of("additional"),
                              "mappings of resource class: inventory")
        records, sources = {}, {}
        for position, item in enumerate(items):
            place = f"{where}[{position}]"
            if not isinstance(item, MarkedMap):
                self.errors.append(self.fail(
                    items.line_of(position), place,
                    f"{kind_of(item)} is not a mapping",
                    "write CUSTOM_NAME: {total: N, ...}"))
                continue
            for rc, fields in item.items():
                line = item.line_of(rc)
                try:
                    self.resource_class(rc, line, place)
                    if rc in sources:
                        raise self.fail(
                            line, place, f"{rc} appears twice (first at "
                            f"line {sources[rc].line})",
                            "give each resource class once")
                    sources[rc] = Source(self.path, line, index)
                    records[rc] = self.record(rc, fields, line,
                                              f"{place}.{rc}", ident)
                except ProviderConfigError as exc:
                    self.errors.append(exc)
        return records, sources

    def resource_class(self, rc: Any, line: int, place: str) -> None:
        reason = invalid_resource_class_reason(rc)
        if reason is None and rc.startswith(CUSTOM_PREFIX):
            return
        raise self.fail(
            line, place, f"{_quote(rc)} is not a CUSTOM_ resource class"
            + (f" ({reason})" if reason else ""),
            "provider config files set only CUSTOM_[A-Z0-9_]+ resource "
            "classes (standard ones are the driver's)")

    def record(self, rc: str, fields: Any, line: int, place: str,
               ident: Identification):
        if not isinstance(fields, MarkedMap):
            raise self.fail(line, place, f"{kind_of(fields)} is not an "
                            "inventory record", "write {total: N} and any "
                            "of reserved, min_unit, max_unit, step_size, "
                            "allocation_ratio")
        try:
            return validate_inventory(str(ident), {rc: dict(fields)})[rc]
        except InvalidProvider as exc:
            # exc.field is "inventories.<rc>[.<field>]": point at the field.
            name = exc.field.rpartition(".")[2]
            at = fields.line_of(name) if name in fields else fields.line
            suffix = f".{name}" if name in fields or name == "total" else ""
            raise self.fail(at, place + suffix, exc.reason,
                            exc.hint) from None


def _quote(value: Any) -> str:
    """``value`` for a message: repr, cut at 40 characters."""
    shown = repr(value)
    return shown if len(shown) <= 40 else shown[:37] + "..."
