"""Scheduler traits derived from capabilities, each with its evidence.

Pure functions, no I/O.  :func:`derive_traits` runs every trait family
over :class:`DerivationInputs` and returns a :class:`TraitReport`;
:func:`explain` turns any trait name into a sentence and its evidence.
"""
