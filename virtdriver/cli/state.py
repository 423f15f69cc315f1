"""``[virtdriver] state_dir`` for the length of one command.

The state directory is, in order: ``[virtdriver] state_dir``, else
``$VIRTDRIVER_STATE_DIR``, else the default (see
:func:`virtdriver.state_dir.state_dir`, which
:mod:`virtdriver.drivers.libvirt.connection` re-exports).  Code the command
does not call directly (the libvirt driver choosing its ``qemu:///embed``
root, its disk size) asks ``state_dir()`` with no argument, which reads the
environment; so while the command runs, ``$VIRTDRIVER_STATE_DIR`` names the
configured directory, and it is restored afterwards.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator

from virtdriver.cli.errors import CommandError
from virtdriver.conf.defaults import state_dir_from
from virtdriver.state_dir import state_dir

ENV_VAR = "VIRTDRIVER_STATE_DIR"


@contextlib.contextmanager
def configured_state_dir(conf) -> Iterator[None]:
    """Make ``[virtdriver] state_dir``, when set, the state directory
    (``conf``: a ``ConfigOpts`` or the default configuration).

    Raises:
        CommandError: the configured directory cannot be created.
    """
    configured = state_dir_from(conf)
    if configured is None:
        yield
        return
    try:
        path = state_dir(configured)
    except (ValueError, OSError) as exc:  # StateDirError is a ValueError
        raise CommandError(str(exc)) from exc
    before = os.environ.get(ENV_VAR)
    os.environ[ENV_VAR] = str(path)
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(ENV_VAR, None)
        else:
            os.environ[ENV_VAR] = before
