"""Write values given on the command line over a config file's."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from oslo_config import cfg

from virtdriver.capabilities.traits.config import TraitConfig

#: ``[compute]`` options a command line may override.
PINNING_OPTIONS = ("cpu_dedicated_set", "cpu_shared_set",
                   "reserved_host_memory_mb", "reserved_huge_pages")


def override_guest_options(conf: cfg.ConfigOpts, config: TraitConfig) -> None:
    """Make ``conf`` say what ``config`` (file merged with flags) says."""
    values = {"virt_type": config.virt_type, "cpu_mode": config.cpu_mode,
              "cpu_models": list(config.cpu_models),
              "cpu_model_extra_flags": list(config.cpu_model_extra_flags),
              "hw_machine_type": [f"{arch}={machine}"
                                  for arch, machine in config.machine_types]}
    for name, value in values.items():
        conf.set_override(name, value, group="libvirt")
    conf.set_override("image_type_exclude_list",
                      list(config.image_type_exclude_list), group="compute")


def override_pinning_options(conf: cfg.ConfigOpts,
                             values: Mapping[str, Any]) -> None:
    """Override each ``[compute]`` pinning option given (not ``None``)."""
    for name in PINNING_OPTIONS:
        if values.get(name) is not None:
            conf.set_override(name, values[name], group="compute")
