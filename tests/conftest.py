"""Shared by every test directory: pytest puts this file's directory, tests/, on ``sys.path``,
so tests import the helpers kept here (``ranks``, ``hang_guard``) by their module names."""
