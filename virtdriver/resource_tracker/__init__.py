"""Resource tracking: the provider tree, owned-trait reconciliation, claims and
the Placement client.  Filled in by the resource tracker issue."""
