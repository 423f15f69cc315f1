"""Read a file the user named only when it is a regular file.

A path on the command line or in a config file can name anything: a
device (``/dev/zero`` never ends), a FIFO (``open`` blocks until a writer
comes), a directory.  :func:`read_regular` opens without blocking, looks
at what was opened (``fstat``, so nothing can be swapped in between) and
reads only a regular file.
"""

from __future__ import annotations

import errno
import os
import stat


class NotRegularFile(OSError):
    """The path names a directory, device, FIFO or socket; ``strerror``
    says which kind, for a message."""


def read_regular(path: str | os.PathLike[str], limit: int = -1) -> bytes:
    """The bytes of the regular file ``path`` (at most ``limit``; all when
    ``limit`` is below 0).

    Raises:
        NotRegularFile: ``path`` is not a regular file (nothing was read).
        OSError: it cannot be opened or read.
    """
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        mode = os.fstat(fd).st_mode
    except OSError:
        os.close(fd)
        raise
    if not stat.S_ISREG(mode):
        os.close(fd)
        directory = stat.S_ISDIR(mode)
        raise NotRegularFile(
            errno.EISDIR if directory else errno.EINVAL,
            "is a directory" if directory else
            "is not a regular file (a device, pipe or socket)",
            os.fspath(path))
    os.set_blocking(fd, True)
    with os.fdopen(fd, "rb") as stream:
        return stream.read(limit)
