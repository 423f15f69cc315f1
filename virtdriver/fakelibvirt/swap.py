"""Make code that does ``import libvirt`` use fakelibvirt, unchanged.

:func:`use_fakelibvirt` puts fakelibvirt in ``sys.modules["libvirt"]`` (so
later ``import libvirt`` statements get it) and rebinds the module global
``libvirt`` of every loaded module of the named packages (``virtdriver``
by default) that holds the real one (so code imported earlier calls the
fake, and its ``except libvirt.libvirtError`` catches the fake's errors).
On exit both are put back.

Limits:

* Names bound with ``from libvirt import X`` are copies, not the module;
  they are not rebound.  Values computed from libvirt at import (such as
  ``session.CONNECTION_LOST``) keep the real values, which equal the
  fake's constants.
* Only module globals called ``libvirt`` in the named packages are
  rebound; pass your driver's package in ``packages``.
* The libvirt driver's event loop (:func:`virtdriver.drivers.libvirt.
  connection.ensure_event_loop`) is marked started for the swap: the fake
  needs no loop, and a loop thread started on the fake would call the
  *real* ``virEventRunDefaultImpl`` after the swap ends without the real
  loop being registered.  A real loop thread already running sees the
  fake's (idle) iteration until the swap ends.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from types import ModuleType

from virtdriver.fakelibvirt import real_guard

#: Where ``ensure_event_loop`` and its ``_loop_started`` flag live.
CONNECTION_MODULE = "virtdriver.drivers.libvirt.connection"


class Swap:
    """One swap in effect; :meth:`restore` undoes it (once)."""

    def __init__(self, packages: Iterable[str] = ("virtdriver",), *,
                 warn_real: bool = False) -> None:
        self.fake = importlib.import_module("virtdriver.fakelibvirt")
        self.packages = tuple(packages)
        self.active = sys.modules.get("libvirt") is not self.fake
        self.rebound: list[ModuleType] = []
        if not self.active:  # nested: the outer swap restores
            return
        # Import the driver's connection module under the real libvirt
        # (when there is one), so its loop flag can be held for the swap.
        try:
            connection = importlib.import_module(CONNECTION_MODULE)
        except ImportError:  # no real libvirt: import it under the fake
            connection = None
        #: The real module, or ``None`` where libvirt is not installed.
        self.previous = sys.modules.get("libvirt")
        sys.modules["libvirt"] = self.fake
        if connection is None:
            connection = importlib.import_module(CONNECTION_MODULE)
        self._connection = connection
        self._loop_started = connection._loop_started
        connection._loop_started = True
        self.rebound = [m for m in self._modules()
                        if getattr(m, "libvirt", None) is self.previous
                        and self.previous is not None]
        for module in self.rebound:
            module.libvirt = self.fake
        #: The real module's ``open`` calls, guarded for the swap.
        self._guard = (real_guard.guard(self.previous, warn_real=warn_real)
                       if self.previous is not None else None)

    def restore(self) -> None:
        """Put the real libvirt back where the swap put the fake."""
        if not self.active:
            return
        self.active = False
        if self._guard is not None:
            self._guard.restore()
        real = self.previous
        if real is None:
            # No real libvirt to return to; modules imported during the
            # swap keep the fake (they could not have imported otherwise).
            sys.modules.pop("libvirt", None)
        else:
            sys.modules["libvirt"] = real
            # Modules imported during the swap bound the fake as well.
            for module in self._modules():
                if getattr(module, "libvirt", None) is self.fake:
                    module.libvirt = real
        self._connection._loop_started = self._loop_started

    def _modules(self) -> list[ModuleType]:
        return [module for name, module in list(sys.modules.items())
                if module is not None and any(
                    name == p or name.startswith(p + ".")
                    for p in self.packages)
                and name != "virtdriver.fakelibvirt"]


@contextmanager
def use_fakelibvirt(packages: Iterable[str] = ("virtdriver",), *,
                    warn_real: bool = False) -> Iterator[ModuleType]:
    """Within the block, ``libvirt`` is fakelibvirt; yields the module.

    ``packages``: whose modules' ``libvirt`` globals are rebound (add an
    out-of-tree driver's package name).  A ``fake:///`` URI that reaches
    the real libvirt meanwhile is refused, naming the module that still
    holds it; with ``warn_real`` a real connection opened by code that is
    not a test module warns the same way (:mod:`.real_guard`).
    """
    swap = Swap(packages, warn_real=warn_real)
    try:
        yield swap.fake
    finally:
        swap.restore()
