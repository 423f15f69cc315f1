"""A driver plugin that cannot be imported (see ``driver``)."""
