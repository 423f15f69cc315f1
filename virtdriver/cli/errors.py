"""Exit statuses of the ``virtdriver`` command, and how an error is shown.

The one table of them is docs/exit-codes.md: 0 ok; 1 refused or a
finding (a claim that does not fit, a refused rebuild, a ``diff`` that
differs); 2 usage or input error (argparse exits 2 itself); 3 environment
problem; 70 internal error (sysexits' ``EX_SOFTWARE``); 130 interrupted;
141 output closed.

Every error the library documents is bad input or an unreachable
environment: one ``virtdriver: <message>`` (the message names the input,
what is wrong and what to do), exit 2, or 3 when libvirt or Placement
cannot be reached (or Placement answers 5xx) or a lock is held too long.
A Placement 4xx is our request's fault: bad input, 2.  Anything else is a
bug: one line naming it, exit 70, and the traceback only with ``--debug``.
A bug whose traceback runs through the chosen driver's code — raised by
the driver, directly or as a node's failure in the tracker's update — is
named as that driver's failure (:class:`DriverCode`), not virtdriver's
and not the input's (exit 70 too: a bug, whoever wrote it).
"""

from __future__ import annotations

import os
import sys
import traceback
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TextIO

#: A bug in virtdriver (an error nobody anticipated): sysexits.h's
#: ``EX_SOFTWARE``, so a script can tell a bug from a refusal (1).
EXIT_INTERNAL = 70
#: A claim or rebuild refused (does not fit, would change the instance):
#: the answer, not an error of the input files.
EXIT_REFUSED = 1
#: Input the user or the host got wrong (bad options, files or XML).
EXIT_FAILURE = 2
#: The environment is unreachable: libvirt or Placement does not answer
#: (or Placement fails, 5xx), a lock is held.
EXIT_UNREACHABLE = 3
#: Interrupted (Ctrl-C), as a shell reports SIGINT.
EXIT_INTERRUPTED = 130
#: Whoever read standard output stopped reading (``| head -1``), as a shell
#: reports a process killed by SIGPIPE.
EXIT_BROKEN_PIPE = 141

#: Every exit status with its meaning in a few words, as ``virtdriver
#: --help`` lists them (docs/exit-codes.md has the table; a test keeps
#: the two equal).
EXIT_STATUSES = (
    (0, "ok"),
    (EXIT_REFUSED, "refused or a finding"),
    (EXIT_FAILURE, "usage or input error"),
    (EXIT_UNREACHABLE, "environment problem (libvirt or Placement "
                       "unreachable, a lock held too long)"),
    (EXIT_INTERNAL, "internal error (a bug)"),
    (EXIT_INTERRUPTED, "interrupted"),
    (EXIT_BROKEN_PIPE, "output closed (e.g. `| head`)"),
)


class CommandError(Exception):
    """The command cannot do what was asked; the message says why and what
    to do.

    Attributes:
        status: the exit status (:data:`EXIT_FAILURE` unless given).
    """

    def __init__(self, message: str, status: int = EXIT_FAILURE) -> None:
        self.status = status
        super().__init__(message)


