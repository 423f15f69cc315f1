"""The one place that formats output: one module per subject, each a set
of pure functions (no I/O) from the library's objects to a string.

* :mod:`.host` — a host reading (``host``), where a node's facts came from;
* :mod:`.tree` — a provider tree; :mod:`.dot` and :mod:`.picture` draw it;
* :mod:`.drivers` — the installed drivers;
* :mod:`.explain` — trait explanations;
* :mod:`.claims` and :mod:`.rebuild` — claims, rebuild checks;
* :mod:`.image` — an image's traits and whether a host has them;
* :mod:`.sync`, :mod:`.diff`, :mod:`.progress` — a sync, a host diff, a
  progress bar.

Import the module you need: the package itself imports nothing, so a
command pays only for what it renders.
"""
