"""Cameras, raymaps, coordinate grids, warping, consistency checks and the disparity sign rule."""
