"""The MatchStereo configuration the tests build their networks from: every part of the
architecture, one block and a few channels each, so that a pair runs in well under a second."""

from __future__ import annotations

from crossview.models.matchstereo import MatchStereoConfig

SMALL = MatchStereoConfig(dims=(8, 16, 16, 24), encoder_depths=(1, 1, 1, 1),
                          decoder_layers=(1, 1, 1, 1), heads=2, encoder_head=0)
