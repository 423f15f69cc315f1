"""Find and load virt drivers through stevedore.

Drivers register in the ``virtdriver.drivers`` entry-point namespace as
``name = module:Class``, where ``Class`` subclasses
:class:`~virtdriver.drivers.base.ComputeDriver`.  Any installed
distribution may add one; :func:`available_drivers` lists them all, with
who provides each and whether it loads, and :func:`load_driver` loads one
by name.  A driver that fails to import is reported by name and never
stops the others from listing or loading.
"""

from __future__ import annotations

import importlib.metadata
import inspect
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from stevedore import driver as stevedore_driver
from stevedore import exception as stevedore_exception
from stevedore import extension as stevedore_extension

from virtdriver.drivers.base import ComputeDriver, DriverError

#: The entry-point namespace drivers register in.
NAMESPACE = "virtdriver.drivers"

_SEE_ALL = "`virtdriver drivers` lists every installed driver and whether it loads"


class UnknownDriverError(DriverError, LookupError):
    """No installed distribution registers a driver by that name.

    Attributes:
        name: the name asked for.
        available: every registered name, sorted.
    """

    def __init__(self, name: str, available: Iterable[str]) -> None:
        self.name = name
        self.available = tuple(sorted(set(available)))
        names = ", ".join(self.available) or "none are installed"
        super().__init__(
            f"no virt driver named {name!r} in entry-point namespace "
            f"{NAMESPACE!r}; available: {names}.  Choose one of those, or "
            "install the distribution that provides it")


class DriverLoadError(DriverError):
    """A registered driver could not be loaded.

    The underlying exception, when there is one, is chained as
    ``__cause__``.

    Attributes:
        name: the entry point's name.
        target: what it points at, ``module:attr``.
        provider: the distribution and version registering it, or ``None``.
        reason: what went wrong, one line.
    """

    def __init__(self, name: str, target: str, provider: str | None,
                 reason: str) -> None:
        self.name = name
        self.target = target
        self.provider = provider
        self.reason = reason
        origin = f", registered by {provider}" if provider else ""
        super().__init__(
            f"virt driver {name!r} cannot be loaded: entry point {name} = "
            f"{target} (namespace {NAMESPACE!r}{origin}): {reason}.  Fix or "
            "reinstall that distribution, or choose another driver; "
            f"{_SEE_ALL}")


