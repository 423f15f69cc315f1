"""Write values given on the command line over a config file's.

Each command-line option that stands for a config option is converted and
checked by that option's own oslo type, exactly as a file's value is: the
same choices, the same message.  Checks across options (``cpu_models``
needs ``cpu_mode = custom``, pinning against the host) happen later, on
the merged configuration, in :func:`~virtdriver.conf.trait_config` and
:func:`~virtdriver.conf.pinning_config`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from virtdriver.conf.reader import DOCS, ConfigError, option_name

if TYPE_CHECKING:
    from oslo_config import cfg

#: Command-line options that set a config option: the option's argparse
#: ``dest`` (``virt_type`` for ``--virt-type``) -> (group, name).
COMMAND_LINE_OPTIONS: Mapping[str, tuple[str, str]] = {
    "virt_type": ("libvirt", "virt_type"),
    "cpu_mode": ("libvirt", "cpu_mode"),
    "cpu_models": ("libvirt", "cpu_models"),
    "cpu_model_extra_flags": ("libvirt", "cpu_model_extra_flags"),
    "hw_machine_type": ("libvirt", "hw_machine_type"),
    "image_type_exclude_list": ("compute", "image_type_exclude_list"),
    "cpu_dedicated_set": ("compute", "cpu_dedicated_set"),
    "cpu_shared_set": ("compute", "cpu_shared_set"),
    "reserved_host_memory_mb": ("compute", "reserved_host_memory_mb"),
    "reserved_huge_pages": ("compute", "reserved_huge_pages"),
}


def flag(dest: str) -> str:
    """The command-line spelling of an option's ``dest``."""
    return "--" + dest.replace("_", "-")


def apply_overrides(conf: cfg.ConfigOpts, values: Mapping[str, Any]) -> None:
    """Override each option of :data:`COMMAND_LINE_OPTIONS` that ``values``
    gives (not ``None``).

    List values may be tuples; ``hw_machine_type`` may be given as
    (arch, machine) pairs.

    Raises:
        ConfigError: every value its option's type refuses, each naming
            the command-line option and the config option.
    """
    problems = []
    for dest, (group, name) in COMMAND_LINE_OPTIONS.items():
        value = values.get(dest)
        if value is None:
            continue
        if isinstance(value, (list, tuple)):
            value = [literal("=".join(item) if isinstance(item, tuple)
                              else item) for item in value]
        else:
            value = literal(value)
        try:
            conf.set_override(name, value, group=group)
        except ValueError as exc:
            # The type's message quotes the value as given, not doubled.
            reason = str(exc).replace("$$", "$")
            problems.append(f"{flag(dest)} ({option_name(group, name)}): "
                            f"{reason}; correct it (see {DOCS})")
    if problems:
        raise ConfigError(problems)


def literal(value: Any) -> Any:
    """``value`` as oslo.config reads it back unchanged: a command-line
    value is no template, so its ``$`` is doubled (oslo.config would
    substitute an option named after it, and fail on a name that is
    none)."""
    return value.replace("$", "$$") if isinstance(value, str) else value