#: Errors that mean bad input, their messages written for the user, as
#: (defining module, class name).  Named, not imported: an exception of a
#: class exists only once its module is imported, so a command imports
#: only what it uses and an error still finds its class
#: (:func:`error_classes`).
KNOWN_NAMES = (
    ("virtdriver.cli.errors", "CommandError"),
    ("virtdriver.drivers.base", "DriverError"),
    ("virtdriver.conf.reader", "ConfigError"),
    ("virtdriver.resource_tracker.ledger", "LedgerError"),
    ("virtdriver.fakelibvirt.snapshot", "SnapshotError"),
    ("virtdriver.capabilities.errors", "CapabilityXMLError"),
    ("virtdriver.drivers.libvirt.connection", "LibvirtConnectionError"),
    ("virtdriver.filelock", "LockTimeout"),
    ("virtdriver.filelock", "LockError"),
    ("virtdriver.state_dir", "StateDirError"),
    ("virtdriver.claims.documents", "InvalidDocument"),
    ("virtdriver.claims.model", "InvalidRequest"),
    ("virtdriver.resource_tracker.claims_file", "ClaimsFileError"),
    ("virtdriver.provider_config.record", "RecordError"),
    ("virtdriver.claims.rebuild", "ProviderDocumentError"),
    ("virtdriver.placement.errors", "PlacementError"),
    ("virtdriver.placement.embedded", "EmbeddedError"),
)
#: Errors (also as the cause of a known one) that mean the environment is
#: unreachable rather than the input wrong.
UNREACHABLE_NAMES = (
    ("virtdriver.drivers.base", "HypervisorUnavailable"),
    ("virtdriver.drivers.libvirt.connection", "LibvirtConnectionError"),
    ("virtdriver.filelock", "LockTimeout"),
    ("virtdriver.placement.errors", "PlacementUnavailable"),
)
#: A claim or rebuild refused.
REFUSED_NAMES = (("virtdriver.claims.model", "ClaimError"),)
#: The tracker's "some nodes failed to update": each node's exception is
#: judged on its own.
UPDATE_FAILED = (("virtdriver.resource_tracker.results", "UpdateAllError"),)
#: A driver that could not be built: its cause is judged on its own.
LOAD_FAILED = (("virtdriver.drivers.loader", "DriverLoadError"),)
#: How many of a driver's failures the message names.
_FAILURES_SHOWN = 3


@dataclass(frozen=True)
class DriverCode:
    """The command's driver, to tell its failures from virtdriver's.

    Attributes:
        name: the driver's entry-point name.
        target: its ``module:Class``.
        modules: the modules defining it and its bases but
            ``ComputeDriver`` (a frame of one is the driver's code).
    """

    name: str
    target: str
    modules: frozenset[str]

    def failures(self, exc: BaseException
                 ) -> list[tuple[str | None, BaseException]]:
        """The bugs in ``exc`` that ran through the driver's code, as
        (node, exception): ``exc`` itself (node ``None``), what its
        constructor raised (``exc`` a load error), or the nodes of a
        failed update whose exception is no known error."""
        known = error_classes(KNOWN_NAMES + REFUSED_NAMES)
        if isinstance(exc, error_classes(UPDATE_FAILED)):
            return [(node, err) for node, err in exc.errors.items()
                    if not isinstance(err, known) and self._ran(err)]
        cause = exc.__cause__
        if (isinstance(exc, error_classes(LOAD_FAILED)) and cause is not None
                and not isinstance(cause, known) and self._ran(cause)):
            return [(None, cause)]
        if exit_status(exc) is None and self._ran(exc):
            return [(None, exc)]
        return []

    def _ran(self, exc: BaseException) -> bool:
        frame = exc.__traceback__
        while frame is not None:
            if frame.tb_frame.f_globals.get("__name__") in self.modules:
                return True
            frame = frame.tb_next
        return False


def error_classes(names: Iterable[tuple[str, str]]) -> tuple[type, ...]:
    """The classes ``names`` lists whose modules are imported (any other
    class has no instances yet)."""
    return tuple(getattr(sys.modules[module], name)
                 for module, name in names if module in sys.modules)


def exit_status(exc: BaseException, named: Iterable[str] = (),
                driver: DriverCode | None = None) -> int | None:
    """The exit status for ``exc``; ``None`` when it is not a known error.

    ``named`` are the paths the user gave: an ``OSError`` on one of them
    (or inside one) is bad input too.  A failure of ``driver``'s own code
    (:meth:`DriverCode.failures`) is :data:`EXIT_INTERNAL`.
    """
    if driver is not None and driver.failures(exc):
        return EXIT_INTERNAL
    if isinstance(exc, CommandError):
        return exc.status
    if isinstance(exc, error_classes(KNOWN_NAMES)):
        return (EXIT_UNREACHABLE
                if _caused_by(exc, error_classes(UNREACHABLE_NAMES))
                else EXIT_FAILURE)
    if isinstance(exc, error_classes(REFUSED_NAMES)):
        return EXIT_REFUSED
    if isinstance(exc, OSError) and _on_named_path(exc, named):
        return EXIT_FAILURE
    if _substitution(exc) is not None:
        return EXIT_FAILURE
    return None


