"""Models and their registry and weights.

MatchStereo/MatchFlow, TransforMatcher, the multi-view transformer.
"""
