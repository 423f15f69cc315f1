"""virtdriver's configuration: OpenStack-shaped options through oslo.config.

:func:`make_conf` reads config files into a fresh ``ConfigOpts`` (refusing
unreadable files and unknown options in virtdriver's sections);
:func:`apply_overrides` writes command-line values over it;
:func:`trait_config` and :func:`pinning_config` turn it into the checked,
frozen objects the rest of the package uses; :func:`state_dir_from` reads
``[virtdriver] state_dir``.  Every problem is a :class:`ConfigError` naming
the option, the bad value and what to do.  docs/configuration.md lists
every option.  :class:`~virtdriver.conf.defaults.DefaultConf` is the
default configuration without oslo.config.

The names below are imported from their modules on first use, so code
that needs no ``ConfigOpts`` does not import oslo.config.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

#: Each public name -> the module that defines it.
_HOMES = {
    "ConfigError": "reader",
    "DefaultConf": "defaults",
    "PageReservation": "pinning",
    "PinningConfig": "pinning",
    "apply_overrides": "overrides",
    "list_opts": "options",
    "make_conf": "options",
    "parse_machine_types": "guest",
    "parse_page_reservation": "pinning",
    "pinning_config": "pinning",
    "register_opts": "options",
    "state_dir_from": "defaults",
    "trait_config": "guest",
}

__all__ = [
    "ConfigError", "DefaultConf", "PageReservation", "PinningConfig",
    "apply_overrides", "list_opts", "make_conf", "parse_machine_types",
    "parse_page_reservation", "pinning_config", "register_opts",
    "state_dir_from", "trait_config",
]

if TYPE_CHECKING:
    from virtdriver.conf.defaults import DefaultConf, state_dir_from
    from virtdriver.conf.guest import parse_machine_types, trait_config
    from virtdriver.conf.options import (
        list_opts, make_conf, register_opts)
    from virtdriver.conf.overrides import apply_overrides
    from virtdriver.conf.pinning import (
        PageReservation,
        PinningConfig,
        parse_page_reservation,
        pinning_config,
    )
    from virtdriver.conf.reader import ConfigError


def __getattr__(name: str):
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{home}"), name)
    globals()[name] = value
    return value
