"""virtdriver: a virt-driver plugin framework with a libvirt backend."""
