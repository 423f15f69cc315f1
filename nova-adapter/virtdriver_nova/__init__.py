"""Nova's libvirt driver with virtdriver's resource reporting.

Installed into a Nova deployment; ``nova.conf`` then says
``compute_driver = virtdriver.LibvirtDriver`` (docs/nova.md)."""
