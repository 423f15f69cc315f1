"""Fast constructors for frozen slotted dataclasses (records, models).

A frozen dataclass's ``__init__`` sets each field through
``object.__setattr__`` (about 0.1 µs a field), and ``dataclasses.replace``
costs more again.  The provider tree builds a record on every write and a
capability parse builds hundreds of models, so both were dominated by it.
:func:`frozen_builder` gives a constructor that sets the slots directly and
returns an ordinary, frozen instance of the class.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, TypeVar

_Model = TypeVar("_Model")


def frozen_builder(cls: type[_Model], *, all_required: bool = False
                   ) -> Callable[..., _Model]:
    """A fast positional constructor for the frozen slotted dataclass ``cls``.

    The builder is a plain slotted twin with ``cls``'s fields: its
    ``__init__`` sets the slots directly and then turns the instance into a
    ``cls`` (``__class__`` assignment, which CPython allows between classes
    of the same slot layout and base).  What it returns is an ordinary
    ``cls`` instance: frozen, equal, hashable and
    ``dataclasses.asdict``-able like one built by ``cls(...)``.

    It takes the same arguments with the same (plain) defaults and does not
    run ``__post_init__``, so ``cls`` must not have one — unless
    ``all_required``: then every field is a required argument, the caller
    passes each final value (already checked), and ``__post_init__`` and
    default factories are not needed.

    Raises:
        TypeError: ``cls`` is not a frozen, slotted dataclass deriving
            directly from ``object`` (without ``__post_init__`` and with
            plain defaults, unless ``all_required``).
    """
    params = getattr(cls, "__dataclass_params__", None)
    fields = dataclasses.fields(cls) if params is not None else ()
    names = tuple(field.name for field in fields)
    if (params is None or not params.frozen or cls.__bases__ != (object,)
            or getattr(cls, "__slots__", None) != names
            or (hasattr(cls, "__post_init__") and not all_required)):
        raise TypeError(f"{cls.__qualname__}: frozen_builder needs a frozen "
                        "dataclass(slots=True) deriving from object")
    defaults: list[Any] = []
    for field in fields if not all_required else ():
        if field.default is not dataclasses.MISSING:
            defaults.append(field.default)
        elif defaults or field.default_factory is not dataclasses.MISSING:
            raise TypeError(f"{cls.__qualname__}.{field.name}: "
                            "frozen_builder needs plain defaults")
    body = "".join(f"    self.{name} = {name}\n" for name in names)
    namespace: dict[str, Any] = {"cls": cls}
    exec(f"def __init__(self, {', '.join(names)}):\n{body}"  # noqa: S102
         "    self.__class__ = cls\n", namespace)
    init = namespace["__init__"]
    init.__defaults__ = tuple(defaults) or None
    return type(f"{cls.__name__}Builder", (), {
        "__slots__": names, "__init__": init,
        "__doc__": f"Build a {cls.__name__} (see frozen_builder).",
        "__module__": cls.__module__})