def _substitution(exc: BaseException) -> str | None:
    """The message for oslo.config failing on a ``$`` of a value wherever
    it was read (a log option given on the command line too), or ``None``
    for any other error."""
    substitution = sys.modules.get("virtdriver.conf.substitution")
    failed = substitution and substitution.failed_substitution(exc)
    if not failed:
        return None
    return "bad configuration: " + substitution.substitution_reason(
        failed, "a value")


def show_error(exc: BaseException, *, debug: bool, err: TextIO,
               named: Iterable[str] = (),
               driver: DriverCode | None = None) -> int:
    """Print ``exc`` the way the policy above says; return the status.

    ``driver``: the command's driver, whose own failures are named as its.
    """
    failures = driver.failures(exc) if driver is not None else []
    if failures:
        return _show_driver_failures(driver, failures, debug=debug, err=err)
    status = exit_status(exc, named)
    if debug:
        traceback.print_exception(exc, file=err)
    if status is None:
        detail = " ".join(str(exc).split())
        print(f"virtdriver: internal error: {type(exc).__name__}: {detail}",
              file=err)
        if not debug:
            print("virtdriver: this is a bug; rerun with --debug for the "
                  "traceback", file=err)
        return EXIT_INTERNAL
    refused = (isinstance(exc, error_classes(REFUSED_NAMES))
               and not isinstance(exc, error_classes(KNOWN_NAMES)))
    print(f"virtdriver: {'refused: ' if refused else ''}{_message(exc)}",
          file=err)
    return status


def _show_driver_failures(driver: DriverCode,
                          failures: list[tuple[str | None, BaseException]],
                          *, debug: bool, err: TextIO) -> int:
    if debug:
        for _node, exc in failures:
            traceback.print_exception(exc, file=err)
    shown = "; ".join(
        (f"on node {node!r}: " if node is not None else "")
        + f"{type(exc).__name__}: {' '.join(str(exc).split())}"
        for node, exc in failures[:_FAILURES_SHOWN])
    more = len(failures) - _FAILURES_SHOWN
    if more > 0:
        shown += f"; and {more} more node(s)"
    print(f"virtdriver: driver {driver.name!r} ({driver.target}) failed: "
          f"{shown}", file=err)
    print("virtdriver: this is a bug in the driver, not in the input: "
          "report it to the driver's authors"
          + ("" if debug else "; rerun with --debug for the traceback"),
          file=err)
    return EXIT_INTERNAL


def _message(exc: BaseException) -> str:
    if isinstance(exc, error_classes(KNOWN_NAMES)):
        return str(exc)
    substitution = _substitution(exc)
    if substitution is not None:
        return substitution
    if isinstance(exc, OSError):
        return (f"cannot use {exc.filename}: {exc.strerror or exc}; check "
                "the path and its permissions")
    return str(exc)


def _caused_by(exc: BaseException, types: tuple[type, ...]) -> bool:
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        if isinstance(exc, types):
            return True
        seen.add(id(exc))
        exc = exc.__cause__ or exc.__context__
    return False


def _on_named_path(exc: OSError, named: Iterable[str]) -> bool:
    if not isinstance(exc.filename, (str, bytes)) or not exc.filename:
        return False
    failed = os.path.abspath(os.fsdecode(exc.filename))
    for path in named:
        given = os.path.abspath(path)
        if failed == given or failed.startswith(given.rstrip(os.sep) + os.sep):
            return True
    return False
