"""The configuration a command reads: :func:`command_conf`."""

from __future__ import annotations

import argparse

#: Commands that read only virtdriver's own sections: given no config file
#: and no option that sets one, they run on the default configuration
#: (:class:`~virtdriver.conf.defaults.DefaultConf`), without importing
#: oslo.config and keystoneauth1 (a third of a warm ``report``).  ``sync``
#: too: with no file nothing sets ``[placement]``, so it syncs to
#: ``--placement-url`` or the embedded Placement.
DEFAULT_CONF_COMMANDS = ("report", "host", "explain", "snapshot", "sync")
#: The drivers that read only those sections too (an out-of-tree driver
#: is given a real ``ConfigOpts``: it may register its own options).
IN_TREE_DRIVERS = ("libvirt", "fake")


def command_conf(args: argparse.Namespace):
    """The configuration the command reads: ``--config-file``'s files and
    ``--config-dir``'s (else the default ones,
    :mod:`virtdriver.conf.locations`) with the command line's options
    over them (``make_conf`` and ``apply_overrides``), or, when neither
    sets anything and the command and driver read only virtdriver's
    sections, the same values without oslo.config."""
    from virtdriver.conf.locations import config_locations
    from virtdriver.conf.overrides import COMMAND_LINE_OPTIONS

    # The default file and directory when none is given (oslo's places);
    # the agent's reload reads the same ones.
    args.config_file, args.config_dir = config_locations(
        getattr(args, "config_file", None), getattr(args, "config_dir", None))
    if (args.command in DEFAULT_CONF_COMMANDS
            and not args.config_file and not args.config_dir
            and getattr(args, "driver", "libvirt") in IN_TREE_DRIVERS
            and all(getattr(args, dest, None) is None
                    for dest in COMMAND_LINE_OPTIONS)):
        from virtdriver.conf.defaults import DefaultConf
        return DefaultConf()
    from virtdriver.conf import apply_overrides, make_conf

    conf = make_conf(config_files=args.config_file,
                     config_dirs=args.config_dir)
    apply_overrides(conf, vars(args))
    return conf
