"""Cameras, raymaps, coordinate grids, warping and consistency checks."""
