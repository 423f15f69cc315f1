"""frozen_builder: the fast constructors behind the parsers build ordinary,
frozen models, equal to the ones the public constructors build."""

from __future__ import annotations

import dataclasses
import pickle

import pytest

from virtdriver.capabilities import (
    domain, host, parse_domain_capabilities, parse_host_capabilities)
from virtdriver.frozen import frozen_builder

from tests.corpus import corpus_files

MODEL_CLASSES = {
    cls for module in (host, domain) for cls in vars(module).values()
    if isinstance(cls, type) and dataclasses.is_dataclass(cls)
    and cls.__module__ == module.__name__}


def test_built_instance_is_the_class_and_equal_to_its_constructor():
    build = frozen_builder(host.GuestMachine)
    made = build("pc-q35-8.2", "q35", 288, True)
    assert type(made) is host.GuestMachine
    assert made == host.GuestMachine("pc-q35-8.2", "q35", 288, True)
    assert hash(made) == hash(host.GuestMachine("pc-q35-8.2", "q35", 288,
                                                True))
    assert made != host.GuestMachine("pc-q35-8.2", "q35", 288, False)


def test_built_instance_is_frozen_and_has_no_dict():
    made = frozen_builder(host.Pages)(4, 10)
    with pytest.raises(dataclasses.FrozenInstanceError):
        made.count = 11
    assert not hasattr(made, "__dict__")
    assert made.count == 10


def test_builder_takes_the_same_defaults_and_keywords():
    build = frozen_builder(domain.CPUModel)
    assert build("Haswell") == domain.CPUModel("Haswell")
    assert build("EPYC", usable=False, canonical="EPYC-v1") == \
        domain.CPUModel("EPYC", False, None, False, "EPYC-v1")
    with pytest.raises(TypeError):
        build()  # name has no default, as in CPUModel()


@pytest.mark.parametrize("cls", sorted(MODEL_CLASSES, key=lambda c: c.__name__),
                         ids=lambda c: c.__name__)
def test_every_model_class_can_have_a_builder(cls):
    build = frozen_builder(cls)
    required = [f for f in dataclasses.fields(cls)
                if f.default is dataclasses.MISSING]
    args = [f"v{i}" for i in range(len(required))]
    assert build(*args) == cls(*args)


def test_builder_refuses_what_it_cannot_build_safely():
    @dataclasses.dataclass(slots=True)
    class Mutable:
        x: int

    @dataclasses.dataclass(frozen=True)
    class NoSlots:
        x: int

    @dataclasses.dataclass(frozen=True, slots=True)
    class Checked:
        x: int

        def __post_init__(self):
            raise AssertionError("would be skipped")

    @dataclasses.dataclass(frozen=True, slots=True)
    class Factory:
        x: list = dataclasses.field(default_factory=list)

    for cls in (Mutable, NoSlots, Checked, Factory):
        with pytest.raises(TypeError, match=cls.__name__):
            frozen_builder(cls)


def _models(value):
    """Every dataclass instance inside ``value``, ``value`` included."""
    if dataclasses.is_dataclass(value):
        yield value
        for field in dataclasses.fields(value):
            yield from _models(getattr(value, field.name))
    elif isinstance(value, (tuple, frozenset)):
        for item in value:
            yield from _models(item)


@pytest.mark.parametrize("path", corpus_files("hostcaps")
                         + corpus_files("domcaps"), ids=lambda p: p.name)
def test_parsed_models_behave_like_constructed_ones(path, corpus_dir):
    parse = (parse_host_capabilities if path.parent.name == "hostcaps"
             else parse_domain_capabilities)
    caps = parse(path.read_bytes(), path.name)
    seen = 0
    for model in _models(caps):
        seen += 1
        assert type(model) in MODEL_CLASSES
        rebuilt = dataclasses.replace(model)  # through the public __init__
        assert rebuilt == model and hash(rebuilt) == hash(model)
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(model, dataclasses.fields(model)[0].name, None)
    assert seen > 3
    assert pickle.loads(pickle.dumps(caps)) == caps
    assert dataclasses.asdict(caps)["source"] == path.name
