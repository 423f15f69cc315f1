"""``[DEFAULT] host``: the node name compute services use.

As in Nova, ``host`` names this compute host; unset, it is the machine's
name (``socket.gethostname()``).  The libvirt driver names its node (and
so its compute node provider, whose uuid derives from the name) after it.
A replayed snapshot names its node after the host it recorded.
"""

from __future__ import annotations

import socket

from virtdriver.conf.reader import DOCS, ConfigError

#: What the sample file shows as the default.
SAMPLE_DEFAULT = "<this machine's host name>"


def host_name(conf, recorded: str | None = None) -> str:
    """``recorded`` (a replayed snapshot's host) if given, else ``[DEFAULT]
    host`` of ``conf`` (a ``ConfigOpts`` or a
    :class:`~virtdriver.conf.defaults.DefaultConf`) when set, else
    ``socket.gethostname()``.

    Raises:
        ConfigError: ``[DEFAULT] host`` is not a host name.
    """
    if recorded:
        return recorded
    try:
        configured = getattr(conf, "host", None)
    except ValueError as exc:  # oslo's HostDomain type refused it
        raise ConfigError([f"[DEFAULT] host: {exc.__context__ or exc}; "
                           f"give this compute host's name (see {DOCS})"]
                          ) from None
    if configured and configured.strip():
        return configured.strip()
    return socket.gethostname()
