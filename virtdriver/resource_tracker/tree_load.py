"""Ordering providers given in bulk so that parents come first.

``populate_from_iterable`` and ``from_json`` take provider dicts in any
order; they must be created parents first.  :func:`parents_first` sorts
them in one pass (Nova's own loop is quadratic) and refuses orphans and
cycles, naming the provider.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from virtdriver.providers.errors import InvalidProvider, describe
from virtdriver.providers.record import check_uuid


def parents_first(providers: list[Mapping],
                  in_tree: Callable[[str], bool]) -> list[Mapping]:
    """``providers`` reordered so each comes after its parent.

    A provider's parent (``parent_provider_uuid``) must be ``None``, another
    of ``providers``, or a uuid for which ``in_tree`` is true.  Siblings
    keep their relative order.

    Raises:
        InvalidProvider: a uuid is given twice, a parent is nowhere to be
            found, or parents form a cycle.
    """
    given: dict[str, Mapping] = {}
    for provider in providers:
        uuid = check_uuid(_label(provider), "uuid", provider.get("uuid"))
        if uuid in given:
            raise InvalidProvider(_label(provider), "uuid",
                                  "is given for two providers",
                                  "give each provider once")
        given[uuid] = provider
    ready: list[Mapping] = []
    waiting: dict[str, list[Mapping]] = {}
    for provider in providers:
        parent = provider.get("parent_provider_uuid")
        if parent is not None:
            check_uuid(_label(provider), "parent_provider_uuid", parent)
        if parent in given:
            waiting.setdefault(parent, []).append(provider)
        elif parent is None or in_tree(parent):
            ready.append(provider)
        else:
            raise InvalidProvider(
                _label(provider), "parent_provider_uuid",
                f"{parent!r} is neither in the tree nor among the providers "
                "given", "give the parent too, or create it first")
    for provider in ready:  # grows while we walk it: breadth first
        ready.extend(waiting.pop(provider["uuid"], ()))
    if waiting:
        stuck = next(iter(waiting.values()))[0]
        raise InvalidProvider(_label(stuck), "parent_provider_uuid",
                              "is part of a cycle of parents",
                              "make one of them a root")
    return ready


def _label(provider: Mapping) -> str:
    return describe(provider.get("name"), provider.get("uuid"))
