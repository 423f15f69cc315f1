"""The default configuration, without oslo.config.

:class:`DefaultConf` answers what :func:`virtdriver.conf.make_conf` with
no file and no argument answers for virtdriver's own sections
(``[compute]``, ``[libvirt]``, ``[virtdriver]``, ``[pci]``,
``[devices]``), read the same ways
(``conf.libvirt.virt_type``, ``conf["compute"]["cpu_shared_set"]``).
It is for a command run without ``--config-file`` and without an option
that overrides one (``virtdriver report`` as the README runs it), which
then need not import oslo.config, keystoneauth1 and requests: a third of
its start-up.  Anything that reads ``[placement]`` or registers options
gets a real ``ConfigOpts``.  tests/unit/test_report_warm_defaults.py
checks every value against ``make_conf()``.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from types import MappingProxyType
from typing import Any

#: Virt types ``[libvirt] virt_type`` accepts (Nova's, plus xen).
VIRT_TYPES = ("kvm", "qemu", "lxc", "parallels", "xen")

#: Reserved for the host when nothing is configured, as in Nova.
DEFAULT_RESERVED_HOST_MEMORY_MB = 512
#: Nova's initial_cpu_allocation_ratio (since 2023.1).
DEFAULT_CPU_ALLOCATION_RATIO = 4.0
#: Nova's initial_ram_allocation_ratio (since 2023.1).
DEFAULT_RAM_ALLOCATION_RATIO = 1.0

#: Where operators' provider config files live unless configured.
PROVIDER_CONFIG_LOCATION = "/etc/virtdriver/provider_config/"

#: Every option of virtdriver's own sections and its default, as
#: oslo.config returns it (lists as lists).
DEFAULTS: Mapping[str, Mapping[str, Any]] = MappingProxyType({
    "compute": MappingProxyType({
        "cpu_dedicated_set": None,
        "cpu_shared_set": None,
        "reserved_host_memory_mb": DEFAULT_RESERVED_HOST_MEMORY_MB,
        "reserved_huge_pages": [],
        "cpu_allocation_ratio": DEFAULT_CPU_ALLOCATION_RATIO,
        "ram_allocation_ratio": DEFAULT_RAM_ALLOCATION_RATIO,
        "reserved_host_disk_mb": 0,
        "disk_allocation_ratio": 1.0,
        "image_type_exclude_list": [],
        "provider_config_location": PROVIDER_CONFIG_LOCATION,
    }),
    "libvirt": MappingProxyType({
        "connection_uri": "",
        "nodedev_uri": "",
        "virt_type": None,
        "cpu_mode": None,
        "cpu_models": [],
        "cpu_model_extra_flags": [],
        "hw_machine_type": [],
    }),
    "virtdriver": MappingProxyType({
        "state_dir": None,
    }),
    "pci": MappingProxyType({
        "device_spec": [],
        "alias": [],
    }),
    "devices": MappingProxyType({
        "enabled_mdev_types": [],
    }),
})


class DefaultGroup(Mapping[str, Any]):
    """One section's defaults: ``group.name`` or ``group["name"]``; a list
    is a new copy on every read, as oslo.config's are."""

    def __init__(self, name: str, values: Mapping[str, Any]) -> None:
        self._name = name
        self._values = values

    def __getitem__(self, name: str) -> Any:
        value = self._values[name]
        return list(value) if isinstance(value, list) else value

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        try:
            return self[name]
        except KeyError:
            raise AttributeError(
                f"[{self._name}] has no option {name!r} in the default "
                "configuration") from None

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)


class DefaultConf(Mapping[str, DefaultGroup]):
    """What ``make_conf()`` reads for virtdriver's sections, with no file
    and no override (module doc), and ``[DEFAULT] host`` (unset).
    ``config_file`` is empty: no file was read."""

    config_file: tuple[str, ...] = ()
    #: ``[DEFAULT] host``: unset (the machine's name applies).
    host: str | None = None

    def __init__(self) -> None:
        self._groups = {name: DefaultGroup(name, values)
                        for name, values in DEFAULTS.items()}

    def __getitem__(self, group: str) -> DefaultGroup:
        return self._groups[group]

    def __getattr__(self, group: str) -> DefaultGroup:
        if group.startswith("_"):
            raise AttributeError(group)
        try:
            return self._groups[group]
        except KeyError:
            raise AttributeError(
                f"the default configuration has no section [{group}]; "
                "use virtdriver.conf.make_conf()") from None

    def __iter__(self) -> Iterator[str]:
        return iter(self._groups)

    def __len__(self) -> int:
        return len(self._groups)


def state_dir_from(conf) -> str | None:
    """``[virtdriver] state_dir`` as configured (``conf``: a
    ``ConfigOpts`` or a :class:`DefaultConf`), or ``None`` when unset or
    blank (then ``$VIRTDRIVER_STATE_DIR``, else the default, applies; see
    :func:`virtdriver.state_dir.state_dir`)."""
    value = conf.virtdriver.state_dir
    return value if value and value.strip() else None
