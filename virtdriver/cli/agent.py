"""``virtdriver agent``: ``sync`` every ``--interval`` seconds, as a compute
service does (the loop is :mod:`virtdriver.agent`).

The driver and Placement options are ``sync``'s; one line per cycle goes
to stderr, or, when the command logs through oslo.log (``--log-file`` and
the other log options, :mod:`virtdriver.cli.logs`), to that log as an INFO
record of ``virtdriver.agent``.  SIGHUP re-reads the ``--config-file`` files at
the next cycle boundary (a new driver and tracker when they changed);
SIGTERM or SIGINT stops after the current cycle, a second one abandons it
at once; either way the exit status is 0.  ``--once``: one cycle, exit
with its status (0 ok, 2 bad input, 3 Placement or libvirt unreachable).
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import logging
import math
import signal
import sys
from collections.abc import Iterator

from virtdriver.agent import BAD_INPUT, Agent, Setup
from virtdriver.cli.errors import CommandError, exit_status
from virtdriver.cli.loading import (
    driver_arguments, new_driver, node_name, provider_config)
from virtdriver.cli.logs import asked as command_logs
from virtdriver.cli.sync import placement_target
from virtdriver.conf import apply_overrides, make_conf
from virtdriver.conf.options import dir_files
from virtdriver.regular_file import read_regular
from virtdriver.state_dir import StateDirError, state_dir


def run_agent(args: argparse.Namespace, conf,
              uri_reason: str | None = None) -> int:
    """Run the agent until a signal stops it (or one cycle, ``--once``).

    Raises:
        CommandError: bad options (``--interval``, ``--placement-url``),
            the log file cannot be opened, no state directory.
    """
    del uri_reason  # the log line has no room for it
    check_interval(args.interval)
    try:
        directory = state_dir()
    except StateDirError as exc:
        raise CommandError(str(exc)) from exc
    initial = [conf]  # the first load uses main's conf; a reload reads

    def load() -> Setup:
        current = initial.pop() if initial else None
        if current is None:  # the files again, then the options
            current = make_conf(config_files=args.config_file,
                                config_dirs=args.config_dir)
            apply_overrides(current, vars(args))
        target = placement_target(args, current, directory)
        kwargs = driver_arguments(args, current)
        return Setup(
            key=(_config_bytes([*args.config_file,
                                *dir_files(args.config_dir)]),
                 sorted((k, repr(v)) for k, v in kwargs.items()
                        if k != "conf")),
            directory=directory, driver_name=args.driver,
            make_driver=lambda: new_driver(args, current),
            hostname=node_name(args, current),
            provider_config=provider_config(current),
            target=target.description, connect=target.connect)

    with _log_to(command_logs(args, conf)) as log:
        agent = Agent(load, interval=args.interval, log=log,
                      classify=_classify)
        with _signals(agent), _reported_by_the_line(args.debug):
            return agent.run(once=args.once)


def check_interval(seconds: float) -> None:
    """Refuse an ``--interval`` that is not a finite number of seconds
    above 0 (``nan`` would loop without a pause, ``inf`` never again).

    Raises:
        CommandError: exit 2, naming the value.
    """
    if not (math.isfinite(seconds) and seconds > 0):
        raise CommandError(f"--interval {seconds:g}: must be a number of "
                           "seconds above 0; give e.g. --interval 60")


def _classify(exc: BaseException) -> int:
    status = exit_status(exc)
    return BAD_INPUT if status in (None, 1) else status


def _config_bytes(paths: list[str]) -> tuple[tuple[str, bytes], ...]:
    """The configuration files' contents (what a reload compares)."""
    found = []
    for path in paths:
        try:
            found.append((path, read_regular(path)))
        except OSError as exc:
            raise CommandError(f"--config-file {path}: cannot read it "
                               f"({exc.strerror}); fix the path") from exc
    return tuple(found)


#: The logger of the cycle lines when the command logs through oslo.log.
CYCLE_LOG = logging.getLogger("virtdriver.agent")


@contextlib.contextmanager
def _log_to(to_log: bool) -> Iterator:
    """A function writing one line per cycle: to the command's log
    (``to_log``) or, time-stamped, to stderr."""
    if to_log:
        yield lambda line: CYCLE_LOG.info("%s", line)
        return

    def log(line: str) -> None:
        now = datetime.datetime.now(datetime.UTC).strftime(
            "%Y-%m-%dT%H:%M:%SZ")
        sys.stderr.write(f"{now} virtdriver agent: {line}\n")
        sys.stderr.flush()

    yield log


#: Loggers whose warnings the cycle's line already says (a node not
#: updated, libvirt re-open attempts): shown only with --debug.
REPORTED_BY_THE_LINE = ("virtdriver.resource_tracker.tracker",
                        "virtdriver.drivers.libvirt.session")


@contextlib.contextmanager
def _reported_by_the_line(debug: bool) -> Iterator[None]:
    def wanted(record: logging.LogRecord) -> bool:
        return debug or record.levelno > logging.WARNING

    loggers = [logging.getLogger(name) for name in REPORTED_BY_THE_LINE]
    for logger in loggers:
        logger.addFilter(wanted)
    try:
        yield
    finally:
        for logger in loggers:
            logger.removeFilter(wanted)


@contextlib.contextmanager
def _signals(agent: Agent) -> Iterator[None]:
    """SIGHUP reloads; SIGTERM/SIGINT stop, a second one abandons."""
    stopping = []

    def stop(signum, frame) -> None:
        if stopping:
            agent.abandon()
        stopping.append(signum)
        agent.stop()

    handlers = {signal.SIGTERM: stop, signal.SIGINT: stop,
                signal.SIGHUP: lambda signum, frame: agent.reload()}
    previous = {sig: signal.signal(sig, handler)
                for sig, handler in handlers.items()}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
