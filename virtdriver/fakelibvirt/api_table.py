"""What libvirt-python has: its public calls and their C functions, and
every ``VIR_*`` constant — the table behind "everything else is a libvirt
error".

``libvirt_api.json`` beside this module was read from libvirt-python
12.8.0 (``libvirt.py``: each public function and method of ``virConnect``,
``virDomain`` and ``virNodeDevice`` with the first ``libvirtmod.vir*``
function it calls; every ``VIR_*`` int or string constant).  A test reads
the installed libvirt-python the same way and compares, so the table
stays the installed module's.

A call fakelibvirt does not implement is answered from here: it raises
``VIR_ERR_NO_SUPPORT`` with libvirt's words and the C function's name, in
the error domain of the libvirt source file that holds that function.
"""

from __future__ import annotations

import json
import pathlib
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any, NoReturn

from virtdriver.fakelibvirt import constants as c
from virtdriver.fakelibvirt.errors import no_support

_TABLE = json.loads((pathlib.Path(__file__).with_name("libvirt_api.json"))
                    .read_text(encoding="utf-8"))

#: Every ``VIR_*`` constant of libvirt-python, by name.
CONSTANTS: Mapping[str, int | str] = MappingProxyType(_TABLE["constants"])
#: Module-level function name -> the C function it calls.
MODULE_FUNCTIONS: Mapping[str, str] = MappingProxyType(_TABLE["module"])
#: Class name (``virConnect``, ``virDomain``, ``virNodeDevice``) ->
#: method name -> C function (``None``: no C call, such as ``connect``).
METHODS: Mapping[str, Mapping[str, str | None]] = MappingProxyType({
    name: MappingProxyType(_TABLE[name])
    for name in ("virConnect", "virDomain", "virNodeDevice")})

#: C function name part -> the error domain of libvirt's file for it
#: (``src/libvirt-<x>.c`` each define their own ``VIR_FROM_THIS``); the
#: first match counts, anything else is ``libvirt-domain.c`` /
#: ``libvirt-host.c`` (``VIR_FROM_DOMAIN``).
_FILE_DOMAINS = (
    ("DomainSnapshot", c.VIR_FROM_DOMAIN_SNAPSHOT),
    ("Checkpoint", c.VIR_FROM_DOMAIN_CHECKPOINT),
    ("NodeDevice", c.VIR_FROM_NODEDEV),
    ("NWFilter", c.VIR_FROM_NWFILTER),
    ("Network", c.VIR_FROM_NETWORK),
    ("Storage", c.VIR_FROM_STORAGE),
    ("Interface", c.VIR_FROM_INTERFACE),
    ("Secret", c.VIR_FROM_SECRET),
    ("Stream", c.VIR_FROM_STREAMS),
)


def error_domain(function: str) -> int:
    """The error domain libvirt reports ``function``'s errors in."""
    for part, domain in _FILE_DOMAINS:
        if part in function:
            return domain
    return c.VIR_FROM_DOMAIN


def unsupported(function: str) -> Callable[..., NoReturn]:
    """A stand-in for a call whose C function is ``function``: any
    arguments, always ``VIR_ERR_NO_SUPPORT`` naming it."""

    def call(*args: Any, **kwargs: Any) -> NoReturn:
        raise no_support(function, error_domain(function))

    call.__name__ = function
    call.__doc__ = (f"Not implemented by fakelibvirt: raises "
                    f"VIR_ERR_NO_SUPPORT for {function}, as a libvirt "
                    "driver without the call does.")
    return call


class Unsupported:
    """A base for fakelibvirt's classes: a method libvirt-python's class
    of the same name has and the fake lacks is :func:`unsupported`, never
    an ``AttributeError``.  Subclasses set :attr:`LIBVIRT_CLASS`."""

    LIBVIRT_CLASS = ""

    def __getattr__(self, name: str) -> Any:
        function = METHODS.get(type(self).LIBVIRT_CLASS, {}).get(name)
        if function is None or name.startswith("_"):
            raise AttributeError(
                f"{type(self).__name__!r} object has no attribute {name!r}")
        return unsupported(function)


def module_attribute(name: str) -> Any:
    """What ``fakelibvirt.<name>`` is when the package does not define it
    (its module ``__getattr__``): a constant, an unsupported function, or
    ``AttributeError`` as for any module."""
    if name in CONSTANTS:
        return CONSTANTS[name]
    function = MODULE_FUNCTIONS.get(name)
    if function is not None:
        return unsupported(function)
    raise AttributeError(f"module 'virtdriver.fakelibvirt' has no "
                         f"attribute {name!r}")
