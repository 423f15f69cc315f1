"""What a driver owns: the traits it sets true or false, and nothing else."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Ownership:
    """A driver's ownership registry.

    Attributes:
        static: every fixed trait name the driver could ever set, asserted
            or not.
        prefixes: prefixes of dynamic names it owns
            (``CUSTOM_DEV_VENDORID_``).

    The tracker removes an owned trait the driver does not assert and never
    touches any other; so a name the driver can emit but does not own would
    leak, and the registry and the derivations are tested to agree.
    """

    static: frozenset[str] = frozenset()
    prefixes: tuple[str, ...] = ()

    def owns(self, trait: str) -> bool:
        """Whether ``trait`` is this driver's to set and remove."""
        return trait in self.static or trait.startswith(self.prefixes)

    def union(self, other: Ownership) -> Ownership:
        """Both registries together."""
        return Ownership(self.static | other.static,
                         tuple(dict.fromkeys(self.prefixes + other.prefixes)))

    @classmethod
    def of(cls, families: Iterable) -> Ownership:
        """The registry covering every trait and prefix of ``families``."""
        static: set[str] = set()
        prefixes: list[str] = []
        for family in families:
            static |= family.traits
            prefixes.extend(family.prefixes)
        return cls(frozenset(static), tuple(dict.fromkeys(prefixes)))
