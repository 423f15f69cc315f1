"""Read ``[pci] alias`` (defined in :mod:`virtdriver.conf.devices`) into
the aliases flavors name (:func:`~virtdriver.claims.device_request.
parse_aliases`)."""

from __future__ import annotations

from typing import Any

from virtdriver.claims.device_request import PciAlias, parse_aliases
from virtdriver.conf.reader import OptionReader


def pci_aliases(conf: Any) -> dict[str, PciAlias]:
    """The aliases ``conf`` defines (none without a configuration).

    Raises:
        InvalidRequest: every bad value, one line each naming
            ``[pci] alias #N``.
        ConfigError: the option cannot be read at all.
    """
    if conf is None:
        return {}
    reader = OptionReader(conf)
    values = reader.get("pci", "alias") or []
    reader.check()
    return parse_aliases(list(values))
