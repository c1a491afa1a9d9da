"""Functional attention ops and their kernels.

match (MatchAttention), camera (PRoPE/GTA/CaPE), rope, additive.
"""
