"""The ``crossview`` command line: parse, call :mod:`crossview.api`, print. Nothing else."""
