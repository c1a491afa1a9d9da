"""Functional attention ops and their kernels.

match (MatchAttention), camera (PRoPE/GTA/CaPE), rope, additive.
"""

from crossview.attention.match import match_attention as match_attention
from crossview.attention.match_backend import choose_backend as choose_backend
from crossview.attention.match_backend import set_backend as set_backend
