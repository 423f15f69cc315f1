"""The test driver plugins: real distributions, registered per test.

Nothing installs them into the environment; a test that loads one calls
:func:`registry.register` (in-process) or puts :func:`registry.register`'s
paths on ``PYTHONPATH`` (a fresh process).
"""
