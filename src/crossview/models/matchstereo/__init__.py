"""MatchStereo / MatchFlow (the MatchAttention paper's models), checkpoint-compatible."""

from crossview.models.matchstereo.config import VARIANTS as VARIANTS
from crossview.models.matchstereo.config import MatchStereoConfig as MatchStereoConfig
from crossview.models.matchstereo.model import MatchStereo as MatchStereo
