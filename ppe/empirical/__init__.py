"""Empirical performance models: measured runs of applications and what is fitted to them.

Pure computation: no I/O, no store, no HTTP (the service and the `ppe` command do those).
"""
