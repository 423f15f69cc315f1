"""Find and load virt drivers through stevedore.

Drivers register in the ``virtdriver.drivers`` entry-point namespace as
``name = module:Class``, where ``Class`` subclasses
:class:`~virtdriver.drivers.base.ComputeDriver`.  Any installed
distribution may add one; :func:`available_drivers` lists them all, with
who provides each and whether it loads, and :func:`load_driver` loads one
by name.  A driver that fails to import is reported by name and never
stops the others from listing or loading.

The constructor contract (``docs/driver-authors.md``): a driver is built
with keyword arguments only.  A caller that serves many drivers (the
``virtdriver`` command) *offers* arguments — :data:`OFFERED_TO_ALL` to
every driver, plus an in-tree driver's own — and :func:`build_driver`
passes each driver those its constructor's signature names (all of them
to ``**kwargs``).  A parameter nobody offers must have a default; one
that has none is refused when the driver is loaded, naming it.
"""

from __future__ import annotations

import difflib
import importlib.metadata
import inspect
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from stevedore import driver as stevedore_driver
from stevedore import exception as stevedore_exception
from stevedore import extension as stevedore_extension

from virtdriver.drivers.base import ComputeDriver, DriverError

#: The entry-point namespace drivers register in.
NAMESPACE = "virtdriver.drivers"

#: The arguments every caller of :func:`build_driver` offers any driver:
#: ``conf``, the configuration (an oslo.config ``ConfigOpts`` for an
#: out-of-tree driver, which may register and read its own options).
OFFERED_TO_ALL = ("conf",)

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
        close = difflib.get_close_matches(name, self.available, n=1)
        guess = f"did you mean {close[0]!r}? " if close else ""
        super().__init__(
            f"no virt driver named {name!r} in entry-point namespace "
            f"{NAMESPACE!r}; {guess}available: {names}.  Choose one of "
            "those, or install the distribution that provides it")


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
        error: why it does not load or cannot be constructed (one line),
            ``None`` when it can.
        note: the driver's own refusal (a :class:`DriverError`) of being
            built with no options — it loads, but needs some (the ironic
            driver its inventory file); ``None`` otherwise.
    """

    name: str
    target: str
    distribution: str | None = None
    version: str | None = None
    error: str | None = None
    note: str | None = None

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
                "ok": self.ok, "error": self.error, "note": self.note}


def available_drivers(offer: Callable[[str], Mapping[str, Any]] | None = None
                      ) -> list[DriverInfo]:
    """Every registered driver, sorted by name, each loaded to check it.

    A driver that fails to import, whose target is not a concrete
    :class:`ComputeDriver` subclass, or whose constructor requires an
    argument that is not offered, is listed with the reason in
    :attr:`DriverInfo.error`; the others are unaffected.  ``offer(name)``
    gives the arguments a caller would offer the driver ``name`` with no
    options (as :func:`build_driver` takes them); with it, each driver is
    also constructed from them (constructors do no I/O), and an exception
    it raises is its error — a :class:`DriverError` is its
    :attr:`DriverInfo.note` instead.  Without it, constructors are only
    checked against :data:`OFFERED_TO_ALL`; nothing is constructed.
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
        note = None
        if key in failures:
            error: str | None = _describe(failures[key])
        else:
            error = _not_a_driver(loaded[key])
            if error is None:
                error, note = _trial(ep.name, loaded[key], offer)
        dist_name, version = dists.get(key, (None, None))
        infos.append(DriverInfo(ep.name, ep.value, dist_name, version, error,
                                note))
    return sorted(infos, key=lambda info: (info.name, info.target))


def _trial(name: str, cls: type[ComputeDriver],
           offer: Callable[[str], Mapping[str, Any]] | None
           ) -> tuple[str | None, str | None]:
    """(error, note) of constructing ``cls`` as :func:`available_drivers`
    says."""
    offered = (offer(name) if offer is not None
               else dict.fromkeys(OFFERED_TO_ALL))
    kwargs, problem = _fit(cls, offered)
    if problem is not None or offer is None:
        return problem, None
    try:
        _construct(name, cls, kwargs)
    except DriverLoadError as exc:
        return exc.reason, None
    except DriverError as exc:
        return None, " ".join(str(exc).split())
    return None, None


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
    """Load the driver registered as ``name`` and construct it with
    exactly ``kwargs`` (an argument it does not take is an error; to pass
    only what it takes, :func:`build_driver`).

    Nothing else is called: :meth:`ComputeDriver.init_host` is the
    caller's next step.

    Raises:
        UnknownDriverError: nothing is registered as ``name``.
        DriverLoadError: it does not load (see :func:`load_driver_class`),
            or its constructor raised something other than a
            :class:`DriverError` (chained).
        DriverError: the constructor's own errors pass through unchanged.
    """
    return _construct(name, load_driver_class(name), kwargs)


def build_driver(name: str, offered: Mapping[str, Any]) -> ComputeDriver:
    """Load the driver registered as ``name`` and construct it with those
    of the ``offered`` keyword arguments its constructor names (every one,
    when it takes ``**kwargs``): the module's constructor contract.

    Raises:
        UnknownDriverError: nothing is registered as ``name``.
        DriverLoadError: it does not load (see :func:`load_driver_class`);
            its constructor requires an argument ``offered`` lacks, or a
            positional one (the message names them); or it raised
            something other than a :class:`DriverError` (chained).
        DriverError: the constructor's own errors pass through unchanged.
    """
    cls = load_driver_class(name)
    kwargs, problem = _fit(cls, offered)
    if problem is not None:
        raise DriverLoadError(name, _target(cls), None, problem)
    return _construct(name, cls, kwargs)


def _fit(cls: type, offered: Mapping[str, Any]
         ) -> tuple[dict[str, Any], str | None]:
    """The part of ``offered`` that ``cls``'s constructor takes, and why
    it cannot be built from ``offered`` (``None``: it can)."""
    try:
        signature = inspect.signature(cls)
    except (TypeError, ValueError):  # not introspectable: offer it all
        return dict(offered), None
    params = list(signature.parameters.values())
    if any(p.kind is p.VAR_KEYWORD for p in params):
        taken = dict(offered)
    else:
        taken = {p.name: offered[p.name] for p in params
                 if p.name in offered
                 and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}
    lacking = [p.name for p in params
               if p.default is p.empty
               and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
               and (p.kind is p.POSITIONAL_ONLY or p.name not in offered)]
    if not lacking:
        return taken, None
    names = ", ".join(repr(name) for name in lacking)
    given = ", ".join(sorted(offered)) or "nothing"
    return taken, (
        f"its constructor {cls.__qualname__}{signature} requires {names}, "
        f"which virtdriver does not pass (it offers this driver: {given}, "
        "by keyword); give each such parameter a default, reading the "
        "setting from conf (`virtdriver help driver-authors`)")


def _construct(name: str, cls: type[ComputeDriver],
               kwargs: Mapping[str, Any]) -> ComputeDriver:
    """``cls(**kwargs)``, any error but a :class:`DriverError` wrapped."""
    try:
        return cls(**kwargs)
    except DriverError:
        raise
    except Exception as exc:
        args = ", ".join(sorted(kwargs)) or "no arguments"
        raise DriverLoadError(
            name, _target(cls), None,
            f"constructing {cls.__qualname__} with {args} raised "
            f"{_describe(exc)}") from exc


def _target(cls: type) -> str:
    return f"{cls.__module__}:{cls.__qualname__}"


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
