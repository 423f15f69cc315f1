"""The libvirt backend."""
