"""The records a provider tree holds, below every package that uses them.

The tracker's tree, the provider-config package, the drivers and the
Placement sync all read and build these records; they live here so each of
those imports downwards and none reaches into another.  Pure: no I/O.

| module | one job |
| --- | --- |
| :mod:`.inventory` | ``Inventory`` (immutable record) and the inventory rules |
| :mod:`.record` | ``ProviderData``, name limits, the field checks |
| :mod:`.errors` | the exceptions a tree raises, all ``ValueError``\\ s |
"""
