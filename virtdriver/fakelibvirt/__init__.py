"""A stand-in for the ``libvirt`` module so the real libvirt driver runs in
tests without a hypervisor.  Filled in by the fakelibvirt issue."""
