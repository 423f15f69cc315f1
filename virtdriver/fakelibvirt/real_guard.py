"""The missing-package hint: while fakelibvirt is swapped in, the *real*
``libvirt`` module's ``open``, ``openReadOnly`` and ``openAuth`` check who
calls them.

* A ``fake:///`` URI is refused with the real module's ``libvirtError``
  (``VIR_ERR_NO_CONNECT``, as libvirt has no such driver), naming the
  module that still holds the real ``libvirt`` and the
  ``fakelibvirt_packages`` ini option that would swap it — instead of the
  daemon socket error the real libvirt would give.
* With ``warn_real`` (the pytest fixture), a real connection opened by a
  module that is not a test module warns (:class:`RealLibvirtWarning`)
  with the same hint: code under test reaching a real host during a
  fakelibvirt test is almost always a package missing from the option.
"""

from __future__ import annotations

import os
import sys
import warnings
from collections.abc import Callable
from types import ModuleType
from typing import Any
from urllib.parse import urlsplit

#: The ini option that names packages to swap (pytest_plugin).
OPTION = "fakelibvirt_packages"
_GUARDED = ("open", "openReadOnly", "openAuth")


class RealLibvirtWarning(UserWarning):
    """Code under a fakelibvirt test opened a real libvirt connection."""


def hint(module: str) -> str:
    """What to do about ``module`` holding the real ``libvirt``."""
    package = module.split(".")[0]
    return (f"module {module!r} still holds the real libvirt, not "
            f"fakelibvirt; add its package {package!r} to the ini option "
            f"{OPTION} (or pass it to use_fakelibvirt(packages=...))")


def is_test_module(name: str, filename: str | None) -> bool:
    """Whether the caller is a test module (tests open real connections
    on purpose, to compare)."""
    base = os.path.basename(filename or "")
    return (base.startswith("test_") or base.endswith("_test.py")
            or base == "conftest.py" or name.split(".")[-1] == "conftest")


class Guard:
    """The real module's open calls, wrapped until :meth:`restore`."""

    def __init__(self, real: ModuleType, *, warn_real: bool) -> None:
        self.real = real
        self.originals = {n: getattr(real, n) for n in _GUARDED
                          if callable(getattr(real, n, None))}
        for name, original in self.originals.items():
            setattr(real, name, self._wrap(original, warn_real))

    def _wrap(self, original: Callable[..., Any],
              warn_real: bool) -> Callable[..., Any]:
        real = self.real

        def open_checked(name: str | None = None, *args: Any,
                         **kwargs: Any) -> Any:
            caller = sys._getframe(1).f_globals
            module = caller.get("__name__", "?")
            if urlsplit(name or "").scheme == "fake":
                raise refusal(real, name, module)
            if warn_real and not is_test_module(module,
                                                caller.get("__file__")):
                warnings.warn(f"a real libvirt connection to {name!r} was "
                              f"opened during a fakelibvirt test: "
                              f"{hint(module)}", RealLibvirtWarning,
                              stacklevel=2)
            return original(name, *args, **kwargs)

        open_checked.__wrapped__ = original  # type: ignore[attr-defined]
        open_checked.__name__ = original.__name__
        return open_checked

    def restore(self) -> None:
        for name, original in self.originals.items():
            setattr(self.real, name, original)


def guard(real: ModuleType, *, warn_real: bool = False) -> Guard:
    return Guard(real, warn_real=warn_real)


def refusal(real: ModuleType, uri: str | None, module: str) -> Exception:
    """The real ``libvirtError`` for a fake URI, with the hint."""
    message = (f"no connection driver available for {uri}: "
               f"{hint(module)}")
    error = real.libvirtError.__new__(real.libvirtError)
    Exception.__init__(error, message)
    error.err = (real.VIR_ERR_NO_CONNECT, real.VIR_FROM_NONE, message,
                 real.VIR_ERR_ERROR, "no connection driver available for %s",
                 uri, None, -1, -1)
    return error
