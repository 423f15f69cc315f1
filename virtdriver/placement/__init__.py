"""Everything that speaks HTTP to Placement (``docs/placement.md``).

``client`` (keystoneauth1, microversions, typed errors), ``plan`` (the
smallest writes per provider, pure), ``sync`` (order, 409 retry, deletion),
``state`` (what the last sync saw, persisted), ``ownership`` (the owned_for
callable from a resource tracker), ``embedded`` (Placement in-process or
on loopback).  Importing this package imports none of them.
"""
