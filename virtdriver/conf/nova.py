"""Nova's options, by Nova's names and groups, for the "nova" tree profile.

A Nova compute service keeps its options in ``nova.conf``: the allocation
ratios, their ``initial_*`` defaults, ``reserved_host_cpus``,
``reserved_host_memory_mb``, ``reserved_host_disk_mb`` and
``reserved_huge_pages`` in ``[DEFAULT]``; ``cpu_dedicated_set`` and
``cpu_shared_set`` in ``[compute]``; ``virt_type``, ``cpu_mode``,
``cpu_models``, ``cpu_model_extra_flags`` and ``hw_machine_type`` in
``[libvirt]``.  :func:`from_nova_conf` reads them from any
``ConfigOpts`` that has them registered — Nova's own ``CONF`` inside
``nova-compute`` (nothing of Nova is imported here) — into virtdriver's
options (a fresh ``ConfigOpts`` from :func:`~virtdriver.conf.options.
make_conf`) and a :class:`~virtdriver.drivers.nova_tree.NovaProfile`.

Raises :class:`~virtdriver.conf.reader.ConfigError` for a value
virtdriver cannot model (a ``virt_type`` or ``cpu_mode`` it does not
know), naming the option.
"""

from __future__ import annotations

import math
from typing import Any

from virtdriver.conf.defaults import VIRT_TYPES
from virtdriver.capabilities.traits.config import CPU_MODES
from virtdriver.conf.reader import ConfigError
from virtdriver.drivers.nova_tree import NovaProfile


def _page_entry(entry: Any) -> str:
    """Nova's ``reserved_huge_pages`` entry (a dict of strings once
    oslo parsed it) as virtdriver's ``node:N,size:S,count:C``."""
    if isinstance(entry, dict):
        return ",".join(f"{key}:{value}" for key, value in entry.items())
    return str(entry)


def _unset(value: Any) -> Any:
    return None if value in (None, "", []) else value


def from_nova_conf(nova: Any) -> tuple[Any, NovaProfile]:
    """virtdriver's options and the ``nova`` profile from Nova's ``nova``
    (module doc).

    Raises:
        ConfigError: every option whose value virtdriver cannot use.
    """
    from virtdriver.conf.options import make_conf

    problems = []
    libvirt = nova.libvirt
    if libvirt.virt_type not in VIRT_TYPES:
        problems.append(f"[libvirt] virt_type = {libvirt.virt_type} is not "
                        f"one virtdriver models ({', '.join(VIRT_TYPES)}); "
                        "set compute_driver = libvirt.LibvirtDriver to go "
                        "back to Nova's own reporting")
    if libvirt.cpu_mode is not None and libvirt.cpu_mode not in CPU_MODES:
        problems.append(f"[libvirt] cpu_mode = {libvirt.cpu_mode} is not "
                        f"one of {', '.join(CPU_MODES)}")
    if problems:
        raise ConfigError(problems)
    conf = make_conf()
    overrides = {
        "compute": {
            "cpu_dedicated_set": _unset(nova.compute.cpu_dedicated_set),
            "cpu_shared_set": _unset(nova.compute.cpu_shared_set),
            "reserved_host_memory_mb": nova.reserved_host_memory_mb,
            "reserved_huge_pages": [_page_entry(e) for e in
                                    nova.reserved_huge_pages or ()],
            "reserved_host_disk_mb": nova.reserved_host_disk_mb,
            "image_type_exclude_list": list(
                nova.compute.image_type_exclude_list or ()),
        },
        "libvirt": {
            "virt_type": libvirt.virt_type,
            "cpu_mode": libvirt.cpu_mode,
            "cpu_models": list(libvirt.cpu_models or ()),
            "cpu_model_extra_flags": list(
                libvirt.cpu_model_extra_flags or ()),
            "hw_machine_type": list(libvirt.hw_machine_type or ()),
        },
    }
    for group, values in overrides.items():
        for name, value in values.items():
            conf.set_override(name, value, group)
    profile = NovaProfile(
        cpu_allocation_ratio=nova.cpu_allocation_ratio,
        ram_allocation_ratio=nova.ram_allocation_ratio,
        disk_allocation_ratio=nova.disk_allocation_ratio,
        initial_cpu_allocation_ratio=nova.initial_cpu_allocation_ratio,
        initial_ram_allocation_ratio=nova.initial_ram_allocation_ratio,
        initial_disk_allocation_ratio=nova.initial_disk_allocation_ratio,
        reserved_host_cpus=nova.reserved_host_cpus,
        reserved_host_memory_mb=nova.reserved_host_memory_mb,
        reserved_disk_gb=math.ceil(nova.reserved_host_disk_mb / 1024))
    return conf, profile
