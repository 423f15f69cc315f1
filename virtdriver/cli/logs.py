"""The command's log, through oslo.log as OpenStack services keep theirs.

``--log-file``, ``--log-dir``, ``--use-journal`` and ``--use-syslog`` (or
the same ``[DEFAULT]`` options of a config file, and every other oslo.log
option there: ``debug``, ``use_json``, ``logging_default_format_string``,
``log_date_format``, ``default_log_levels``, ``log_config_append``, …)
hand the command's logging to ``oslo_log.log.setup`` for the length of the
command.  With none of them, oslo.log is not even imported: warnings go to
stderr as :func:`virtdriver.cli.main.library_warnings` prints them.

oslo.log owns the root logger while it is set up; around it this module
keeps what the command line promises:

* stderr keeps its handlers (the warnings, ``--quiet``, the progress bar);
  oslo.log's fallback to stdout (when no file or journal is named) is left
  out, so ``--format json`` stays JSON;
* ``--log-dir DIR`` alone writes ``DIR/virtdriver.log`` (oslo.log would
  name it after ``sys.argv[0]``);
* the log file is opened as a state file is (:mod:`.log_file`): never
  through a link, never another user's, created ``0600``; the file
  ``log_config_append`` names (Python code, in effect) is refused when
  another user could write it (:mod:`virtdriver.conf.trust`);
* a log that cannot be written (a full disk, ``/dev/full``) is one line
  and exit 2, checked by a first record written when logging starts and
  again when the command ends; oslo.log's own error printing is not used;
* a record outside Placement's own loggers carries no request context:
  the in-process Placement (``sync`` with no URL) leaves its last
  request's context in the thread, and oslo.log would stamp it on every
  later line (``[None req-… admin admin - - - -]``);
* everything is put back afterwards (root handlers and level, the levels
  of ``default_log_levels``, ``sys.excepthook``), so commands run
  in-process one after another do not meet.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import sys
from collections.abc import Iterator

from virtdriver.cli.errors import CommandError
from virtdriver.cli.log_file import UnsafeLogFile, checked_log_file, guard
from virtdriver.conf.overrides import literal
from virtdriver.conf.trust import untrusted

LOG = logging.getLogger(__name__)

#: Command-line options that hand logging to oslo.log: dest -> flag.
LOG_OPTIONS = {"log_file": "--log-file", "log_dir": "--log-dir",
               "use_journal": "--use-journal", "use_syslog": "--use-syslog"}
#: ``[DEFAULT]`` options that do the same from a config file.
CONF_LOG_OPTIONS = (*LOG_OPTIONS, "log_config_append")
#: The file ``--log-dir`` gets when no ``--log-file`` names one.
LOG_DIR_FILE = "virtdriver.log"


def asked(args: argparse.Namespace, conf=None) -> bool:
    """Whether the command line (or ``conf``, a ``ConfigOpts`` with
    oslo.log's options) asks for a log."""
    if any(getattr(args, dest, None) for dest in LOG_OPTIONS):
        return True
    return conf is not None and hasattr(conf, "log_config_append") and any(
        getattr(conf, name, None) for name in CONF_LOG_OPTIONS)


@contextlib.contextmanager
def command_logging(args: argparse.Namespace, conf=None) -> Iterator[None]:
    """While the command runs, log through oslo.log if asked (module doc).

    ``conf``: the command's configuration; a ``ConfigOpts`` made by
    :func:`virtdriver.conf.make_conf` carries oslo.log's options.  Without
    one (a command that reads no configuration, or the default one) a
    configuration of no file is made for the log's options.

    Raises:
        CommandError: the log cannot be opened or written, or a
            destination is not available here (exit 2).
    """
    if not hasattr(conf, "log_config_append"):
        conf = None
    if not asked(args, conf):
        yield
        return
    if conf is None:
        from virtdriver.conf.options import make_conf
        conf = make_conf()
    _override(conf, args)
    with _oslo_setup(conf) as failures:
        LOG.info("%s %s: logging to %s", _version(), args.command,
                 _where(conf))
        _check(failures, conf)
        yield
        _check(failures, conf)


def _override(conf, args: argparse.Namespace) -> None:
    for dest in LOG_OPTIONS:
        value = getattr(args, dest, None)
        if value:   # a command-line value is literal: no $ substitution
            conf.set_override(dest, literal(value))
    conf.set_override("debug", bool(getattr(args, "debug", False)))
    conf.set_override("use_stderr", False)  # stderr is ours (module doc)
    if conf.log_dir and not conf.log_file:
        conf.set_override("log_file", LOG_DIR_FILE)


@contextlib.contextmanager
def _oslo_setup(conf) -> Iterator[list[tuple[logging.Handler, OSError]]]:
    """oslo.log set up on the root logger; yields the write failures seen
    so far (appended as they happen); everything restored after."""
    from oslo_log import log as oslo_log

    root = logging.getLogger()
    kept, level, hook = list(root.handlers), root.level, sys.excepthook
    levels = {name: logging.getLogger(name).level for name in
              (pair.partition("=")[0] for pair in conf.default_log_levels)}
    failures: list[tuple[logging.Handler, OSError]] = []
    path = None if conf.log_config_append else _log_path(conf)
    if conf.log_config_append:
        # Python's logging.config: whoever can write it runs code as us.
        refused = untrusted(conf.log_config_append,
                            "[DEFAULT] log_config_append")
        if refused is not None:
            raise CommandError(refused)
    try:
        identity = checked_log_file(path) if path else None
        oslo_log.setup(conf, "virtdriver", version=_version(),
                       fix_eventlet=False)
        added = [h for h in root.handlers if h not in kept]
        for handler in added:
            if (identity is not None and getattr(handler, "baseFilename",
                                                 None) == os.path.abspath(path)):
                guard(handler, identity)
    except (OSError, RuntimeError, ValueError) as exc:
        for handler in root.handlers:
            if handler not in kept:
                with contextlib.suppress(OSError):
                    handler.close()
        _restore(root, kept, level, levels, hook)
        raise CommandError(_unusable(conf, exc)) from exc
    for handler in added:
        if getattr(handler, "stream", None) is sys.stdout:
            root.removeHandler(handler)  # oslo's fallback (module doc)
            continue
        handler.handleError = _recorder(handler, failures)
        handler.addFilter(_no_stale_context)
    for handler in kept:
        if handler not in root.handlers:
            root.addHandler(handler)
    try:
        yield failures
    finally:
        for handler in added:
            root.removeHandler(handler)
            with contextlib.suppress(OSError):
                handler.close()
        _restore(root, kept, level, levels, hook)


def _restore(root: logging.Logger, kept: list[logging.Handler], level: int,
             levels: dict[str, int], hook) -> None:
    for handler in list(root.handlers):
        if handler not in kept:
            root.removeHandler(handler)
    for handler in kept:
        if handler not in root.handlers:
            root.addHandler(handler)
    root.setLevel(level)
    for name, value in levels.items():
        logging.getLogger(name).setLevel(value)
    sys.excepthook = hook


#: Loggers whose records belong to a Placement request (the in-process
#: Placement's own).
PLACEMENT_LOGGERS = ("placement", "oslo_db", "oslo.db", "oslo_policy",
                     "oslo.policy", "oslo_middleware")


def _no_stale_context(record: logging.LogRecord) -> bool:
    """Give records from outside a Placement request an explicit ``None``
    context (module doc); always keeps the record."""
    if "context" not in record.__dict__ and not record.name.startswith(
            PLACEMENT_LOGGERS):
        record.context = None
    return True


def _recorder(handler: logging.Handler,
              failures: list[tuple[logging.Handler, OSError]]):
    """A ``handleError`` that keeps the failure for :func:`_check` instead
    of printing a traceback."""
    def handle_error(record: logging.LogRecord) -> None:
        error = sys.exc_info()[1]
        if isinstance(error, OSError):
            failures.append((handler, error))
        else:  # a record that does not format: logging's own report
            logging.Handler.handleError(handler, record)
    return handle_error


def _check(failures: list[tuple[logging.Handler, OSError]], conf) -> None:
    if not failures:
        return
    handler, error = failures[0]
    if isinstance(error, UnsafeLogFile):
        raise CommandError(_unusable(conf, error))
    where = getattr(handler, "baseFilename", None) or _where(conf)
    raise CommandError(
        f"--log-file {where}: cannot write to it "
        f"({error.strerror or error}); free space on its filesystem or "
        "choose another file")


def _unusable(conf, exc: BaseException) -> str:
    if isinstance(exc, UnsafeLogFile):
        return f"will not log to {exc.filename}: {exc.strerror}"
    if isinstance(exc, OSError):
        return (f"--log-file {_where(conf)}: cannot open it "
                f"({exc.strerror or exc}); fix the path or its permissions")
    if conf.use_journal and "ystemd" in str(exc):
        return ("--use-journal: oslo.log needs the systemd Python bindings "
                "(Debian: python3-systemd; PyPI: systemd-python); install "
                "them, or log with --log-file or --use-syslog")
    return f"the log cannot be set up: {exc}; check the [DEFAULT] log options"


def _log_path(conf) -> str | None:
    """The log file oslo.log opens (after :func:`_override`), if any."""
    return conf.log_file and (os.path.join(conf.log_dir, conf.log_file)
                              if conf.log_dir else conf.log_file)


def _where(conf) -> str:
    path = _log_path(conf)
    places = [path] if path else []
    places += [name for name, on in (("the journal", conf.use_journal),
                                     ("syslog", conf.use_syslog)) if on]
    return ", ".join(places) or "nowhere"


def _version() -> str:
    from virtdriver.cli.parser_options import version_text
    return version_text()
