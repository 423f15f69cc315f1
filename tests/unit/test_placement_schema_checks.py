"""Placement's schemas checked once per process (placement/schema_checks.py):
every request is still validated exactly as ``jsonschema.validate`` does."""

from __future__ import annotations

import importlib.util
import warnings

import jsonschema
import pytest

from virtdriver.placement.schema_checks import _SchemasCheckedOnce

SCHEMA = {"type": "object", "properties": {"total": {"type": "integer",
                                                     "minimum": 1}},
          "required": ["total"], "additionalProperties": False}


@pytest.fixture
def once() -> _SchemasCheckedOnce:
    return _SchemasCheckedOnce(jsonschema)


def test_the_schema_is_checked_once_then_trusted(once, monkeypatch):
    checked = []
    real = jsonschema.Draft4Validator.check_schema
    monkeypatch.setattr(jsonschema.Draft4Validator, "check_schema",
                        classmethod(lambda cls, s: (checked.append(s),
                                                    real(s))[1]))
    for _ in range(3):
        once.validate({"total": 2}, SCHEMA, cls=jsonschema.Draft4Validator)
    assert checked == [SCHEMA]


@pytest.mark.parametrize("instance", [
    {}, {"total": 0}, {"total": "2"}, {"total": 2, "extra": 1}])
def test_a_bad_instance_gets_jsonschema_s_own_error(once, instance):
    with pytest.raises(jsonschema.ValidationError) as ours:
        once.validate(instance, SCHEMA)
    with pytest.raises(jsonschema.ValidationError) as theirs:
        jsonschema.validate(instance, SCHEMA)
    assert ours.value.message == theirs.value.message
    assert list(ours.value.path) == list(theirs.value.path)


def test_a_bad_schema_is_still_refused_every_time(once):
    bad = {"type": "no such type"}
    for _ in range(2):
        with pytest.raises(jsonschema.SchemaError):
            once.validate({}, bad)


def test_everything_else_is_jsonschema_s(once):
    assert once.ValidationError is jsonschema.ValidationError
    assert once.FormatChecker is jsonschema.FormatChecker


def test_placement_uses_it_once_built():
    if importlib.util.find_spec("placement.deploy") is None:
        pytest.skip("openstack-placement is not installed")
    with warnings.catch_warnings():  # webob imports cgi
        warnings.simplefilter("ignore", DeprecationWarning)
        from placement import util
        from placement.handlers import trait

    from virtdriver.placement.schema_checks import check_schemas_once
    check_schemas_once()
    check_schemas_once()  # idempotent: not wrapped twice
    for module in (util, trait):
        assert isinstance(module.jsonschema, _SchemasCheckedOnce)
        assert module.jsonschema._jsonschema is jsonschema
