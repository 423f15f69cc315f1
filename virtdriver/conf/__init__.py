"""virtdriver's configuration: OpenStack-shaped options through oslo.config.

:func:`make_conf` reads config files into a fresh ``ConfigOpts`` (refusing
unreadable files and unknown options in virtdriver's sections);
:func:`apply_overrides` writes command-line values over it;
:func:`trait_config` and :func:`pinning_config` turn it into the checked,
frozen objects the rest of the package uses; :func:`state_dir_from` reads
``[virtdriver] state_dir``.  Every problem is a :class:`ConfigError` naming
the option, the bad value and what to do.  docs/configuration.md lists
every option.
"""

from virtdriver.conf.guest import parse_machine_types, trait_config
from virtdriver.conf.options import (
    list_opts, make_conf, register_opts, state_dir_from)
from virtdriver.conf.overrides import apply_overrides
from virtdriver.conf.pinning import (
    PageReservation,
    PinningConfig,
    parse_page_reservation,
    pinning_config,
)
from virtdriver.conf.reader import ConfigError

__all__ = [
    "ConfigError", "PageReservation", "PinningConfig", "apply_overrides",
    "list_opts", "make_conf", "parse_machine_types", "parse_page_reservation",
    "pinning_config", "register_opts", "state_dir_from", "trait_config",
]
