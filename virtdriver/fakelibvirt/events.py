"""libvirt's default event loop: kept as a name for older imports; the
loop is :mod:`virtdriver.fakelibvirt.event_loop`."""

from virtdriver.fakelibvirt.event_loop import (  # noqa: F401
    ITERATION_SECONDS, dispatch, registered, require, virEventRegisterDefaultImpl,
    virEventRunDefaultImpl, wake)
