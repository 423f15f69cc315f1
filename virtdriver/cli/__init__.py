"""The ``virtdriver`` command: parse arguments, call the library, render.

One module per command (or family of commands); :mod:`.parser` builds the
argument parser, :mod:`.main` dispatches.  Output is formatted only in
:mod:`virtdriver.render`.
"""

from virtdriver.cli.drivers import run_drivers
from virtdriver.cli.errors import EXIT_FAILURE
from virtdriver.cli.main import main

__all__ = ["EXIT_FAILURE", "main", "run_drivers"]
