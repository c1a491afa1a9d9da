"""Reproducible experiments (the camera-encoding comparison)."""
