"""``compute_driver = virtdriver.LibvirtDriver``: Nova imports
``'nova.virt.%s' % CONF.compute_driver``, so the driver has to be found
under ``nova.virt``; it lives in :mod:`virtdriver_nova.driver`."""

from virtdriver_nova.driver import LibvirtDriver

__all__ = ["LibvirtDriver"]
