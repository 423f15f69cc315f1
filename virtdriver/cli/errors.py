"""Exit statuses of the ``virtdriver`` command."""

from __future__ import annotations

#: Exit status for input the user or the host got wrong (bad XML, no libvirt).
EXIT_FAILURE = 2
