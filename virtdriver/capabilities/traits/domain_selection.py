"""Which domain capabilities documents count for trait derivation.

The rule: for the configured virt type, each arch guests really run as —
the host's own arch, plus every arch with a configured machine type — asks
for the arch's **default** machine type (the one libvirt picks when a guest
names none) and each **configured** machine type for that arch
(``[libvirt] hw_machine_type``).  Other arches, virt types and machine
types the emulators could offer do not count: a trait means "a guest booted
here gets this", not "some document libvirt could produce lists it".

An arch the host cannot run with the configured virt type (no emulator,
or no ``<domain type=...>`` for it in the host capabilities) is skipped,
with a debug log.
"""

from __future__ import annotations

import logging

from virtdriver.capabilities.host import HostCapabilities
from virtdriver.capabilities.traits.config import TraitConfig
from virtdriver.capabilities.traits.model import DomainKey

LOG = logging.getLogger(__name__)


def domain_keys(host: HostCapabilities,
                config: TraitConfig) -> tuple[DomainKey, ...]:
    """The documents that count, in a stable order (see module doc)."""
    config = config.resolved(host)
    arches = [host.cpu.arch] if host.cpu.arch else []
    arches += [arch for arch, _ in config.machine_types]
    runnable = {guest.arch for guest in host.guests
                if config.virt_type in guest.domain_types
                and (guest.emulator or any(d.emulator
                                           for d in guest.domains))}
    keys: list[DomainKey] = []
    for arch in dict.fromkeys(arches):
        if arch not in runnable:
            LOG.debug("skipping arch %s: the host capabilities list no "
                      "emulator for it with virt type %s", arch,
                      config.virt_type)
            continue
        keys.append(DomainKey(arch, config.virt_type))
        keys.extend(DomainKey(arch, config.virt_type, machine)
                    for machine in config.machine_types_for(arch))
    return tuple(keys)
