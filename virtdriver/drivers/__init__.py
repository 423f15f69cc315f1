"""Virt drivers: one module or package per backend.

Drivers register under the ``virtdriver.drivers`` entry-point namespace.
"""
