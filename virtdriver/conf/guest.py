"""The guest options trait derivation reads, as a :class:`TraitConfig`."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from virtdriver.capabilities.traits.config import TraitConfig
from virtdriver.conf.reader import ConfigError, OptionReader, sources

if TYPE_CHECKING:
    from oslo_config import cfg


def parse_machine_types(items: Iterable[str]) -> tuple[tuple[str, str], ...]:
    """``arch=machine`` items as (arch, machine) pairs, blanks skipped.

    Raises:
        ValueError: an item is not ``ARCH=MACHINE``; the message quotes it.
    """
    pairs = []
    for item in (i.strip() for i in items):
        if not item:
            continue
        arch, sep, machine = item.partition("=")
        if not sep or not arch.strip() or not machine.strip():
            raise ValueError(f"{item!r} is not ARCH=MACHINE (e.g. "
                             "x86_64=q35)")
        pairs.append((arch.strip(), machine.strip()))
    return tuple(pairs)


def trait_config(conf: cfg.ConfigOpts, *, virt_type: str | None = None,
                 cpu_mode: str | None = None,
                 cpu_models: tuple[str, ...] | None = None,
                 cpu_model_extra_flags: tuple[str, ...] | None = None,
                 machine_types: tuple[tuple[str, str], ...] | None = None,
                 image_type_exclude_list: tuple[str, ...] | None = None,
                 ) -> TraitConfig:
    """The :class:`TraitConfig` ``conf`` describes, with overrides.

    Each keyword that is not ``None`` replaces the option read from
    ``conf`` (the command line wins over the file); the result is checked
    as a whole, after the overrides.

    Raises:
        ConfigError: a value does not convert (naming the option, the
            value and the file), or the options disagree (e.g. cpu_models
            without cpu_mode = custom).
    """
    reader = OptionReader(conf)
    values = {
        "virt_type": reader.get("libvirt", "virt_type"),
        "cpu_mode": reader.get("libvirt", "cpu_mode"),
        "cpu_models": reader.get("libvirt", "cpu_models", tuple),
        "cpu_model_extra_flags": reader.get(
            "libvirt", "cpu_model_extra_flags", tuple),
        "machine_types": reader.get("libvirt", "hw_machine_type",
                                    parse_machine_types),
        "image_type_exclude_list": reader.get(
            "compute", "image_type_exclude_list", tuple),
    }
    reader.check()
    overrides = {
        "virt_type": virt_type, "cpu_mode": cpu_mode,
        "cpu_models": cpu_models,
        "cpu_model_extra_flags": cpu_model_extra_flags,
        "machine_types": machine_types,
        "image_type_exclude_list": image_type_exclude_list}
    values.update((k, v) for k, v in overrides.items() if v is not None)
    try:
        return TraitConfig(**values)
    except ValueError as exc:
        raise ConfigError([str(exc)], sources(conf)) from None
