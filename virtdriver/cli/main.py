"""Dispatch a ``virtdriver`` command line to its command."""

from __future__ import annotations

import argparse
import pathlib
import sys
from collections.abc import Sequence

from virtdriver import fakelibvirt
from virtdriver.capabilities.traits.config import TraitConfig
from virtdriver.cli.drivers import run_drivers
from virtdriver.cli.errors import EXIT_FAILURE
from virtdriver.cli.host import Opener, run_command
from virtdriver.cli.parser import build_parser
from virtdriver.cli.report import run_report
from virtdriver.cli.snapshot import run_snapshot
from virtdriver.conf import ConfigError, make_conf, trait_config
from virtdriver.conf.overrides import (
    override_guest_options, override_pinning_options)
from virtdriver.drivers.libvirt.connection import URIChoice, open_connection
from virtdriver.fakelibvirt.snapshot import SnapshotError, read_snapshot
from virtdriver.fakelibvirt.swap import use_fakelibvirt


def main(argv: Sequence[str] | None = None, *,
         opener: Opener = open_connection) -> int:
    """Run the command line ``argv``; return the exit status."""
    args = build_parser().parse_args(argv)
    if args.command == "drivers":
        return run_drivers(args.format)
    try:
        conf = make_conf(config_files=args.config_file)
        config = trait_config(
            conf, virt_type=args.virt_type, cpu_mode=args.cpu_mode,
            cpu_models=args.cpu_models,
            cpu_model_extra_flags=args.cpu_model_extra_flags,
            machine_types=args.hw_machine_type,
            image_type_exclude_list=args.image_type_exclude_list)
    except ConfigError as exc:
        print(f"virtdriver: {exc}", file=sys.stderr)
        return EXIT_FAILURE
    args.uri = args.uri or conf.libvirt.connection_uri or None
    if getattr(args, "snapshot", None):
        return replay_snapshot(args, conf, config)
    return run_host_command(args, conf, config, opener)


def replay_snapshot(args: argparse.Namespace, conf, config: TraitConfig
                    ) -> int:
    """Run the command against a snapshot, through fakelibvirt, with the
    real driver code."""
    try:
        documents = read_snapshot(args.snapshot)
    except SnapshotError as exc:
        print(f"virtdriver: {exc}", file=sys.stderr)
        return EXIT_FAILURE
    # The URI names the directory, so evidence says where facts came from.
    name = f"snapshot{pathlib.Path(args.snapshot).resolve()}"
    fakelibvirt.register_host(name, documents)
    uri = f"fake:///{name}"
    reason = f"replaying snapshot {args.snapshot}"
    try:
        with use_fakelibvirt() as fake:
            args.uri = uri
            return run_host_command(
                args, conf, config,
                lambda _uri: (fake.open(uri), URIChoice(uri, reason)))
    finally:
        fakelibvirt.unregister_host(name)


def run_host_command(args: argparse.Namespace, conf, config: TraitConfig,
                     opener: Opener) -> int:
    """``report``, ``explain``, ``tree`` or ``snapshot`` on one host."""
    if args.command == "report":
        override_guest_options(conf, config)
        override_pinning_options(conf, vars(args))
        return run_report(args, conf)
    if args.command == "snapshot":
        return run_snapshot(args, config, opener=opener)
    return run_command(args, config, opener=opener)
