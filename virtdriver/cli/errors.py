"""Exit statuses of the ``virtdriver`` command, and how an error is shown.

The one table of them is docs/exit-codes.md: 0 ok; 1 refused or a
finding (a claim that does not fit, a refused rebuild, a ``diff`` that
differs), and also an internal error; 2 usage or input error (argparse
exits 2 itself); 3 environment problem; 130 interrupted; 141 output closed.

Every error the library documents is bad input or an unreachable
environment: one ``virtdriver: <message>`` (the message names the input,
what is wrong and what to do), exit 2, or 3 when libvirt or Placement
cannot be reached (or Placement answers 5xx) or a lock is held too long.
A Placement 4xx is our request's fault: bad input, 2.  Anything else is a
bug: one line naming it, exit 1, and the traceback only with ``--debug``.
"""

from __future__ import annotations

import os
import traceback
from collections.abc import Iterable
from typing import TextIO

from virtdriver.capabilities import CapabilityXMLError
from virtdriver.claims.documents import InvalidDocument
from virtdriver.claims.model import ClaimError
from virtdriver.claims.rebuild import ProviderDocumentError
from virtdriver.conf import ConfigError
from virtdriver.drivers.base import DriverError
from virtdriver.drivers.libvirt.connection import LibvirtConnectionError
from virtdriver.fakelibvirt.snapshot import SnapshotError
from virtdriver.filelock import LockError, LockTimeout
from virtdriver.placement.embedded import EmbeddedError
from virtdriver.placement.errors import PlacementError, PlacementUnavailable
from virtdriver.resource_tracker.claims_file import ClaimsFileError
from virtdriver.resource_tracker.ledger import LedgerError

#: A bug in virtdriver (an error nobody anticipated).
EXIT_INTERNAL = 1
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


class CommandError(Exception):
    """The command cannot do what was asked; the message says why and what
    to do.

    Attributes:
        status: the exit status (:data:`EXIT_FAILURE` unless given).
    """

    def __init__(self, message: str, status: int = EXIT_FAILURE) -> None:
        self.status = status
        super().__init__(message)


#: Errors that mean bad input, their messages written for the user.
KNOWN = (CommandError, DriverError, ConfigError, LedgerError, SnapshotError,
         CapabilityXMLError, LibvirtConnectionError, LockTimeout, LockError,
         InvalidDocument, ClaimsFileError, ProviderDocumentError,
         PlacementError, EmbeddedError)
#: Errors (also as the cause of a known one) that mean the environment is
#: unreachable rather than the input wrong.
UNREACHABLE = (LibvirtConnectionError, LockTimeout, PlacementUnavailable)


def exit_status(exc: BaseException, named: Iterable[str] = ()) -> int | None:
    """The exit status for ``exc``; ``None`` when it is not a known error.

    ``named`` are the paths the user gave: an ``OSError`` on one of them
    (or inside one) is bad input too.
    """
    if isinstance(exc, CommandError):
        return exc.status
    if isinstance(exc, KNOWN):
        return (EXIT_UNREACHABLE if _caused_by(exc, UNREACHABLE)
                else EXIT_FAILURE)
    if isinstance(exc, ClaimError):
        return EXIT_REFUSED
    if isinstance(exc, OSError) and _on_named_path(exc, named):
        return EXIT_FAILURE
    return None


def show_error(exc: BaseException, *, debug: bool, err: TextIO,
               named: Iterable[str] = ()) -> int:
    """Print ``exc`` the way the policy above says; return the status."""
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
    refused = isinstance(exc, ClaimError) and not isinstance(exc, KNOWN)
    print(f"virtdriver: {'refused: ' if refused else ''}{_message(exc)}",
          file=err)
    return status


def _message(exc: BaseException) -> str:
    if isinstance(exc, OSError) and not isinstance(exc, KNOWN):
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
