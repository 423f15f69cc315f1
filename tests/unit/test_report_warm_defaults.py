"""The default configuration without oslo.config answers what
``make_conf()`` answers, and the names the CLI keeps instead of importing
still match what they stand for."""

from __future__ import annotations

import importlib

import pytest

from virtdriver.cli import errors
from virtdriver.conf import defaults, options
from virtdriver.conf.defaults import DefaultConf, state_dir_from
from virtdriver.conf.disk import disk_config
from virtdriver.conf.guest import trait_config
from virtdriver.conf.pinning import pinning_config


def own_options():
    return [(group, opt.dest) for group, opts in options._own_opts()
            for opt in opts]


@pytest.mark.parametrize(("group", "name"), own_options())
def test_every_default_is_make_confs(group, name):
    real = options.make_conf()
    conf = DefaultConf()
    assert conf[group][name] == real[group][name]
    assert getattr(getattr(conf, group), name) == real[group][name]
    assert type(conf[group][name]) is type(real[group][name])


def test_the_same_options_and_no_more():
    conf = DefaultConf()
    assert sorted((g, n) for g in conf for n in conf[g]) \
        == sorted(own_options())


def test_derived_configs_equal_make_confs():
    real = options.make_conf()
    assert trait_config(DefaultConf()) == trait_config(real)
    assert pinning_config(DefaultConf()) == pinning_config(real)
    assert disk_config(DefaultConf()) == disk_config(real)
    assert DefaultConf().host is real.host is None
    assert state_dir_from(DefaultConf()) is None
    assert DefaultConf().config_file == ()


def test_lists_are_fresh_copies():
    conf = DefaultConf()
    conf.libvirt.cpu_models.append("Skylake")
    assert conf.libvirt.cpu_models == []
    assert defaults.DEFAULTS["libvirt"]["cpu_models"] == []


def test_missing_names_say_what_to_use():
    conf = DefaultConf()
    with pytest.raises(AttributeError, match=r"no section \[placement\]; "
                       "use virtdriver.conf.make_conf"):
        conf.placement  # noqa: B018
    with pytest.raises(AttributeError, match=r"\[libvirt\] has no option"):
        conf.libvirt.nope  # noqa: B018


@pytest.mark.parametrize("names", [errors.KNOWN_NAMES,
                                   errors.UNREACHABLE_NAMES,
                                   errors.REFUSED_NAMES])
def test_error_class_names_are_the_classes(names):
    for module, name in names:
        cls = getattr(importlib.import_module(module), name)
        assert issubclass(cls, Exception)
        assert cls.__module__ == module  # where an instance's class lives
    assert len(errors.error_classes(names)) == len(names)


def test_claims_commands_are_the_claims_modules():
    from virtdriver.cli.claims import COMMANDS
    # virtdriver.cli.main the module (the package's ``main`` is the function)
    main = importlib.import_module("virtdriver.cli.main")
    assert main.CLAIMS_COMMANDS == COMMANDS


def test_render_online_source_is_the_hosts():
    from virtdriver.render import host as render
    from virtdriver.drivers.libvirt import host
    assert render.ONLINE_FROM_CAPABILITIES == host.ONLINE_FROM_CAPABILITIES
