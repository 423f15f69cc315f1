"""The ``virtdriver`` command: parse arguments, call the library, render.

One module per command (or family of commands); :mod:`.parser` builds the
argument parser, :mod:`.main` dispatches, :mod:`.errors` says how every
error is shown and which exit status it gives.  What several commands
share has a module of its own: :mod:`.loading` (the command's driver,
built one way), :mod:`.command_conf` (the configuration it reads),
:mod:`.replay` (a snapshot replayed), :mod:`.checks` (options refused).
Output is formatted only in :mod:`virtdriver.render`.
"""

from virtdriver.cli.errors import (
    EXIT_BROKEN_PIPE, EXIT_FAILURE, EXIT_INTERNAL, EXIT_UNREACHABLE)
from virtdriver.cli.main import main

__all__ = ["EXIT_BROKEN_PIPE", "EXIT_FAILURE", "EXIT_INTERNAL",
           "EXIT_UNREACHABLE", "main", "run_drivers"]


def __getattr__(name: str):
    # run_drivers is imported on first use: every command starts here.
    if name == "run_drivers":
        from virtdriver.cli.drivers import run_drivers
        return run_drivers
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
