"""Dispatch a ``virtdriver`` command line to its command, under one error
policy (see :mod:`.errors`)."""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import sys
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

from virtdriver.cli.errors import (
    EXIT_BROKEN_PIPE, EXIT_INTERRUPTED, show_error)
from virtdriver.cli.parser import build_parser

if TYPE_CHECKING:
    from virtdriver.capabilities.traits.config import TraitConfig
    from virtdriver.cli.host import Opener

# Each command's modules are imported in the branch that runs it, so a
# command loads only what it uses (`virtdriver report` starts in a
# fraction of the time the whole package takes to import; see
# tests/functional/test_report_warm_imports.py).

#: The claims commands (:data:`virtdriver.cli.claims.COMMANDS`).
CLAIMS_COMMANDS = ("claims", "claim", "release", "rebuild-check")

#: Options whose values are paths the user named (an OSError on one of
#: them is bad input, not a bug).
PATH_OPTIONS = ("config_file", "config_dir", "host_spec", "inventory", "snapshot",
                "output", "cpu_map", "instance", "image", "providers")


def main(argv: Sequence[str] | None = None, *,
         opener: Opener | None = None) -> int:
    """Run the command line ``argv``; return the exit status.

    ``opener`` opens libvirt for ``host``, ``explain`` and ``snapshot``
    (default :func:`~virtdriver.drivers.libvirt.connection.open_connection`).
    """
    args = build_parser().parse_args(argv)
    try:
        with library_warnings(debug=args.debug, quiet=args.quiet):
            status = run(args, opener)
        sys.stdout.flush()  # a closed pipe shows here, not at exit
        return status
    except BrokenPipeError:
        return _stdout_gone()
    except KeyboardInterrupt:
        print("virtdriver: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except Exception as exc:  # the policy: every error ends here
        return show_error(exc, debug=args.debug, err=sys.stderr,
                          named=list(named_paths(args)),
                          driver=_driver_code(args))


def run(args: argparse.Namespace, opener: Opener | None) -> int:
    """Run the parsed command; errors propagate to :func:`main`."""
    from virtdriver.cli.logs import command_logging

    if args.command == "placement-request":
        _host_of_request(args)
    if args.command in ("drivers", "config", "completion", "image-traits",
                        "placement-request", "help") and not getattr(
                            args, "driver", None):
        with command_logging(args):  # no host, no config
            return run_without_conf(args)
    from virtdriver.cli.checks import check_options
    from virtdriver.cli.command_conf import command_conf
    from virtdriver.cli.state import configured_state_dir
    from virtdriver.conf.guest import trait_config

    check_options(args)
    conf = command_conf(args)
    config = trait_config(conf)
    args.uri = args.uri or conf.libvirt.connection_uri or None
    with command_logging(args, conf), configured_state_dir(conf):
        if getattr(args, "snapshot", None):
            return replay_snapshot(args, conf, config)
        return run_host_command(args, conf, config, opener)


#: ``placement-request`` options that read a host (and so need a driver).
_HOST_OPTIONS = ("host_spec", "inventory", "snapshot", "uri", "flat",
                 "config_file", "config_dir", "node", "cpu_map")


def _host_of_request(args: argparse.Namespace) -> None:
    """``placement-request`` reads a host only when a driver is named or
    implied by a host option (then libvirt, as in every command)."""
    if args.driver is None and any(getattr(args, name, None)
                                   for name in _HOST_OPTIONS):
        args.driver = "libvirt"


def run_without_conf(args: argparse.Namespace) -> int:
    """``drivers``, ``config``, ``completion``, ``image-traits``,
    ``placement-request`` or ``help``."""
    if args.command == "drivers":
        from virtdriver.cli.drivers import run_drivers
        return run_drivers(args.format)
    if args.command == "help":
        from virtdriver.cli.help import run_help
        return run_help(args)
    if args.command == "image-traits":
        from virtdriver.cli.image import run_image_traits
        return run_image_traits(args)
    if args.command == "placement-request":
        from virtdriver.cli.placement_request import run_placement_request
        return run_placement_request(args)
    from virtdriver.cli.completion import run_completion
    from virtdriver.cli.config import run_config
    return (run_config(args) if args.command == "config"
            else run_completion(args, build_parser()))


def replay_snapshot(args: argparse.Namespace, conf, config: TraitConfig
                    ) -> int:
    """Run the command against a snapshot, through fakelibvirt, with the
    real driver code."""
    from virtdriver.cli.replay import replaying
    from virtdriver.drivers.libvirt.connection import URIChoice

    with replaying(args.snapshot, args) as (uri, reason, fake):
        args.uri = uri
        return run_host_command(
            args, conf, config,
            lambda _uri: (fake.open(uri), URIChoice(uri, reason)),
            uri_reason=reason)


def run_host_command(args: argparse.Namespace, conf, config: TraitConfig,
                     opener: Opener | None, *,
                     uri_reason: str | None = None) -> int:
    """``report``, ``sync``, the claims commands, ``image-check``,
    ``explain``, ``host`` or ``snapshot`` on one host."""
    if args.command == "report":
        from virtdriver.cli.report import run_report
        return run_report(args, conf, uri_reason=uri_reason)
    if args.command == "sync":
        from virtdriver.cli.sync import run_sync
        return run_sync(args, conf, uri_reason=uri_reason)
    if args.command == "diff":
        from virtdriver.cli.diff import run_diff
        return run_diff(args, conf)
    if args.command == "agent":
        from virtdriver.cli.agent import run_agent
        return run_agent(args, conf, uri_reason=uri_reason)
    if args.command == "placement":
        from virtdriver.cli.placement_serve import run_placement_serve
        return run_placement_serve(args)
    if args.command == "placement-request":
        from virtdriver.cli.placement_request import run_placement_request
        return run_placement_request(args, conf)
    if args.command in CLAIMS_COMMANDS:
        from virtdriver.cli.claims import run_claims_command
        return run_claims_command(args, conf)
    if args.command in ("disable", "enable"):
        from virtdriver.cli.disable import run_node_status
        return run_node_status(args, conf)
    if args.command == "image-check":
        from virtdriver.cli.image import run_image_check
        return run_image_check(args, conf, config, opener=opener)
    if args.command == "explain" and args.driver != "libvirt":
        from virtdriver.cli.explain import run_driver_explain
        return run_driver_explain(args, conf)
    if opener is None:
        from virtdriver.drivers.libvirt.connection import open_connection
        opener = open_connection
    if args.command == "snapshot":
        from virtdriver.cli.snapshot import run_snapshot
        from virtdriver.conf.host import host_name
        return run_snapshot(args, config, opener=opener,
                            host=host_name(conf),
                            nodedev_uri=conf.libvirt.nodedev_uri or None)
    from virtdriver.cli.host import run_command
    return run_command(args, config, opener=opener, conf=conf)


#: Loggers whose warnings the command reports itself (the sync's result
#: says what is pending or failed): shown only with --debug.
REPORTED_BY_COMMAND = ("virtdriver.placement",)


@contextlib.contextmanager
def library_warnings(*, debug: bool, quiet: bool = False) -> Iterator[None]:
    """While a command runs, log warnings go to stderr as Python's
    last-resort handler prints them (the message alone) — except those the
    command reports itself and other libraries' (keystoneauth's discovery
    chatter), which only ``--debug`` shows.  ``quiet`` (``--quiet``):
    errors only."""
    def wanted(record: logging.LogRecord) -> bool:
        if debug:
            return True
        return ((record.name + ".").startswith("virtdriver.")
                and not any((record.name + ".").startswith(prefix + ".")
                            for prefix in REPORTED_BY_COMMAND))

    handler = logging.StreamHandler(sys.stderr)
    handler.setLevel(logging.ERROR if quiet else logging.WARNING)
    handler.addFilter(wanted)
    root = logging.getLogger()
    root.addHandler(handler)
    try:
        yield
    finally:
        root.removeHandler(handler)


def named_paths(args: argparse.Namespace) -> Iterator[str]:
    """Every path given on the command line."""
    for dest in PATH_OPTIONS:
        value = getattr(args, dest, None)
        for path in value if isinstance(value, list) else [value]:
            if path:
                yield path


def _driver_code(args: argparse.Namespace):
    """The command's driver as :class:`~.errors.DriverCode`, if it has
    one that loaded (``None`` otherwise)."""
    name = getattr(args, "driver", None)
    if name is None:
        return None
    from virtdriver.cli.errors import DriverCode
    from virtdriver.drivers.base import ComputeDriver
    from virtdriver.drivers.loader import load_driver_class
    try:
        cls = load_driver_class(name)
    except Exception:  # noqa: BLE001 (it did not load: nothing to blame)
        return None
    return DriverCode(name, f"{cls.__module__}:{cls.__qualname__}",
                      frozenset(klass.__module__ for klass in cls.__mro__
                                if not issubclass(ComputeDriver, klass)))


def _stdout_gone() -> int:
    # Whoever read our output stopped: say nothing more, and point stdout
    # at /dev/null so the interpreter's last flush cannot fail again.
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):
        pass  # not a real file (a test's capture): nothing to flush at exit
    finally:
        os.close(devnull)
    return EXIT_BROKEN_PIPE
