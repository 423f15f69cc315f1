"""The exceptions a provider tree raises.

All derive from :class:`ValueError`, as Nova's ``ProviderTree`` raises plain
``ValueError``: driver code that catches ``ValueError`` ports over unchanged.
"""

from __future__ import annotations


def describe(name: str | None, uuid: str | None) -> str:
    """``provider 'name' (uuid)``: how every message names a provider."""
    if name is None:
        return f"provider {uuid}"
    if uuid is None or uuid == name:
        return f"provider {name!r}"
    return f"provider {name!r} ({uuid})"


class ProviderTreeError(ValueError):
    """Base class of every error a provider tree raises."""


class ProviderNotFound(ProviderTreeError):
    """No provider in the tree has the given name or uuid.

    Attributes:
        name_or_uuid: what was looked up.
    """

    def __init__(self, name_or_uuid: str) -> None:
        self.name_or_uuid = name_or_uuid
        super().__init__(f"no provider named or with uuid {name_or_uuid!r} "
                         "in the tree; create it with new_root()/new_child() "
                         "first")


class ProviderExists(ProviderTreeError):
    """A new provider's name or uuid is already taken in the tree.

    Attributes:
        provider: description of the provider that could not be added.
        value: its name or uuid that is taken.
        holder: description of the provider that holds it.
    """

    def __init__(self, provider: str, value: str, holder: str) -> None:
        self.provider = provider
        self.value = value
        self.holder = holder
        super().__init__(f"cannot add {provider}: {value!r} is already the "
                         f"name or uuid of {holder}; names and uuids must be "
                         "unique in the tree (remove() the other provider "
                         "first, or pick another name)")


class InvalidProvider(ProviderTreeError):
    """A value given for a provider is not valid.

    Attributes:
        provider: description of the provider (name and uuid).
        field: which field, e.g. ``"uuid"``, ``"inventories.VCPU.reserved"``
            or ``"traits"``.
        reason: what is wrong with it.
        hint: what to do about it.
    """

    def __init__(self, provider: str, field: str, reason: str,
                 hint: str) -> None:
        self.provider = provider
        self.field = field
        self.reason = reason
        self.hint = hint
        super().__init__(f"{provider}: {field}: {reason}; {hint}")
