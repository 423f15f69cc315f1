"""Run a Nova virt driver's resource reporting under virtdriver, unchanged.

:class:`NovaDriver` is a thin :class:`~virtdriver.drivers.base.
ComputeDriver` around an object with Nova's virt driver API (a
``nova.virt.driver.ComputeDriver`` subclass, or anything shaped like
one): ``capabilities``, ``init_host``, ``get_available_nodes``,
``update_provider_tree`` and ``cleanup_host`` are passed through as they
are, and the tree the driver changes is virtdriver's
:class:`~virtdriver.resource_tracker.provider_tree.ProviderTree`, whose
methods are Nova's.  Nova's ``ReshapeNeeded`` and
``HypervisorUnavailable`` (recognised by class name, so virtdriver never
imports Nova) become virtdriver's.  A driver declares no ownership here:
it owns the traits it set itself, as in Nova.

Register a subclass naming the Nova class by its import path::

    class MyNovaDriver(NovaDriver):
        nova_target = "mypackage.virt.driver:MyDriver"

    # pyproject.toml
    [project.entry-points."virtdriver.drivers"]
    mynova = "mypackage.virtdriver_entry:MyNovaDriver"

``docs/driver-authors.md`` ("Porting a Nova driver") has the whole story
and ``tests/nova_compat/run_nova_drivers.py`` runs Nova's own fake
drivers this way.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any

from virtdriver.drivers.base import (
    ComputeDriver, DriverError, HypervisorUnavailable, ProviderTreeLike,
    ReshapeNeeded)

#: Nova's exception class names → virtdriver's class.
_TRANSLATED: dict[str, type[Exception]] = {
    "ReshapeNeeded": ReshapeNeeded,
    "HypervisorUnavailable": HypervisorUnavailable,
}


class NovaDriver(ComputeDriver):
    """A Nova virt driver, as a virtdriver driver.

    Args:
        driver: the Nova driver object; default: :attr:`nova_target`'s
            class, built with ``virtapi=None``.

    Raises:
        DriverError: no driver given and :attr:`nova_target` unset or not
            importable.
    """

    #: ``"module:Class"`` of the Nova driver class to build.
    nova_target: str | None = None

    def __init__(self, *, driver: Any = None) -> None:
        if driver is None:
            driver = _build(self.nova_target)
        self.nova = driver

    @property
    def capabilities(self) -> Mapping[str, bool]:
        """The Nova driver's capabilities dict."""
        return dict(getattr(self.nova, "capabilities", {}))

    def init_host(self, host: str) -> None:
        _call(self.nova.init_host, host)

    def get_available_nodes(self, refresh: bool = False) -> list[str]:
        return sorted(_call(self.nova.get_available_nodes, refresh))

    def update_provider_tree(self, tree: ProviderTreeLike, nodename: str,
                             allocations: Mapping[str, Any] | None = None
                             ) -> None:
        self.require_node(nodename)
        _call(self.nova.update_provider_tree, tree, nodename,
              allocations=allocations)

    def cleanup_host(self, host: str) -> None:
        cleanup = getattr(self.nova, "cleanup_host", None)
        if cleanup is not None:
            _call(cleanup, host)


def _build(target: str | None) -> Any:
    if not target or ":" not in target:
        raise DriverError("NovaDriver: set nova_target = 'module:Class' (the "
                          "Nova driver class) or pass driver=")
    module, _, name = target.partition(":")
    try:
        cls = getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError) as exc:
        raise DriverError(f"NovaDriver: cannot import {target} ({exc}); "
                          "install the package that provides it") from exc
    return cls(virtapi=None)


def _call(method: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """``method(...)``, Nova's exceptions of :data:`_TRANSLATED`'s names
    raised as virtdriver's (the original chained)."""
    try:
        return method(*args, **kwargs)
    except Exception as exc:
        for cls in type(exc).__mro__:
            ours = _TRANSLATED.get(cls.__name__)
            if ours is not None and not isinstance(exc, ours):
                raise ours(str(exc)) from exc
        raise
