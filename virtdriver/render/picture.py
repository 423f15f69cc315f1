"""Write a DOT picture to a file: SVG or PNG through Graphviz's ``dot``,
or the DOT text itself.  The only I/O of the renderers.

The file is written whole or not at all: Graphviz writes a temporary file
beside the target, which replaces the target only when ``dot`` succeeded.
"""

from __future__ import annotations

import os
import pathlib
import shutil
import subprocess
import tempfile

#: File suffix → Graphviz output format (``None``: the DOT text itself).
FORMATS: dict[str, str | None] = {".svg": "svg", ".png": "png",
                                  ".dot": None, ".gv": None}

#: How to get Graphviz, for the error when ``dot`` is missing.
INSTALL_HINT = ("install Graphviz (Debian/Ubuntu: apt-get install graphviz), "
                "or write the DOT text with --output FILE.dot or --format "
                "dot")

#: Seconds Graphviz may take before the picture is given up.
DOT_TIMEOUT = 120


class PictureError(ValueError):
    """The picture cannot be written: bad file name, or no Graphviz."""


def picture_format(path: str | os.PathLike[str]) -> str | None:
    """The Graphviz format for ``path``'s suffix (``None`` for DOT text).

    Raises:
        PictureError: the suffix is not one of :data:`FORMATS`.
    """
    suffix = pathlib.Path(path).suffix.lower()
    if suffix not in FORMATS:
        raise PictureError(
            f"--output {os.fspath(path)}: unknown picture suffix "
            f"{suffix or '(none)'!r}; name the file "
            + ", ".join(f"*{s}" for s in FORMATS))
    return FORMATS[suffix]


def find_dot(path: str | None = None) -> str:
    """The ``dot`` executable on ``path`` (default ``$PATH``).

    Raises:
        PictureError: Graphviz is not installed; the message says how to
            install it.
    """
    found = shutil.which("dot", path=path)
    if found is None:
        raise PictureError(f"Graphviz's dot program is not on PATH; "
                           f"{INSTALL_HINT}")
    return found


def write_picture(dot_text: str, path: str | os.PathLike[str]) -> None:
    """Write ``dot_text`` to ``path`` in the format its suffix names.

    Raises:
        PictureError: unknown suffix, no Graphviz, Graphviz refused the
            text (its message included), or the file cannot be written.
    """
    target = pathlib.Path(path)
    fmt = picture_format(target)
    dot = find_dot() if fmt is not None else None
    try:
        fd, scratch = tempfile.mkstemp(prefix=f".{target.name}.",
                                       suffix=".tmp", dir=target.parent)
        os.close(fd)
    except OSError as exc:
        raise _unwritable(target, exc) from exc
    try:
        if dot is None:
            pathlib.Path(scratch).write_text(dot_text, encoding="utf-8")
        else:
            _run_dot(dot, fmt, dot_text, scratch, target)
        os.chmod(scratch, 0o644)
        os.replace(scratch, target)
    except OSError as exc:
        pathlib.Path(scratch).unlink(missing_ok=True)
        raise _unwritable(target, exc) from exc
    except BaseException:
        pathlib.Path(scratch).unlink(missing_ok=True)
        raise


def _unwritable(target: pathlib.Path, exc: OSError) -> PictureError:
    return PictureError(f"--output {target}: cannot write it: "
                        f"{exc.strerror or exc}; check that its directory "
                        "exists and is writable and that it is not a "
                        "directory")


def _run_dot(dot: str, fmt: str, dot_text: str, scratch: str,
             target: pathlib.Path) -> None:
    try:
        done = subprocess.run([dot, f"-T{fmt}", "-o", scratch],
                              input=dot_text.encode("utf-8"),
                              capture_output=True, timeout=DOT_TIMEOUT,
                              check=False)
    except subprocess.TimeoutExpired:
        raise PictureError(f"--output {target}: Graphviz took more than "
                           f"{DOT_TIMEOUT} s; write the DOT text with "
                           "--format dot and render it yourself") from None
    if done.returncode != 0:
        said = " ".join(done.stderr.decode("utf-8", "replace").split())
        raise PictureError(f"--output {target}: Graphviz's {dot} -T{fmt} "
                           f"failed (exit {done.returncode}): "
                           f"{said or 'no message'}; check the Graphviz "
                           "installation")
