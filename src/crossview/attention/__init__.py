"""Functional attention ops and their kernels.

match (MatchAttention), camera (PRoPE/GTA/CaPE), rope, additive.
"""

from crossview.attention.additive import additive_attention as additive_attention
from crossview.attention.camera import prope_attention as prope_attention
from crossview.attention.match import choose_backend as choose_backend
from crossview.attention.match import match_attention as match_attention
from crossview.attention.match import set_backend as set_backend
from crossview.attention.match import using_backend as using_backend
from crossview.attention.rope4d import apply_rope4d as apply_rope4d
from crossview.attention.rope4d import rope4d_angles as rope4d_angles
