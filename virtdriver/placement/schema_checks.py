"""Placement's own schemas, checked once per process instead of per request.

Placement validates each request's query and body with
``jsonschema.validate(instance, schema)``, and ``validate`` first checks
``schema`` itself against JSON Schema's metaschema — on every request.
That check is about half the CPU of a simple ``GET /resource_providers``
on the embedded Placement, and its answer cannot change: the schemas are
constants of Placement's code.  :func:`check_schemas_once` makes the
Placement this process serves check each schema the first time it is used
and validate every request exactly as before (the same validator class,
the same ``best_match`` error).
"""

from __future__ import annotations

from typing import Any

#: Schemas remembered at most (a per-request schema would not be worth
#: remembering; past this, each is checked every time, as before).
MAX_REMEMBERED = 512


class _SchemasCheckedOnce:
    """Stands in for the ``jsonschema`` module inside Placement's modules:
    ``validate`` checks a schema once, everything else is jsonschema's."""

    def __init__(self, jsonschema: Any) -> None:
        self._jsonschema = jsonschema
        # id -> the schema itself, kept alive so its id is never reused.
        self._checked: dict[tuple[int, type], object] = {}

    def __getattr__(self, name: str) -> Any:
        return getattr(self._jsonschema, name)

    def validate(self, instance: Any, schema: Any, cls: Any = None,
                 *args: Any, **kwargs: Any) -> None:
        """``jsonschema.validate``, with the schema's own check done once."""
        jsonschema = self._jsonschema
        if cls is None:
            cls = jsonschema.validators.validator_for(schema)
        key = (id(schema), cls)
        if self._checked.get(key) is not schema:
            cls.check_schema(schema)
            if len(self._checked) < MAX_REMEMBERED:
                self._checked[key] = schema
        validator = cls(schema, *args, **kwargs)
        error = jsonschema.exceptions.best_match(validator.iter_errors(instance))
        if error is not None:
            raise error


def check_schemas_once() -> None:
    """Make the Placement in this process check each of its schemas once
    (idempotent; call after importing ``placement.deploy``)."""
    from placement import util
    from placement.handlers import trait

    for module in (util, trait):
        if not isinstance(module.jsonschema, _SchemasCheckedOnce):
            module.jsonschema = _SchemasCheckedOnce(module.jsonschema)
