"""Where virtdriver keeps its state (the ``qemu:///embed`` root, caches).

The directory is, in order: the ``[virtdriver] state_dir`` option (passed
in by the caller), ``$VIRTDRIVER_STATE_DIR``, ``/var/lib/virtdriver`` for
root, ``~/.local/state/virtdriver`` for other users.  An empty value counts
as unset.  This module does not import libvirt, so code without libvirt
(the CLI's option checks) may use it.
"""

from __future__ import annotations

import os
from pathlib import Path

ENV_VAR = "VIRTDRIVER_STATE_DIR"
OPTION = "[virtdriver] state_dir"
ROOT_DEFAULT = Path("/var/lib/virtdriver")


class StateDirError(ValueError):
    """The state directory cannot be used.

    Attributes:
        path: the directory wanted.
        source: where it came from, in words ("$VIRTDRIVER_STATE_DIR").
        problem: what is wrong, one clause naming ``path`` and ``source``.
        hint: what to do.
    """

    def __init__(self, path: Path, source: str, problem: str,
                 hint: str) -> None:
        self.path = path
        self.source = source
        self.problem = problem
        self.hint = hint
        super().__init__(f"{problem}; {hint}")


def state_dir(configured: str | os.PathLike[str] | None = None) -> Path:
    """virtdriver's state directory, absolute, created if missing.

    Args:
        configured: the ``[virtdriver] state_dir`` option, if set; it wins
            over the environment and the defaults.

    Raises:
        StateDirError: the path exists and is not a directory, or it
            cannot be created.
    """
    path, source, hint = _choose(configured)
    if path.exists() and not path.is_dir():
        raise StateDirError(path, source,
                            f"the state directory {path} ({source}) exists "
                            "and is not a directory", hint)
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise StateDirError(path, source,
                            f"cannot create the state directory {path} "
                            f"({source}): {exc.strerror or exc}",
                            hint) from None
    return path


def _choose(configured: str | os.PathLike[str] | None
            ) -> tuple[Path, str, str]:
    """The path, where it came from, and what to do if it is unusable."""
    if configured is not None and os.fspath(configured):
        return (_absolute(configured), f"from {OPTION}",
                f"set {OPTION} to a directory you may write, or unset it")
    env = os.environ.get(ENV_VAR)
    if env:
        return (_absolute(env), f"from ${ENV_VAR}",
                f"point ${ENV_VAR} at a directory you may write, or unset "
                "it")
    if os.geteuid() == 0:
        path, source = ROOT_DEFAULT, "the default for root"
    else:
        path = Path.home() / ".local" / "state" / "virtdriver"
        source = "the default for non-root users"
    return (path, source,
            f"move {path} aside, or set {OPTION} or ${ENV_VAR} to a "
            "directory you may write")


def _absolute(raw: str | os.PathLike[str]) -> Path:
    # libvirt refuses a relative embed root; resolve against the cwd now.
    return Path(os.path.abspath(os.path.expanduser(os.fspath(raw))))
