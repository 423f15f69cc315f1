"""An out-of-tree virtdriver driver: one node, a few inventories and traits.

Registered as ``example`` in the ``virtdriver.drivers`` entry-point
namespace (see ``pyproject.toml``); ``docs/driver-authors.md`` in virtdriver
walks through it.
"""

from virtdriver_example.driver import ExampleDriver

__all__ = ["ExampleDriver"]
