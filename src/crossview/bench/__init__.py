"""Benchmarks behind ``crossview bench``: one module per subject, shared helpers in ``report``."""