@dataclass(frozen=True)
class DriverInfo:
    """One registered driver, as :func:`available_drivers` found it.

    Attributes:
        name: the entry point's name (what :func:`load_driver` takes).
        target: ``module:attr`` it points at.
        distribution: the distribution registering it, ``None`` when the
            entry point has no recorded distribution.
        version: that distribution's version.
        error: why it does not load (one line), ``None`` when it does.
    """

    name: str
    target: str
    distribution: str | None = None
    version: str | None = None
    error: str | None = None

    @property
    def ok(self) -> bool:
        """Whether the driver loads."""
        return self.error is None

    @property
    def provider(self) -> str | None:
        """``distribution version``, or ``None`` when unknown."""
        return _provider((self.distribution, self.version))

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict of every field plus ``ok``."""
        return {"name": self.name, "target": self.target,
                "distribution": self.distribution, "version": self.version,
                "ok": self.ok, "error": self.error}


def available_drivers() -> list[DriverInfo]:
    """Every registered driver, sorted by name, each loaded to check it.

    Loading imports each driver's module but constructs nothing.  A driver
    that fails to import, or whose target is not a concrete
    :class:`ComputeDriver` subclass, is listed with the reason in
    :attr:`DriverInfo.error`; the others are unaffected.
    """
    failures: dict[tuple[str, str], BaseException] = {}

    def on_failure(manager: object, ep: importlib.metadata.EntryPoint,
                   err: BaseException) -> None:
        failures[ep.name, ep.value] = err

    manager: stevedore_extension.ExtensionManager[Any] = (
        stevedore_extension.ExtensionManager(
            NAMESPACE, invoke_on_load=False,
            on_load_failure_callback=on_failure))
    loaded = {(ext.name, ext.entry_point_target): ext.plugin
              for ext in manager.extensions}
    dists = _distributions()
    infos = []
    for ep in manager.list_entry_points():
        key = (ep.name, ep.value)
        if key in failures:
            error: str | None = _describe(failures[key])
        else:
            error = _not_a_driver(loaded[key])
        dist_name, version = dists.get(key, (None, None))
        infos.append(DriverInfo(ep.name, ep.value, dist_name, version, error))
    return sorted(infos, key=lambda info: (info.name, info.target))


def load_driver_class(name: str) -> type[ComputeDriver]:
    """The driver class registered as ``name``, imported but not built.

    Raises:
        UnknownDriverError: nothing is registered as ``name``; the message
            lists what is.
        DriverLoadError: the entry point's module fails to import (the
            import error is chained), its target is not a concrete
            :class:`ComputeDriver` subclass, or several entry points
            share ``name`` (the message names each target).
    """
    dists: list[dict[tuple[str, str], tuple[str | None, str | None]]] = []

    def provider(target: str) -> str | None:
        # Only an error names the provider: scanning every distribution's
        # metadata for it costs more than loading the driver.
        if not dists:
            dists.append(_distributions())
        return _provider(dists[0].get((name, target)))

    def on_failure(manager: object, ep: importlib.metadata.EntryPoint,
                   err: BaseException) -> None:
        raise DriverLoadError(name, ep.value, provider(ep.value),
                              _describe(err)) from err

    def on_conflict(namespace: str, name: str,
                    extensions: list[stevedore_extension.Extension[Any]],
                    ) -> stevedore_extension.Extension[Any]:
        targets = sorted(
            f"{ext.entry_point_target} (registered by "
            f"{provider(ext.entry_point_target) or 'an unknown distribution'})"
            for ext in extensions)
        raise DriverLoadError(
            name, " and ".join(targets), None,
            f"{len(targets)} entry points share this name; uninstall all "
            "but one of their distributions")

    try:
        manager: stevedore_driver.DriverManager[Any] = (
            stevedore_driver.DriverManager(
                NAMESPACE, name, invoke_on_load=False,
                on_load_failure_callback=on_failure,
                on_missing_entrypoints_callback=None,
                conflict_resolver=on_conflict))
    except stevedore_exception.NoMatches:
        raise UnknownDriverError(name, _names()) from None
    ext = manager.extensions[0]
    problem = _not_a_driver(ext.plugin)
    if problem:
        raise DriverLoadError(name, ext.entry_point_target,
                              provider(ext.entry_point_target), problem)
    return ext.plugin


def load_driver(name: str, **kwargs: Any) -> ComputeDriver:
    """Load the driver registered as ``name`` and construct it.

    ``kwargs`` go to the driver's constructor.  Nothing else is called:
    :meth:`ComputeDriver.init_host` is the caller's next step.

    Raises:
        UnknownDriverError: nothing is registered as ``name``.
        DriverLoadError: it does not load (see :func:`load_driver_class`),
            or its constructor raised something other than a
            :class:`DriverError` (chained).
        DriverError: the constructor's own errors pass through unchanged.
    """
    cls = load_driver_class(name)
    try:
        return cls(**kwargs)
    except DriverError:
        raise
    except Exception as exc:
        target = f"{cls.__module__}:{cls.__qualname__}"
        args = ", ".join(sorted(kwargs)) or "no arguments"
        raise DriverLoadError(
            name, target, None,
            f"constructing {cls.__qualname__} with {args} raised "
            f"{_describe(exc)}") from exc


def _not_a_driver(plugin: object) -> str | None:
    """Why ``plugin`` is not a loadable driver class, or ``None``."""
    if not (isinstance(plugin, type) and issubclass(plugin, ComputeDriver)):
        what = (f"class {plugin.__qualname__}" if isinstance(plugin, type)
                else f"{type(plugin).__name__} object")
        return (f"the target is a {what}, not a subclass of "
                "virtdriver.drivers.base.ComputeDriver")
    if inspect.isabstract(plugin):
        missing = ", ".join(sorted(plugin.__abstractmethods__))
        return (f"{plugin.__qualname__} does not implement the abstract "
                f"ComputeDriver members: {missing}")
    return None


def _describe(err: BaseException) -> str:
    """``ImportError: No module named 'x'`` — one line."""
    text = " ".join(str(err).split())
    return f"{type(err).__name__}: {text}" if text else type(err).__name__


def _distributions() -> dict[tuple[str, str], tuple[str | None, str | None]]:
    """(entry point name, target) → (distribution name, version).

    stevedore caches entry points without their distribution, so it comes
    from :mod:`importlib.metadata` directly.
    """
    found: dict[tuple[str, str], tuple[str | None, str | None]] = {}
    for ep in importlib.metadata.entry_points(group=NAMESPACE):
        dist = ep.dist
        if dist is None:
            found.setdefault((ep.name, ep.value), (None, None))
        else:
            found[ep.name, ep.value] = (dist.metadata["Name"], dist.version)
    return found


def _names() -> list[str]:
    """Every registered driver name (importlib.metadata's current view)."""
    return sorted({ep.name for ep in
                   importlib.metadata.entry_points(group=NAMESPACE)})


def _provider(dist: tuple[str | None, str | None] | None) -> str | None:
    if dist is None or dist[0] is None:
        return None
    return f"{dist[0]} {dist[1] or '(no version)'}"
